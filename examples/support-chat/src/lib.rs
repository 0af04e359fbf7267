//! graphloom example: **support-chat** — a support agent as a cyclic graph with tool use and
//! self-correction (seed 001).
//!
//! ```text
//!       invalid -> END
//!             ^
//! START -> ingress --safe--> planner --tool_use--> tool_router -> tool_executor -> verifier
//!             |                 |                                                   |  |
//!             | unsafe          +--generate--> generator <-------------success------+  |
//!             v                                   |                                   |
//!          summarizer <---------------------------+      planner <--error/empty-------+
//!             |                                          (bounded: MAX_REPLANS, then the
//!            END                                          generator asks for clarification)
//! ```
//!
//! - `ingress` validates the input (invalid input ends the turn at once with phase
//!   `rejected`, the reason in [`AgentState::rejection`], and the offending message removed
//!   from the thread), loads the user profile from the store and applies the safety policy
//!   (an unsafe message gets a refusal and skips planning).
//! - `planner` asks the model for a structured [`Plan`]: `generate` or `tool_use` with calls.
//! - `tool_router` keeps calls to known, permitted tools (at most
//!   [`SupportConfig::max_tools_per_step`]).
//! - `tool_executor` runs them in parallel, each with a timeout and retries of transient
//!   errors, and redacts every result.
//! - `verifier` re-plans when no result is usable (empty or error), at most
//!   [`SupportConfig::max_replans`] times, emitting `on_custom_event {status: planning_retry}`.
//! - `generator` streams the answer token by token (`on_chat_model_stream`).
//! - `summarizer` adds the turn to the conversation summary and trims the context to
//!   [`SupportConfig::max_context_messages`] messages.
//!
//! Events follow the seed's protocol ([`events`]): `on_chat_model_start`,
//! `on_chat_model_stream`, `on_tool_start`, `on_tool_end`, `on_custom_event`.
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

pub mod data;
pub mod events;
mod nodes;
pub mod offline;
pub mod policy;
pub mod tools;

pub use events::{run_turn, SupportEvent};
pub use policy::SafetyPolicy;
pub use tools::{
    default_tools, redact, redact_text, run_tool, PlannedCall, SupportTool, ToolError, ToolOutput,
    ToolRegistry, ToolStatus,
};

use graphloom_core::checkpoint::DynCheckpointer;
use graphloom_core::store::DynStore;
use graphloom_core::{CompiledGraph, Message, Seq, State, StateGraph, END, START};
use graphloom_llm::DynChatModel;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

/// The graph's identifier.
pub const GRAPH_ID: &str = "support_chat";

/// The agent's state (the seed's `AgentState`, plus the fields its nodes hand each other).
#[derive(State, Clone, Default, Debug)]
pub struct AgentState {
    /// Chat history, merged by message id; trimmed by the summarizer.
    #[reducer(add_messages)]
    pub messages: Seq<Message>,
    /// The session (defaults to the thread id).
    pub session_id: String,
    /// The user.
    pub user_id: String,
    /// Permissions and preferences loaded at ingress.
    pub user_context: Value,
    /// `ingress`, `plan`, `execute`, `verify`, `generate`, `summarize`, `done`, `refused`,
    /// `rejected`.
    pub phase: String,
    /// Temporary storage: the verifier's feedback, the clarification flag.
    pub scratchpad: Value,
    /// Re-plans made this turn.
    pub retry_count: i64,
    /// Tokens used by all model calls of the thread.
    #[reducer(add)]
    pub tokens_used: i64,
    /// When the current turn started (seconds since the Unix epoch).
    pub start_time: f64,
    /// Whether the current message passed the safety policy.
    pub safety_check: bool,
    /// The planner's decision: `generate` or `tool_use`.
    pub next_step: String,
    /// Calls selected by the planner and the router.
    pub tool_calls: Vec<PlannedCall>,
    /// Redacted results of the last execution.
    pub tool_outputs: Vec<ToolOutput>,
    /// Long-term memory: one line per turn, oldest first.
    pub summary: String,
}

impl AgentState {
    /// Why ingress rejected the turn's input, if it did.
    #[must_use]
    pub fn rejection(&self) -> Option<&str> {
        if self.phase == "rejected" {
            self.scratchpad.get("rejection").and_then(Value::as_str)
        } else {
            None
        }
    }
}

/// The planner's decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum NextStep {
    /// Answer directly.
    Generate,
    /// Call tools first.
    ToolUse,
}

/// The planner's structured output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Plan {
    /// What to do next.
    pub next_step: NextStep,
    /// The calls to make (for `tool_use`).
    #[serde(default)]
    pub tool_calls: Vec<PlannedCall>,
}

