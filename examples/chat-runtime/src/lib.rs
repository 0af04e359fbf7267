//! graphloom example: **chat-runtime** — one executor port for every AI call, an event
//! vocabulary with exactly one `done`, a tool runner with a fixed pipeline and allowlist
//! redaction, billing that sees every usage event even when the client leaves, one prompt
//! hash site, correlation ids on every event, and the AI SDK data stream protocol on the
//! wire.
//!
//! ```text
//! route (route::router, wire)               POST /api/v1/ai/chat; AiEvents -> `0:` `9:` `a:` `e:` `d:` lines
//!   -> ChatRuntime::run_chat_stream          graph run id, relay pump: client + billing
//!     -> GraphExecutor::run_graph            { stream, final_result }; emits `done` once
//!       -> graph: agent <-> tools -> END     agent: CompletionAdapter; tools: ToolRunner
//!         -> CompletionAdapter               model stream, text_delta, prompt hash, usage_report
//!         -> ToolRunner::exec                validate -> execute -> validate -> redact -> emit
//! ```
//!
//! The graph loops `agent -> tools -> agent` while the model asks for tools; a question
//! answered in three tool rounds still ends with a single `done` and a single final result.
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

pub mod adapter;
pub mod events;
pub mod executor;
pub mod offline;
pub mod route;
pub mod runtime;
pub mod tools;
pub mod wire;

pub use adapter::{Completion, CompletionAdapter};
pub use events::{AiEvent, Correlation, EventEnvelope, GraphLlmCaller, LlmCaller, UsageFact};
pub use executor::{
    FinalResult, GraphExecutor, GraphFinal, GraphRun, GraphRunRequest, InProcGraphExecutor, RunError,
};
pub use route::router;
pub use runtime::{BillingSink, ChargeReceipt, ChatRequest, ChatRun, ChatRuntime, InMemoryBilling};
pub use tools::{knowledge_search, redact, ToolContract, ToolErrorCode, ToolOutcome, ToolRunner};
pub use wire::{decode_line, encode_data_stream, DataStreamEncoder, DATA_STREAM_HEADER};

use graphloom_core::checkpoint::DynCheckpointer;
use graphloom_core::store::DynStore;
use graphloom_core::{
    CompiledGraph, Message, MessageKind, NodeError, Runtime, Seq, State, StateGraph, END, START,
};
use graphloom_llm::{ChatOptions, DynChatModel, NodeResultExt, ToolCall};
use serde_json::json;
use std::sync::Arc;

/// The graph's identifier.
pub const GRAPH_ID: &str = "chat_runtime";

/// The graph's version (stamped on every event as `graph_version`).
pub const GRAPH_VERSION: &str = env!("CARGO_PKG_VERSION");

/// The system prompt (versioned with the code; its changes show in the prompt hash).
pub const SYSTEM_PROMPT: &str =
    "You are a support assistant. Use knowledge_search for product questions; answer briefly.";

/// The chat state: the conversation.
#[derive(State, Clone, Default, Debug)]
pub struct ChatState {
    /// The conversation, merged by message id.
    #[reducer(add_messages)]
    pub messages: Seq<Message>,
}

/// The caller of a run: the one the runtime put in the run's context, or (for runs started
/// without the runtime, e.g. by the CLI) one derived from the run id.
fn caller_of(rt: &Runtime) -> GraphLlmCaller {
    rt.context::<GraphLlmCaller>()
        .cloned()
        .unwrap_or_else(|| GraphLlmCaller {
            caller: LlmCaller {
                billing_account_id: "unbilled".into(),
                virtual_key_id: "none".into(),
                request_id: rt.run_id().to_owned(),
                trace_id: rt.run_id().to_owned(),
            },
            graph_run_id: rt.run_id().to_owned(),
            graph_name: GRAPH_ID.into(),
            graph_version: GRAPH_VERSION.into(),
        })
}

