//! [`HumanInTheLoop`]: pause before chosen tools run, with LangChain's request and
//! decision JSON shapes (`HumanInTheLoopMiddleware`, batched mode).
//!
//! After a model answer that calls gated tools, the run pauses with one interrupt for
//! all of them:
//!
//! ```json
//! {"action_requests": [{"name": "send_email", "args": {"to": "a@b.c"}, "description": "..."}],
//!  "review_configs": [{"action_name": "send_email", "allowed_decisions": ["approve", "edit", "reject", "respond"]}]}
//! ```
//!
//! Resume with one decision per request, in order:
//!
//! ```json
//! {"decisions": [{"type": "approve"},
//!                {"type": "edit", "edited_action": {"name": "send_email", "args": {"to": "x@y.z"}}},
//!                {"type": "reject", "message": "not now"},
//!                {"type": "respond", "message": "the answer the tool would have given"}]}
//! ```
//!
//! Approved and edited calls run in the tools node, once: a crash while they run re-runs
//! the node, and every tool gets the same [`ToolRuntime::idempotency_key`](crate::ToolRuntime::idempotency_key)
//! (from thread, task and call id) to deduplicate its side effect. Rejected calls never
//! run: they are answered with an error tool message; `respond` answers with the
//! reviewer's text. A malformed answer (not this shape, the wrong number of decisions, a
//! decision the tool does not allow) runs nothing: the run pauses again with the same
//! request and an `error` field saying what was wrong ([`parse_response`] gives the
//! same verdict as a typed error before resuming).

use super::{last_ai, Hook, HookFuture, HookResult, Hooks, Middleware, ToolCallRequest, ToolNext};
use crate::create_agent::{AgentGraphState, AgentGraphUpdate, StateField};
use crate::tool::{ToolError, ToolOutput};
use futures::future::BoxFuture;
use graphloom_core::{JsonReducer, Message, Runtime, ToolCall};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::fmt::Write as _;

const EDITED_KEY: &str = "hitl_edited_tool_calls";

const EDIT_NOTICE: &str =
    "Note: a human reviewer replaced this tool call before it ran. The call recorded in \
your message is the one you produced, not the one that executed. This was intentional and authorized. Do not \
re-issue your original call.";

/// A decision a reviewer may make.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DecisionType {
    /// Run the call as the model wrote it.
    Approve,
    /// Run the reviewer's call instead.
    Edit,
    /// Do not run it; tell the model.
    Reject,
    /// Do not run it; the reviewer's text is the tool's answer.
    Respond,
}

/// A tool call as a reviewer sees or edits it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Action {
    /// The tool.
    pub name: String,
    /// Its arguments.
    pub args: Value,
}

/// One reviewer decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Decision {
    /// Run the call.
    Approve,
    /// Run `edited_action` instead.
    Edit {
        /// The call to run.
        edited_action: Action,
    },
    /// Do not run the call.
    Reject {
        /// Why (told to the model).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
    },
    /// Answer for the tool.
    Respond {
        /// The tool's answer.
        message: String,
    },
}

impl Decision {
    /// Its type.
    #[must_use]
    pub fn kind(&self) -> DecisionType {
        match self {
            Decision::Approve => DecisionType::Approve,
            Decision::Edit { .. } => DecisionType::Edit,
            Decision::Reject { .. } => DecisionType::Reject,
            Decision::Respond { .. } => DecisionType::Respond,
        }
    }
}

/// The resume value: one decision per action request, in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HitlResponse {
    /// The decisions.
    pub decisions: Vec<Decision>,
}

/// Whether a call is reviewed (see [`InterruptOn::when`]).
type WhenFn = std::sync::Arc<dyn Fn(&ToolCall, &AgentGraphState) -> bool + Send + Sync>;

/// How one tool is reviewed.
#[derive(Clone)]
pub struct InterruptOn {
    allowed: Vec<DecisionType>,
    description: Option<String>,
    when: Option<WhenFn>,
}

