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
//! The graph is a `graphloom_prebuilt::create_agent` agent: the adapter and the tool
//! runner are its middleware ([`middleware::CompletionPort`] around every model call,
//! [`middleware::ToolPipeline`] around every tool call). It loops `model -> tools ->
//! model` while the model asks for tools; a question answered in three tool rounds still
//! ends with a single `done` and a single final result.
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

pub mod adapter;
pub mod events;
pub mod executor;
pub mod ledger;
pub mod middleware;
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
pub use ledger::StoreLedger;
pub use route::router;
pub use runtime::{BillingSink, ChargeReceipt, ChatRequest, ChatRun, ChatRuntime, InMemoryBilling};
pub use tools::{
    knowledge_search, redact, search_knowledge, ToolContract, ToolErrorCode, ToolOutcome, ToolRunner,
};
pub use wire::{decode_line, encode_data_stream, DataStreamEncoder, DATA_STREAM_HEADER};

use graphloom_core::checkpoint::DynCheckpointer;
use graphloom_core::store::DynStore;
use graphloom_core::{CompiledGraph, Runtime};
use graphloom_llm::DynChatModel;
use graphloom_prebuilt::create_agent;
use serde_json::json;
use std::sync::Arc;

/// The graph's identifier.
pub const GRAPH_ID: &str = "chat_runtime";

/// The graph's version (stamped on every event as `graph_version`).
pub const GRAPH_VERSION: &str = env!("CARGO_PKG_VERSION");

/// The system prompt (versioned with the code; its changes show in the prompt hash).
pub const SYSTEM_PROMPT: &str =
    "You are a support assistant. Use knowledge_search for product questions; answer briefly.";

/// The chat state: the agent's state (`messages`, merged by id).
pub type ChatState = graphloom_prebuilt::AgentGraphState;

/// An update of [`ChatState`].
pub type ChatStateUpdate = graphloom_prebuilt::AgentGraphUpdate;

/// The caller of a run: the one the [`ChatRuntime`] put in the run's context; else, for a
/// run hosted by `graphloom serve` (or started with a JSON context), the one its context
/// names ([`LlmCaller::from_run_context`]: the authenticated identity with auth on); the
/// graph run id is the run's id.
fn caller_of(rt: &Runtime) -> GraphLlmCaller {
    rt.context::<GraphLlmCaller>()
        .cloned()
        .unwrap_or_else(|| GraphLlmCaller {
            caller: LlmCaller::from_run_context(rt.context::<serde_json::Value>(), rt.run_id()),
            graph_run_id: rt.run_id().to_owned(),
            graph_name: GRAPH_ID.into(),
            graph_version: GRAPH_VERSION.into(),
        })
}

/// The chat graph over an adapter and a tool runner: a `create_agent` agent whose model
/// calls go through the adapter and whose tool calls go through the runner; the loop ends
/// when the model asks for no tool. Every model call's [`ChargeReceipt`] is written to
/// `store` before the model node returns (see [`ledger`]): hosted by `graphloom serve`,
/// that is the server's database.
///
/// # Errors
/// A graph that does not compile.
pub fn graph_with(
    checkpointer: Arc<dyn DynCheckpointer>,
    store: Arc<dyn DynStore>,
    adapter: CompletionAdapter,
    tools: ToolRunner,
) -> graphloom_core::Result<CompiledGraph<ChatState>> {
    let model = adapter.model();
    let ledger = StoreLedger::new(Arc::clone(&store));
    Ok(create_agent(model, middleware::ContractTool::of_runner(&tools))
        .name(GRAPH_ID)
        .system_prompt(SYSTEM_PROMPT)
        .middleware(middleware::CompletionPort::new(adapter, caller_of).ledger(ledger))
        .middleware(middleware::ToolPipeline::new(tools))
        // The pipeline emits `tool_call_start` / `tool_call_result` itself.
        .tool_node(|n| n.stream_results(false))
        .checkpointer_dyn(checkpointer)
        .store_dyn(store)
        .build()?)
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

/// The model `GRAPHLOOM_MODEL` names (e.g. `openai:gpt-4o-mini`), through
/// [`graphloom_llm::model_from_env`]; unset or `scripted`: the [`offline::model`]: a
/// `knowledge_search` call for the user's question, then an answer from its result,
/// computed from the conversation, so any number of runs sharing it work.
///
/// # Errors
/// When `GRAPHLOOM_MODEL` names a model that cannot be built: never the script instead.
pub fn default_model() -> graphloom_llm::Result<Arc<dyn DynChatModel>> {
    graphloom_llm::model_from_env(|| {
        // Shared by every run of a served graph: keep no record of what it was asked.
        Arc::new(offline::model().keep_requests(0))
    })
}

/// A JSON input for the graph's update decoder.
#[must_use]
pub fn sample_input() -> serde_json::Value {
    json!({"messages": [{"type": "human", "content": "How do I reset my password?"}]})
}