fn pending_calls(s: &ChatState) -> Vec<ToolCall> {
    s.messages
        .last()
        .filter(|m| m.kind == MessageKind::Ai)
        .map(|m| m.tool_calls.clone())
        .unwrap_or_default()
}

/// The chat graph over an adapter and a tool runner: `agent` streams the model's answer,
/// `tools` runs the calls it asked for, and the loop ends when it asks for none.
///
/// # Errors
/// A graph that does not compile.
pub fn graph_with(
    checkpointer: Arc<dyn DynCheckpointer>,
    store: Arc<dyn DynStore>,
    adapter: CompletionAdapter,
    tools: ToolRunner,
) -> graphloom_core::Result<CompiledGraph<ChatState>> {
    let specs = tools.specs();
    StateGraph::<ChatState>::new()
        .name(GRAPH_ID)
        .add_node("agent", move |s: Arc<ChatState>, rt: Runtime| {
            let adapter = adapter.clone();
            let options = ChatOptions::new().tools(specs.clone());
            async move {
                let caller = caller_of(&rt);
                let mut history = vec![Message::system(SYSTEM_PROMPT)];
                history.extend(s.messages.iter().cloned());
                let emit = |e: AiEvent| rt.write(&e);
                let done = adapter
                    .execute_stream(&caller, &history, &options, &emit)
                    .await
                    .node()?;
                Ok(ChatStateUpdate::new().messages(vec![done.message]))
            }
        })
        .add_node("tools", move |s: Arc<ChatState>, rt: Runtime| {
            let tools = tools.clone();
            async move {
                let calls = pending_calls(&s);
                if calls.is_empty() {
                    return Err(NodeError::fatal("tools ran without pending tool calls"));
                }
                let emit = |e: AiEvent| rt.write(&e);
                let outcomes = futures::future::join_all(calls.iter().map(|c| tools.exec(c, &emit))).await;
                let replies = outcomes
                    .iter()
                    .map(|o| Message::tool(o.payload().to_string(), o.tool_call_id()))
                    .collect::<Vec<_>>();
                Ok(ChatStateUpdate::new().messages(replies))
            }
        })
        .add_edge(START, "agent")
        .add_conditional_edges_to(
            "agent",
            |s: &ChatState| {
                if pending_calls(s).is_empty() {
                    END
                } else {
                    "tools"
                }
            },
            ["tools", END],
        )
        .add_edge("tools", "agent")
        .checkpointer_dyn(checkpointer)
        .store_dyn(store)
        .compile()
}

/// The example's graph with its tools (`knowledge_search`).
///
/// # Errors
/// A graph that does not compile.
pub fn graph(
    checkpointer: Arc<dyn DynCheckpointer>,
    store: Arc<dyn DynStore>,
    model: Arc<dyn DynChatModel>,
) -> graphloom_core::Result<CompiledGraph<ChatState>> {
    graph_with(
        checkpointer,
        store,
        CompletionAdapter::new(model),
        ToolRunner::new([knowledge_search()]),
    )
}

/// `GRAPHLOOM_MODEL` (e.g. `openai:gpt-4o-mini`) through `init_chat_model`, else the
/// [`offline::model`]: a `knowledge_search` call for the user's question, then an answer
/// from its result, computed from the conversation, so any number of runs sharing it work.
#[must_use]
pub fn default_model() -> Arc<dyn DynChatModel> {
    if let Ok(spec) = std::env::var("GRAPHLOOM_MODEL") {
        match graphloom_llm::init_chat_model(&spec) {
            Ok(m) => return m,
            Err(e) => eprintln!("GRAPHLOOM_MODEL={spec}: {e}; using the offline scripted model"),
        }
    }
    // Shared by every run of a served graph: keep no record of what it was asked.
    Arc::new(offline::model().keep_requests(0))
}

/// A JSON input for the graph's update decoder.
#[must_use]
pub fn sample_input() -> serde_json::Value {
    json!({"messages": [{"type": "human", "content": "How do I reset my password?"}]})
}
