//! The streaming event protocol of the seed, emitted on graphloom's `custom` stream mode in
//! the shape of LangGraph's `astream_events(version="v2")`:
//! `{"event", "name", "run_id", "data", "metadata": {"langgraph_node", "thread_id"}}`.
//!
//! | event | source node | data |
//! |---|---|---|
//! | `on_chat_model_start` | `planner`, `generator` | `{"input": ...}` |
//! | `on_chat_model_stream` | `generator` | `{"chunk": "..."}` |
//! | `on_tool_start` | `tool_executor` | `{"tool", "input", "call_id"}` |
//! | `on_tool_end` | `tool_executor` | `{"output", "tool", "status", "call_id"}` (redacted) |
//! | `on_custom_event` | `verifier` | `{"status": "planning_retry", ...}` |

use crate::{AgentState, AgentStateUpdate};
use futures::StreamExt;
use graphloom_core::{
    CompiledGraph, Message, RunConfig, RunEvent, RunInput, RunOutput, Runtime, StreamMode, StreamOptions,
};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// Model starts thinking.
pub const ON_CHAT_MODEL_START: &str = "on_chat_model_start";
/// Response tokens.
pub const ON_CHAT_MODEL_STREAM: &str = "on_chat_model_stream";
/// Tool call initiated.
pub const ON_TOOL_START: &str = "on_tool_start";
/// Tool finished.
pub const ON_TOOL_END: &str = "on_tool_end";
/// Graph logic updates.
pub const ON_CUSTOM_EVENT: &str = "on_custom_event";

/// One protocol event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SupportEvent {
    /// The event type.
    pub event: String,
    /// The node that emitted it.
    pub name: String,
    /// The graph run.
    pub run_id: String,
    /// The payload.
    pub data: Value,
    /// `langgraph_node` and `thread_id`.
    pub metadata: Value,
}

/// Emit an event from a node.
pub(crate) fn emit(rt: &Runtime, event: &str, data: Value) {
    rt.write(json!({
        "event": event,
        "name": rt.node(),
        "run_id": rt.run_id(),
        "data": data,
        "metadata": {"langgraph_node": rt.node(), "thread_id": rt.thread_id()},
    }));
}

/// Run one user turn on `thread_id`, handing every protocol event to `on_event` as it
/// happens; returns the run's output.
///
/// # Errors
/// The run's error (invalid input is a fatal ingress error).
pub async fn run_turn(
    graph: &CompiledGraph<AgentState>,
    thread_id: &str,
    user_id: &str,
    text: &str,
    mut on_event: impl FnMut(SupportEvent),
) -> graphloom_core::Result<RunOutput<AgentState>> {
    let input = AgentStateUpdate::new()
        .user_id(user_id.to_owned())
        .messages(vec![Message::human(text)]);
    let mut stream = graph.stream(
        RunInput::Update(input),
        RunConfig::thread(thread_id),
        StreamOptions::modes([StreamMode::Custom]),
    );
    let mut end = None;
    while let Some(ev) = stream.next().await {
        match ev {
            RunEvent::Part(p) => {
                if let Some(e) = p.data_json().ok().and_then(|v| serde_json::from_value(v).ok()) {
                    on_event(e);
                }
            }
            RunEvent::End(out) => end = Some(out),
        }
    }
    end.unwrap_or(Err(graphloom_core::Error::Cancelled))
}