/// Limits and timings. The seed names the mechanisms but gives no numbers; these are ours.
#[derive(Debug, Clone)]
pub struct SupportConfig {
    /// Longest accepted message, in characters.
    pub max_input_chars: usize,
    /// Re-plans per turn before the generator asks the user for clarification.
    pub max_replans: i64,
    /// Calls run per execution step.
    pub max_tools_per_step: usize,
    /// Time limit of one tool attempt.
    pub tool_timeout: Duration,
    /// Attempts per tool call (transient errors only).
    pub tool_attempts: u32,
    /// Wait before a retry (multiplied by the attempt number).
    pub retry_backoff: Duration,
    /// Messages kept in the context after each turn; older ones live on in the summary.
    pub max_context_messages: usize,
}

impl Default for SupportConfig {
    fn default() -> Self {
        Self {
            max_input_chars: 4_000,
            max_replans: 2,
            max_tools_per_step: 4,
            tool_timeout: Duration::from_secs(5),
            tool_attempts: 3,
            retry_backoff: Duration::from_millis(50),
            max_context_messages: 4,
        }
    }
}

/// What the nodes share.
pub(crate) struct Deps {
    pub model: Arc<dyn DynChatModel>,
    pub tools: ToolRegistry,
    pub config: SupportConfig,
    pub safety: SafetyPolicy,
}

/// The support graph with explicit tools, limits and safety policy.
///
/// # Errors
/// A graph that does not compile.
pub fn graph_with(
    checkpointer: Arc<dyn DynCheckpointer>,
    store: Arc<dyn DynStore>,
    model: Arc<dyn DynChatModel>,
    tools: ToolRegistry,
    config: SupportConfig,
    safety: SafetyPolicy,
) -> graphloom_core::Result<CompiledGraph<AgentState>> {
    let deps = Arc::new(Deps {
        model,
        tools,
        config,
        safety,
    });
    macro_rules! node {
        ($f:path) => {{
            let d = deps.clone();
            move |s: Arc<AgentState>, rt: graphloom_core::Runtime| $f(s, rt, d.clone())
        }};
    }
    StateGraph::<AgentState>::new()
        .name(GRAPH_ID)
        .add_node("ingress", node!(nodes::ingress))
        .add_node("planner", node!(nodes::planner))
        .add_node("tool_router", node!(nodes::tool_router))
        .add_node("tool_executor", node!(nodes::tool_executor))
        .add_node("verifier", node!(nodes::verifier))
        .add_node("generator", node!(nodes::generator))
        .add_node("summarizer", node!(nodes::summarizer))
        .add_edge(START, "ingress")
        .add_conditional_edges_to(
            "ingress",
            |s: &AgentState| {
                if s.safety_check {
                    "planner"
                } else if s.phase == "rejected" {
                    END
                } else {
                    "summarizer"
                }
            },
            ["planner", "summarizer", END],
        )
        .add_conditional_edges_to(
            "planner",
            |s: &AgentState| {
                if s.next_step == "tool_use" {
                    "tool_router"
                } else {
                    "generator"
                }
            },
            ["tool_router", "generator"],
        )
        .add_edge("tool_router", "tool_executor")
        .add_edge("tool_executor", "verifier")
        .add_conditional_edges_to(
            "verifier",
            |s: &AgentState| {
                if s.phase == "plan" {
                    "planner"
                } else {
                    "generator"
                }
            },
            ["planner", "generator"],
        )
        .add_edge("generator", "summarizer")
        .add_edge("summarizer", END)
        .checkpointer_dyn(checkpointer)
        .store_dyn(store)
        .compile()
}

/// The example graph: default tools, limits and safety policy.
///
/// # Errors
/// A graph that does not compile.
pub fn graph(
    checkpointer: Arc<dyn DynCheckpointer>,
    store: Arc<dyn DynStore>,
    model: Arc<dyn DynChatModel>,
) -> graphloom_core::Result<CompiledGraph<AgentState>> {
    graph_with(
        checkpointer,
        store,
        model,
        default_tools(),
        SupportConfig::default(),
        SafetyPolicy::default(),
    )
}

/// The model `GRAPHLOOM_MODEL` names, through [`graphloom_llm::model_from_env`]; unset or
/// `scripted`: the [`offline::model`]: each turn it plans a lookup of the user's question
/// and answers from what the tools found, computed from the call itself, so any number of
/// turns and threads sharing it work.
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
pub fn sample_input() -> Value {
    json!({
        "user_id": "u-123",
        "session_id": "s-1",
        "messages": [{"type": "human", "content": "How do I reset my password?"}]
    })
}
