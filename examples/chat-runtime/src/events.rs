//! The runtime's output vocabulary: [`AiEvent`]s wrapped in an [`EventEnvelope`] that carries
//! the correlation ids, and the caller types those ids come from.

use graphloom_llm::Usage;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Who a direct model call is made for. Has no graph fields on purpose: a call made inside a
/// graph uses [`GraphLlmCaller`], whose graph fields are required.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LlmCaller {
    /// The account that pays.
    pub billing_account_id: String,
    /// The virtual key the call is made with.
    pub virtual_key_id: String,
    /// One per inbound request.
    pub request_id: String,
    /// One per distributed trace.
    pub trace_id: String,
}

fn non_empty<'a>(v: Option<&'a Value>, key: &str) -> Option<&'a str> {
    v?.get(key)?.as_str().map(str::trim).filter(|s| !s.is_empty())
}

impl LlmCaller {
    /// The caller of a run hosted by `graphloom serve`, from the run's JSON context (the
    /// request's `context`, else its `config.configurable`); `run_id` stands in for the
    /// request and trace ids the context does not give.
    ///
    /// - With auth on, the server puts the authenticated identity in the context
    ///   (`langgraph_auth_user_id`, `langgraph_auth_user`, and drops a client's own values
    ///   for those keys): the identity pays. Its `billing_account_id` claim (a JWT claim, or
    ///   what a custom authenticator keeps) names the account, else the identity itself;
    ///   a client's `billing_account_id` is ignored, so no one bills another account. The
    ///   virtual key is the identity's `virtual_key_id` claim, else the context's.
    /// - With auth off, `billing_account_id` and `virtual_key_id` come from the context
    ///   (`anonymous` and `default` when absent, as the chat route's headers).
    /// - `request_id` and `trace_id` come from the context, else they are the run id.
    #[must_use]
    pub fn from_run_context(context: Option<&Value>, run_id: &str) -> Self {
        let identity = non_empty(context, "langgraph_auth_user_id");
        let claims = context.and_then(|c| c.get("langgraph_auth_user"));
        let (billing_account_id, virtual_key_id) = match identity {
            Some(user) => (
                non_empty(claims, "billing_account_id").unwrap_or(user),
                non_empty(claims, "virtual_key_id")
                    .or_else(|| non_empty(context, "virtual_key_id"))
                    .unwrap_or("default"),
            ),
            None => (
                non_empty(context, "billing_account_id").unwrap_or("anonymous"),
                non_empty(context, "virtual_key_id").unwrap_or("default"),
            ),
        };
        Self {
            billing_account_id: billing_account_id.to_owned(),
            virtual_key_id: virtual_key_id.to_owned(),
            request_id: non_empty(context, "request_id").unwrap_or(run_id).to_owned(),
            trace_id: non_empty(context, "trace_id").unwrap_or(run_id).to_owned(),
        }
    }
}

/// A model call inside a graph execution: an [`LlmCaller`] plus the graph's run id, name and
/// version, all required.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GraphLlmCaller {
    /// The request's caller.
    pub caller: LlmCaller,
    /// One per graph execution (owned by the AI runtime).
    pub graph_run_id: String,
    /// The graph's identifier.
    pub graph_name: String,
    /// The graph's version.
    pub graph_version: String,
}

impl GraphLlmCaller {
    /// The ids every event of this run carries.
    #[must_use]
    pub fn correlation(&self) -> Correlation {
        Correlation {
            request_id: self.caller.request_id.clone(),
            trace_id: self.caller.trace_id.clone(),
            graph_run_id: self.graph_run_id.clone(),
            graph_name: self.graph_name.clone(),
            graph_version: self.graph_version.clone(),
        }
    }
}

/// Correlation ids stamped on every event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Correlation {
    /// One per inbound request.
    pub request_id: String,
    /// One per distributed trace.
    pub trace_id: String,
    /// One per graph execution.
    pub graph_run_id: String,
    /// The graph's identifier.
    pub graph_name: String,
    /// The graph's version.
    pub graph_version: String,
}

/// What one model call consumed: the billing fact of a `usage_report`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UsageFact {
    /// One per model call attempt; the billing idempotency key.
    pub invocation_id: String,
    /// The provider (`openai`, `scripted`, ...).
    pub provider: String,
    /// The model name.
    pub model: String,
    /// The prompt hash, computed by the completion adapter (the single computation site).
    pub prompt_hash: String,
    /// Tokens counted.
    pub usage: Usage,
    /// Why the model stopped (`stop`, `tool_calls`, ...), when it answered.
    pub finish_reason: Option<String>,
    /// The provider's response id, when it answered.
    pub response_id: Option<String>,
    /// How long the call took.
    pub duration_ms: u64,
    /// The error, for a failed call (usage is then what was counted before it failed).
    pub error: Option<String>,
}

/// One event of a run, as the runtime emits it (no wire protocol here).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum AiEvent {
    /// A piece of the model's streamed text.
    TextDelta {
        /// The text.
        delta: String,
    },
    /// The tool runner started a tool call.
    ToolCallStart {
        /// Stable id: the model's call id, or one the tool runner generated.
        #[serde(rename = "toolCallId")]
        tool_call_id: String,
        /// The tool's stable name.
        #[serde(rename = "toolName")]
        tool_name: String,
        /// The arguments as the model gave them.
        args: Value,
    },
    /// The tool runner finished a tool call; `result` is redacted to the tool's allowlist,
    /// or `{errorCode, safeMessage}` when it failed.
    ToolCallResult {
        /// Same id as the start event.
        #[serde(rename = "toolCallId")]
        tool_call_id: String,
        /// The tool's stable name.
        #[serde(rename = "toolName")]
        tool_name: String,
        /// The redacted result or the error shape.
        result: Value,
        /// True when the call failed.
        #[serde(rename = "isError", default)]
        is_error: bool,
    },
    /// What one model call consumed (for billing); emitted before `done`.
    UsageReport {
        /// The fact.
        fact: UsageFact,
    },
    /// The run ended. Exactly one per run, always the last event.
    Done,
}

impl AiEvent {
    /// The event's type name (`text_delta`, `tool_call_start`, ...).
    #[must_use]
    pub fn kind(&self) -> &'static str {
        match self {
            AiEvent::TextDelta { .. } => "text_delta",
            AiEvent::ToolCallStart { .. } => "tool_call_start",
            AiEvent::ToolCallResult { .. } => "tool_call_result",
            AiEvent::UsageReport { .. } => "usage_report",
            AiEvent::Done => "done",
        }
    }
}

/// An [`AiEvent`] with the correlation ids of its run and its position in the run's stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventEnvelope {
    /// The run's correlation ids.
    pub correlation: Correlation,
    /// The event.
    pub event: AiEvent,
}