impl std::fmt::Debug for InterruptOn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InterruptOn")
            .field("allowed", &self.allowed)
            .field("description", &self.description)
            .finish_non_exhaustive()
    }
}

impl InterruptOn {
    /// Every decision allowed.
    #[must_use]
    pub fn all() -> Self {
        Self::allow([
            DecisionType::Approve,
            DecisionType::Edit,
            DecisionType::Reject,
            DecisionType::Respond,
        ])
    }
    /// These decisions allowed.
    #[must_use]
    pub fn allow(decisions: impl IntoIterator<Item = DecisionType>) -> Self {
        Self {
            allowed: decisions.into_iter().collect(),
            description: None,
            when: None,
        }
    }
    /// The text shown to the reviewer (default: the middleware's prefix, the tool and its
    /// arguments).
    #[must_use]
    pub fn description(mut self, text: impl Into<String>) -> Self {
        self.description = Some(text.into());
        self
    }
    /// Review only calls for which `f` says yes (others are approved).
    #[must_use]
    pub fn when(mut self, f: impl Fn(&ToolCall, &AgentGraphState) -> bool + Send + Sync + 'static) -> Self {
        self.when = Some(std::sync::Arc::new(f));
        self
    }
}

/// Pause before gated tools run; see the [module docs](self).
#[derive(Debug, Clone)]
#[must_use]
pub struct HumanInTheLoop {
    interrupt_on: BTreeMap<String, InterruptOn>,
    description_prefix: String,
    edit_notice: Option<String>,
}

impl Default for HumanInTheLoop {
    fn default() -> Self {
        Self::new()
    }
}

/// Why a resume value was refused.
fn refuse(msg: impl Into<String>) -> crate::Error {
    crate::Error::Decision { message: msg.into() }
}

/// Check a resume value against a request (as the middleware will): the typed
/// decisions, or why they are refused.
///
/// # Errors
/// [`crate::Error::Decision`]: not `{"decisions": [...]}`, a decision of unknown shape,
/// the wrong number of decisions, or a decision type the tool does not allow.
pub fn parse_response(request: &Value, answer: &Value) -> Result<HitlResponse, crate::Error> {
    let response: HitlResponse = serde_json::from_value(answer.clone()).map_err(|e| {
        refuse(format!(
            "the answer must be {{\"decisions\": [{{\"type\": \"approve\" | \"edit\" | \"reject\" | \"respond\", ...}}]}}: {e}"
        ))
    })?;
    let configs = request
        .get("review_configs")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if response.decisions.len() != configs.len() {
        return Err(refuse(format!(
            "Number of human decisions ({}) does not match number of hanging tool calls ({}).",
            response.decisions.len(),
            configs.len()
        )));
    }
    for (d, c) in response.decisions.iter().zip(&configs) {
        let allowed: Vec<DecisionType> = c
            .get("allowed_decisions")
            .and_then(|a| serde_json::from_value(a.clone()).ok())
            .unwrap_or_default();
        if !allowed.contains(&d.kind()) {
            let name = c.get("action_name").and_then(Value::as_str).unwrap_or_default();
            return Err(refuse(format!(
                "Decision type '{}' is not allowed for tool '{name}'. Expected one of {:?} based on the tool's configuration.",
                serde_json::to_value(d.kind()).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default(),
                allowed.iter().map(|a| serde_json::to_value(a).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default()).collect::<Vec<_>>()
            )));
        }
        if let Decision::Edit { edited_action } = d {
            if !edited_action.args.is_object() {
                return Err(refuse(
                    "an `edit` decision's `edited_action.args` must be an object",
                ));
            }
        }
    }
    Ok(response)
}

/// A JSON value as Python prints it (`{'a': 1, 'b': True}`), so descriptions read as
/// LangChain writes them.
#[must_use]
pub fn python_repr(v: &Value) -> String {
    let mut out = String::new();
    repr_into(v, &mut out);
    out
}

fn repr_str(s: &str, out: &mut String) {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out.push(quote);
}

