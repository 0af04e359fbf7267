//! graphloom-prebuilt: tools and a prebuilt ReAct agent for graphloom graphs.
//!
//! - [`Tool`]: a name, a description, the JSON Schema of the arguments the *model* supplies,
//!   and `call(args, ToolRuntime)`. [`FnTool::new`] builds one from an async closure over a
//!   typed argument struct (`schemars` schema; doc comments become descriptions).
//! - [`ToolRuntime`]: what a tool gets besides its arguments — the state as JSON, the node
//!   [`graphloom_core::Runtime`] (context, store, stream writer), the `tool_call_id` and an
//!   idempotency key. It is never part of the schema; keys the model supplies for names a
//!   tool declares as [injected](Tool::injected) are dropped before validation.
//! - [`ToolNode`]: runs the tool calls of the last AI message in parallel with validation,
//!   timeouts, a result size cap (256 KB by default), stream redaction and an approval gate
//!   for [mutating](Tool::mutating) tools. Failures become tool messages with
//!   `status: "error"` (or fail the node, if configured). A tool may return a
//!   [`ToolCommand`] (LangGraph's `Command` from a tool): it updates state keys besides
//!   its tool message and routes with `goto`; the commands of parallel calls are joined.
//! - [`tools_condition`] and [`create_react_agent`] over [`AgentState`].
//! - [`create_agent`]: LangChain v1's agent (a model calling tools in a loop) with
//!   [`middleware`] around it — hooks before and after the agent and each model call,
//!   wrappers around each model and tool call — and the standard set (human in the loop,
//!   call limits, token and cost budgets, summarisation, context editing, model fallback,
//!   retries, PII, tool selection, a todo list), a typed per-run context
//!   ([`ContextExt`]), middleware-declared state fields ([`AgentGraphState`]) and
//!   structured output ([`StructuredOutput`]). It compiles to an ordinary graph.
//!
//! # Example
//!
//! ```
//! use graphloom_core::checkpoint::InMemorySaver;
//! use graphloom_core::{Command, Message, RunConfig, RunStatus, ToolCall};
//! use graphloom_llm::{Reply, ScriptedModel};
//! use graphloom_prebuilt::{create_react_agent, AgentOptions, AgentStateUpdate, FnTool, ToolError};
//! use serde_json::json;
//! use std::sync::Arc;
//!
//! #[derive(serde::Deserialize, schemars::JsonSchema)]
//! struct Refund {
//!     /// Order to refund.
//!     order: String,
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let refund = FnTool::new("refund", "Refund an order", |a: Refund, rt| async move {
//!     // `rt.idempotency_key` is stable across retries and resumes of this call.
//!     assert!(rt.idempotency_key.is_some());
//!     Ok::<_, ToolError>(format!("refunded {}", a.order))
//! })
//! .mark_mutating();
//! let model = ScriptedModel::new([
//!     Reply::tool_calls("", vec![ToolCall { id: "c1".into(), name: "refund".into(), args: json!({"order": "A7"}) }]),
//!     Reply::text("Done: A7 is refunded."),
//! ]);
//! let agent = create_react_agent(
//!     Arc::new(model),
//!     [refund.arc()],
//!     AgentOptions::new().system_prompt("You are a support agent.").checkpointer(InMemorySaver::new()),
//! )?;
//! let cfg = RunConfig::thread("support-1");
//! let paused = agent
//!     .invoke(AgentStateUpdate::new().messages(vec![Message::human("refund A7")]), cfg.clone())
//!     .await?;
//! assert_eq!(paused.status, RunStatus::Interrupted);
//! assert_eq!(paused.interrupts[0].value["tool_call"]["args"], json!({"order": "A7"}));
//!
//! let done = agent.resume(Command::resume(json!({"decision": "approve"})), cfg).await?;
//! assert_eq!(done.status, RunStatus::Done);
//! let texts: Vec<String> = done.values.messages.iter().map(Message::text).collect();
//! assert_eq!(texts[2], "refunded A7");
//! assert_eq!(texts[3], "Done: A7 is refunded.");
//! # Ok(()) }
//! ```
//!
//! # Choices
//!
//! - The approval gate collects every verdict of a message before any call of it runs, so
//!   a resume (which re-runs the node from its start) never runs a sibling twice; see
//!   [`ToolNode`].
//! - A malformed verdict interrupts again (the run stays paused) rather than denying; a
//!   gate with no runtime to ask (a direct [`ToolNode::run_message`] call without one)
//!   refuses the call.
//! - Tools are defined over a typed argument struct, with [`FnTool::new`] or the
//!   [`macro@tool`] attribute on `async fn name(args: T, rt: ToolRuntime)` (which adds
//!   `name_tool() -> FnTool`, with the doc comment as description). The arguments are one
//!   struct rather than loose parameters so that their doc comments reach the schema.
//! - [`FnTool`]'s builder methods (`mark_mutating`, `inject`, `stream_fields`,
//!   `result_limit`, `with_timeout`) are named apart from the [`Tool`] getters they set.
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

mod agent;
mod context;
mod create_agent;
mod error;
pub mod middleware;
pub mod supervisor;
mod tool;
mod tool_command;
mod tool_node;

pub use agent::{
    create_react_agent, tools_condition, AgentOptions, AgentState, AgentStateUpdate, AGENT_NODE, TOOLS_NODE,
};
pub use context::ContextExt;
pub use create_agent::{
    create_agent, AgentBuilder, AgentGraphState, AgentGraphUpdate, PromptFn, StateField, Strategy,
    StructuredOutput, SystemPrompt, AGENT_TOOLS_NODE, MODEL_NODE,
};
pub use error::{Error, Result};
pub use graphloom_derive::tool;
pub use supervisor::{create_supervisor, Handoff, SupervisorAgent, SupervisorOptions, SupervisorRouter};
pub use tool::{
    FnTool, Tool, ToolCommand, ToolError, ToolErrorCode, ToolOutput, ToolRuntime, ToolState,
    DEFAULT_MAX_RESULT_BYTES,
};
pub use tool_command::UnansweredToolCall;
pub use tool_node::{
    redact, NodeFuture, ToolAnswer, ToolNode, ToolNodeGraph, DEFAULT_TOOL_TIMEOUT, MESSAGES_KEY,
};
