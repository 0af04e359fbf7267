//! `weather`: the graph the thread-protocol tests run, the same as the Python graph the
//! reference fixtures were recorded from (`tests/js/reference/graph.py`): a model that
//! streams a tool call and then a text answer token by token, a tool, a custom event, and
//! a subgraph that asks for approval with an interrupt in LangChain's human-in-the-loop
//! shape (`action_requests`, `review_configs`).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use futures::future::BoxFuture;
use futures::StreamExt;
use graphloom_core::*;
use graphloom_llm::{
    ChatChunk, ChatModel, ChatOptions, ChunkAssembler, ChunkStream, DynChatModel, NodeResultExt, Reply,
    ScriptedModel,
};
use graphloom_prebuilt::{Tool, ToolError, ToolNode, ToolOutput, ToolRuntime};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

#[derive(State, Clone, Default, Debug)]
pub struct Weather {
    /// Conversation.
    #[reducer(add_messages)]
    pub messages: Seq<Message>,
}

/// The words of the answer, streamed one by one.
pub const ANSWER: [&str; 5] = ["It", " is", " sunny", " in", " Paris."];

/// The model: a `get_weather` call in two chunks, then (after a tool result) the answer.
pub fn model() -> ScriptedModel {
    ScriptedModel::responding(|messages: &[Message], _opts: &ChatOptions| {
        if messages.iter().any(|m| m.kind == MessageKind::Tool) {
            Reply::chunks(ANSWER.iter().map(|w| ChatChunk::text(*w)).collect())
        } else {
            Reply::chunks(vec![
                ChatChunk::tool_call(0, Some("call_1"), Some("get_weather"), "{\"city\": "),
                ChatChunk::tool_call(0, None, None, "\"Paris\"}"),
            ])
        }
    })
}

/// The scripted model with `gap` between its chunks, as a provider streams them (so that a
/// page shows the answer growing rather than all at once).
struct Paced {
    inner: ScriptedModel,
    gap: Duration,
}

impl ChatModel for Paced {
    fn model_name(&self) -> &str {
        self.inner.model_name()
    }
    fn provider(&self) -> &str {
        self.inner.provider()
    }
    async fn invoke(&self, messages: &[Message], options: &ChatOptions) -> graphloom_llm::Result<Message> {
        let mut chunks = self.stream(messages, options);
        let mut asm = ChunkAssembler::with_provider("scripted");
        while let Some(c) = chunks.next().await {
            asm.push(&c?);
        }
        Ok(asm.finish())
    }
    fn stream(&self, messages: &[Message], options: &ChatOptions) -> ChunkStream {
        let gap = self.gap;
        Box::pin(self.inner.stream(messages, options).then(move |c| async move {
            if !gap.is_zero() {
                tokio::time::sleep(gap).await;
            }
            c
        }))
    }
}

struct GetWeather {
    schema: Value,
}

impl Tool for GetWeather {
    fn name(&self) -> &str {
        "get_weather"
    }
    fn description(&self) -> &str {
        "The weather in a city."
    }
    fn schema(&self) -> &Value {
        &self.schema
    }
    fn stream_allowlist(&self) -> Option<&[String]> {
        None
    }
    fn call(&self, args: Value, _rt: ToolRuntime) -> BoxFuture<'static, Result<ToolOutput, ToolError>> {
        let city = args["city"].as_str().unwrap_or("nowhere").to_owned();
        Box::pin(async move { Ok(ToolOutput::text(format!("sunny in {city}"))) })
    }
}

/// The human-in-the-loop request of the review step.
pub fn review_request() -> Value {
    json!({
        "action_requests": [{"name": "send_report", "args": {"city": "Paris"}, "description": "Send the weather report"}],
        "review_configs": [{"action_name": "send_report", "allowed_decisions": ["approve", "edit", "reject"]}],
    })
}

pub fn graph(deps: &graphloom_server::GraphDeps) -> graphloom_core::Result<CompiledGraph<Weather>> {
    paced_graph(deps, Duration::ZERO)
}

/// [`graph`] with its model waiting `gap` before each chunk.
pub fn paced_graph(
    deps: &graphloom_server::GraphDeps,
    gap: Duration,
) -> graphloom_core::Result<CompiledGraph<Weather>> {
    let model: Arc<dyn DynChatModel> = Arc::new(Paced { inner: model(), gap });
    let tool: Arc<dyn Tool> = Arc::new(GetWeather {
        schema: json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
    });
    let review = StateGraph::<Weather>::new()
        .add_node("approve", |_s: Arc<Weather>, rt: Runtime| async move {
            let decision = rt.interrupt(review_request())?;
            let kind = decision
                .pointer("/decisions/0/type")
                .and_then(Value::as_str)
                .unwrap_or("reject")
                .to_owned();
            Ok(WeatherUpdate::new()
                .messages(vec![Message::ai(format!("review: {kind}")).with_id("review-1")]))
        })
        .add_edge(START, "approve")
        .add_edge("approve", END)
        .compile()?;
    StateGraph::<Weather>::new()
        .add_node("agent", move |s: Arc<Weather>, rt: Runtime| {
            let model = Arc::clone(&model);
            async move {
                rt.write(json!({"progress": "thinking"}));
                let reply = model
                    .invoke(&s.messages.to_vec(), &ChatOptions::new())
                    .await
                    .node()?;
                Ok(WeatherUpdate::new().messages(vec![reply]))
            }
        })
        .add_node(
            "tools",
            ToolNode::new([tool]).into_node::<Weather>(|s| &s.messages, |m| WeatherUpdate::new().messages(m)),
        )
        .add_subgraph_shared("review", review)
        .add_edge(START, "agent")
        .add_conditional_edges("agent", |s: &Weather| {
            let calls = s.messages.iter().last().is_some_and(|m| !m.tool_calls.is_empty());
            if calls {
                "tools"
            } else {
                "review"
            }
        })
        .destinations("agent", ["tools", "review"])
        .add_edge("tools", "agent")
        .add_edge("review", END)
        .checkpointer_dyn(Arc::clone(&deps.checkpointer))
        .store_dyn(Arc::clone(&deps.store))
        .compile()
}