fn repr_into(v: &Value, out: &mut String) {
    match v {
        Value::Null => out.push_str("None"),
        Value::Bool(true) => out.push_str("True"),
        Value::Bool(false) => out.push_str("False"),
        Value::Number(n) => {
            let _ = write!(out, "{n}");
        }
        Value::String(s) => repr_str(s, out),
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                repr_into(x, out);
            }
            out.push(']');
        }
        Value::Object(m) => {
            out.push('{');
            for (i, (k, x)) in m.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                repr_str(k, out);
                out.push_str(": ");
                repr_into(x, out);
            }
            out.push('}');
        }
    }
}

/// A JSON value as Python's `json.dumps` writes it (`{"a": 1, "b": [true, null]}`, non-ASCII
/// escaped), so edit notices read as LangChain writes them.
#[must_use]
pub fn python_json(v: &Value) -> String {
    let mut out = String::new();
    dumps_into(v, &mut out);
    out
}

fn dumps_str(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || !c.is_ascii() => {
                let mut buf = [0u16; 2];
                for unit in c.encode_utf16(&mut buf) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

fn dumps_into(v: &Value, out: &mut String) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => {
            let _ = write!(out, "{n}");
        }
        Value::String(s) => dumps_str(s, out),
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                dumps_into(x, out);
            }
            out.push(']');
        }
        Value::Object(m) => {
            out.push('{');
            for (i, (k, x)) in m.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                dumps_str(k, out);
                out.push_str(": ");
                dumps_into(x, out);
            }
            out.push('}');
        }
    }
}

fn answer_message(call: &ToolCall, decision: &Decision) -> Option<Message> {
    let (content, ok) = match decision {
        Decision::Respond { message } => (message.clone(), true),
        Decision::Reject { message: Some(reason) } if !reason.is_empty() => (
            format!("User rejected the tool call for `{}` with reason: {reason}", call.name),
            false,
        ),
        Decision::Reject { .. } => (
            format!(
                "User rejected the tool call for `{}` with id {}. The tool was not executed. Do not retry this tool call unless the user explicitly requests it.",
                call.name, call.id
            ),
            false,
        ),
        Decision::Approve | Decision::Edit { .. } => return None,
    };
    let mut m = Message::tool(content, &call.id);
    m.name = Some(call.name.clone());
    m.extra
        .insert("status".into(), json!(if ok { "success" } else { "error" }));
    Some(m)
}

impl HumanInTheLoop {
    /// No tool gated yet.
    pub fn new() -> Self {
        Self {
            interrupt_on: BTreeMap::new(),
            description_prefix: "Tool execution requires approval".to_owned(),
            edit_notice: Some(EDIT_NOTICE.to_owned()),
        }
    }
    /// Review calls of `tool` as `config` says.
    pub fn interrupt_on(mut self, tool: impl Into<String>, config: InterruptOn) -> Self {
        self.interrupt_on.insert(tool.into(), config);
        self
    }
    /// The first line of the default description.
    pub fn description_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.description_prefix = prefix.into();
        self
    }
    /// The text put before the result of an edited call (`None`: nothing).
    pub fn edit_notice(mut self, notice: Option<String>) -> Self {
        self.edit_notice = notice;
        self
    }

    /// The interrupt's value for the gated calls of `ai`, and their indices.
    fn request(&self, calls: &[ToolCall], state: &AgentGraphState) -> (Value, Vec<usize>) {
        let mut actions = Vec::new();
        let mut configs = Vec::new();
        let mut idx = Vec::new();
        for (i, call) in calls.iter().enumerate() {
            let Some(cfg) = self.interrupt_on.get(&call.name) else {
                continue;
            };
            if cfg.when.as_ref().is_some_and(|w| !w(call, state)) {
                continue;
            }
            let description = cfg.description.clone().unwrap_or_else(|| {
                format!(
                    "{}\n\nTool: {}\nArgs: {}",
                    self.description_prefix,
                    call.name,
                    python_repr(&call.args)
                )
            });
            actions.push(json!({"name": call.name, "args": call.args, "description": description}));
            configs.push(json!({"action_name": call.name, "allowed_decisions": cfg.allowed}));
            idx.push(i);
        }
        (
            json!({"action_requests": actions, "review_configs": configs}),
            idx,
        )
    }
}

impl Middleware for HumanInTheLoop {
    fn name(&self) -> &str {
        "HumanInTheLoopMiddleware"
    }
    fn hooks(&self) -> Hooks {
        Hooks::of(&[Hook::AfterModel, Hook::WrapToolCall])
    }
    fn state_fields(&self) -> Vec<StateField> {
        vec![StateField::new::<Value>(EDITED_KEY, JsonReducer::LastValue)]
    }
    fn check(&self, _agent: &super::AgentInfo<'_>) -> Result<(), crate::Error> {
        for (tool, cfg) in &self.interrupt_on {
            if cfg.allowed.is_empty() {
                return Err(crate::Error::middleware(
                    self.name(),
                    format!("the review of `{tool}` allows no decision; allow at least one"),
                ));
            }
        }
        Ok(())
    }
    fn after_model<'a>(&'a self, state: &'a AgentGraphState, rt: &'a Runtime) -> HookFuture<'a> {
        Box::pin(async move {
            let Some((_, ai)) = last_ai(&state.messages) else {
                return Ok(HookResult::none());
            };
            if ai.tool_calls.is_empty() {
                return Ok(HookResult::none());
            }
            let (request, idx) = self.request(&ai.tool_calls, state);
            if idx.is_empty() {
                let had_edits = state
                    .get::<Map<String, Value>>(EDITED_KEY)
                    .is_some_and(|m| !m.is_empty());
                return Ok(if had_edits {
                    HookResult::update(AgentGraphUpdate::new().set(EDITED_KEY, json!({})))
                } else {
                    HookResult::none()
                });
            }
            let mut error: Option<String> = None;
            let response = loop {
                let mut asked = request.clone();
                if let (Some(e), Value::Object(m)) = (&error, &mut asked) {
                    m.insert("error".into(), Value::String(e.clone()));
                }
                let answer = rt.interrupt(asked)?;
                match parse_response(&request, &answer) {
                    Ok(r) => break r,
                    Err(e) => {
                        error = Some(match e {
                            crate::Error::Decision { message } => message,
                            other => other.to_string(),
                        });
                    }
                }
            };
            let mut tool_messages = Vec::new();
            let mut edited = Map::new();
            for (decision, &i) in response.decisions.iter().zip(&idx) {
                let call = &ai.tool_calls[i];
                if let Decision::Edit { edited_action } = decision {
                    edited.insert(call.id.clone(), json!(edited_action));
                }
                if let Some(m) = answer_message(call, decision) {
                    tool_messages.push(m);
                }
            }
            let mut messages = vec![ai.clone()];
            messages.extend(tool_messages);
            Ok(HookResult::update(
                AgentGraphUpdate::new()
                    .messages(messages)
                    .set(EDITED_KEY, Value::Object(edited)),
            ))
        })
    }
    fn wrap_tool_call<'a>(
        &'a self,
        mut request: ToolCallRequest,
        next: ToolNext,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        let edit = request
            .runtime
            .state
            .get(EDITED_KEY)
            .and_then(|m| m.get(&request.call.id))
            .and_then(|a| serde_json::from_value::<Action>(a.clone()).ok());
        let Some(action) = edit else {
            return next.call(request);
        };
        request.call.name.clone_from(&action.name);
        request.call.args = action.args.clone();
        let notice = self.edit_notice.clone();
        Box::pin(async move {
            let out = next.call(request).await?;
            let Some(notice) = notice else {
                return Ok(out);
            };
            let text = format!(
                "{notice} Executed instead: {} with arguments {}.",
                action.name,
                python_json(&action.args)
            );
            if out.command.is_some() {
                return Ok(out);
            }
            let content = out.to_text();
            Ok(if content.is_empty() {
                ToolOutput::text(text)
            } else {
                ToolOutput::text(format!("{text}\n\nTool response:\n{content}"))
            })
        })
    }
}
