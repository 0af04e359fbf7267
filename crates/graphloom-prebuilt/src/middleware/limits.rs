//! Call limits: [`ModelCallLimit`] and [`ToolCallLimit`], per thread (kept in the
//! checkpointed state) and per run (reset when a new run starts, a resume included, as
//! LangChain's untracked run counters are).

use super::{last_ai, Hook, HookFuture, HookResult, Hooks, Jump, Middleware};
use crate::create_agent::{AgentGraphState, AgentGraphUpdate, StateField};
use graphloom_core::{JsonReducer, Message, NodeError, Runtime, ToolCall};
use serde_json::{json, Map, Value};

/// What a limit does once reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ExitBehavior {
    /// End the run with an AI message saying which limit was reached.
    #[default]
    End,
    /// Fail the run with [`crate::Error::LimitExceeded`].
    Error,
    /// (Tool limits only) answer the calls over the limit with an error tool message and
    /// let the model go on.
    Continue,
}

/// A run-scoped counter value: `{"run_id": .., <key>: ..}`, worth nothing in another run.
fn run_scoped(state: &AgentGraphState, field: &str, key: &str, rt: &Runtime) -> Option<Value> {
    let v: Value = state.get(field)?;
    (v.get("run_id").and_then(Value::as_str) == Some(rt.run_id())).then(|| v.get(key).cloned())?
}

fn limit_error(limit: &str, message: String) -> NodeError {
    let e = crate::Error::LimitExceeded {
        limit: limit.to_owned(),
        message: message.clone(),
    };
    NodeError::fatal(message).with_source(e)
}

/// Limits model calls per thread and per run (LangChain's `ModelCallLimitMiddleware`).
///
/// Before each call, a limit reached ends the run with the AI message
/// `Model call limits exceeded: run limit (2/2)` ([`ExitBehavior::End`], the default) or
/// fails it ([`ExitBehavior::Error`]). State fields: `thread_model_call_count` (a number)
/// and `run_model_call_count` (`{"run_id", "count"}`).
#[derive(Debug, Clone, Default)]
#[must_use]
pub struct ModelCallLimit {
    thread_limit: Option<u64>,
    run_limit: Option<u64>,
    exit: ExitBehavior,
}

impl ModelCallLimit {
    /// No limit yet: set one with [`Self::thread_limit`] or [`Self::run_limit`].
    pub fn new() -> Self {
        Self::default()
    }
    /// At most `n` model calls per thread (across runs).
    pub fn thread_limit(mut self, n: u64) -> Self {
        self.thread_limit = Some(n);
        self
    }
    /// At most `n` model calls per run.
    pub fn run_limit(mut self, n: u64) -> Self {
        self.run_limit = Some(n);
        self
    }
    /// What to do once a limit is reached.
    pub fn exit_behavior(mut self, b: ExitBehavior) -> Self {
        self.exit = b;
        self
    }

    fn counts(state: &AgentGraphState, rt: &Runtime) -> (u64, u64) {
        let thread = state.get::<u64>("thread_model_call_count").unwrap_or(0);
        let run = run_scoped(state, "run_model_call_count", "count", rt)
            .and_then(|v| v.as_u64())
            .unwrap_or(0);
        (thread, run)
    }

    fn exceeded(&self, thread: u64, run: u64) -> Option<String> {
        let mut over = Vec::new();
        if let Some(l) = self.thread_limit.filter(|l| thread >= *l) {
            over.push(format!("thread limit ({thread}/{l})"));
        }
        if let Some(l) = self.run_limit.filter(|l| run >= *l) {
            over.push(format!("run limit ({run}/{l})"));
        }
        (!over.is_empty()).then(|| format!("Model call limits exceeded: {}", over.join(", ")))
    }
}

impl Middleware for ModelCallLimit {
    fn name(&self) -> &str {
        "ModelCallLimitMiddleware"
    }
    fn hooks(&self) -> Hooks {
        Hooks::of(&[Hook::BeforeModel, Hook::AfterModel])
    }
    fn can_jump_to(&self, hook: Hook) -> Vec<Jump> {
        if hook == Hook::BeforeModel {
            vec![Jump::End]
        } else {
            Vec::new()
        }
    }
    fn state_fields(&self) -> Vec<StateField> {
        vec![
            StateField::last::<u64>("thread_model_call_count"),
            StateField::new::<Value>("run_model_call_count", JsonReducer::LastValue),
        ]
    }
    fn check(&self, _agent: &super::AgentInfo<'_>) -> Result<(), crate::Error> {
        if self.thread_limit.is_none() && self.run_limit.is_none() {
            return Err(crate::Error::middleware(
                self.name(),
                "set at least one limit (thread_limit or run_limit)",
            ));
        }
        if self.exit == ExitBehavior::Continue {
            return Err(crate::Error::middleware(
                self.name(),
                "a model call limit ends or fails the run; `Continue` is for tool limits",
            ));
        }
        Ok(())
    }
    fn before_model<'a>(&'a self, state: &'a AgentGraphState, rt: &'a Runtime) -> HookFuture<'a> {
        Box::pin(async move {
            let (thread, run) = Self::counts(state, rt);
            let Some(message) = self.exceeded(thread, run) else {
                return Ok(HookResult::none());
            };
            match self.exit {
                ExitBehavior::Error => Err(limit_error("model_calls", message)),
                _ => Ok(HookResult::jump(Jump::End)
                    .with_update(AgentGraphUpdate::new().messages(vec![Message::ai(message)]))),
            }
        })
    }
    fn after_model<'a>(&'a self, state: &'a AgentGraphState, rt: &'a Runtime) -> HookFuture<'a> {
        Box::pin(async move {
            let (thread, run) = Self::counts(state, rt);
            Ok(HookResult::update(
                AgentGraphUpdate::new()
                    .set("thread_model_call_count", thread + 1)
                    .set(
                        "run_model_call_count",
                        json!({"run_id": rt.run_id(), "count": run + 1}),
                    ),
            ))
        })
    }
}

/// Limits tool calls, of every tool or of one, per thread and per run (LangChain's
/// `ToolCallLimitMiddleware`).
///
/// After each model call, calls that would go over a limit are answered with an error
/// tool message (`Tool call limit exceeded. Do not call 'search' again.`) and not run.
/// Then, by [`ExitBehavior`]: `Continue` (default) lets the model go on; `End` also
/// answers the other calls of the message and ends the run with an AI message saying
/// which limit was reached; `Error` fails the run. State fields `thread_tool_call_count`
/// (`{tool or "__all__": n}`) and `run_tool_call_count` (`{"run_id", "counts"}`), shared
/// by every instance.
#[derive(Debug, Clone)]
#[must_use]
pub struct ToolCallLimit {
    name: String,
    tool: Option<String>,
    thread_limit: Option<u64>,
    run_limit: Option<u64>,
    exit: ExitBehavior,
}

impl Default for ToolCallLimit {
    fn default() -> Self {
        Self::new()
    }
}

impl ToolCallLimit {
    /// A limit on the calls of every tool; set a limit with [`Self::thread_limit`] or
    /// [`Self::run_limit`].
    pub fn new() -> Self {
        Self {
            name: "ToolCallLimitMiddleware".to_owned(),
            tool: None,
            thread_limit: None,
            run_limit: None,
            exit: ExitBehavior::Continue,
        }
    }
    /// A limit on the calls of tool `name` only.
    pub fn for_tool(name: impl Into<String>) -> Self {
        let tool = name.into();
        Self {
            name: format!("ToolCallLimitMiddleware[{tool}]"),
            tool: Some(tool),
            ..Self::new()
        }
    }
    /// At most `n` calls per thread.
    pub fn thread_limit(mut self, n: u64) -> Self {
        self.thread_limit = Some(n);
        self
    }
    /// At most `n` calls per run.
    pub fn run_limit(mut self, n: u64) -> Self {
        self.run_limit = Some(n);
        self
    }
    /// What to do once a limit is reached.
    pub fn exit_behavior(mut self, b: ExitBehavior) -> Self {
        self.exit = b;
        self
    }

    fn key(&self) -> &str {
        self.tool.as_deref().unwrap_or("__all__")
    }

    fn would_exceed(&self, thread: u64, run: u64) -> bool {
        self.thread_limit.is_some_and(|l| thread + 1 > l) || self.run_limit.is_some_and(|l| run + 1 > l)
    }

    fn final_message(&self, thread: u64, run: u64) -> String {
        let desc = match &self.tool {
            Some(t) => format!("'{t}' tool"),
            None => "Tool".to_owned(),
        };
        let mut over = Vec::new();
        if let Some(l) = self.thread_limit.filter(|l| thread > *l) {
            over.push(format!("thread limit exceeded ({thread}/{l} calls)"));
        }
        if let Some(l) = self.run_limit.filter(|l| run > *l) {
            over.push(format!("run limit exceeded ({run}/{l} calls)"));
        }
        format!("{desc} call limit reached: {}.", over.join(" and "))
    }

    fn blocked_message(&self) -> String {
        match &self.tool {
            Some(t) => format!("Tool call limit exceeded. Do not call '{t}' again."),
            None => "Tool call limit exceeded. Do not make additional tool calls.".to_owned(),
        }
    }
}

fn error_tool_message(content: String, call: &ToolCall) -> Message {
    let mut m = Message::tool(content, &call.id);
    m.name = Some(call.name.clone());
    m.extra.insert("status".into(), json!("error"));
    m
}

impl Middleware for ToolCallLimit {
    fn name(&self) -> &str {
        &self.name
    }
    fn hooks(&self) -> Hooks {
        Hooks::of(&[Hook::AfterModel])
    }
    fn can_jump_to(&self, _hook: Hook) -> Vec<Jump> {
        vec![Jump::End]
    }
    fn state_fields(&self) -> Vec<StateField> {
        vec![
            StateField::new::<Value>("thread_tool_call_count", JsonReducer::LastValue),
            StateField::new::<Value>("run_tool_call_count", JsonReducer::LastValue),
        ]
    }
    fn check(&self, _agent: &super::AgentInfo<'_>) -> Result<(), crate::Error> {
        if self.thread_limit.is_none() && self.run_limit.is_none() {
            return Err(crate::Error::middleware(
                self.name(),
                "set at least one limit (thread_limit or run_limit)",
            ));
        }
        if let (Some(t), Some(r)) = (self.thread_limit, self.run_limit) {
            if r > t {
                return Err(crate::Error::middleware(
                    self.name(),
                    format!("run_limit ({r}) cannot exceed thread_limit ({t})"),
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
            let key = self.key().to_owned();
            let mut thread_counts: Map<String, Value> =
                state.get("thread_tool_call_count").unwrap_or_default();
            let mut run_counts: Map<String, Value> = run_scoped(state, "run_tool_call_count", "counts", rt)
                .and_then(|v| v.as_object().cloned())
                .unwrap_or_default();
            let thread_now = thread_counts.get(&key).and_then(Value::as_u64).unwrap_or(0);
            let run_now = run_counts.get(&key).and_then(Value::as_u64).unwrap_or(0);
            let (mut t, mut r) = (thread_now, run_now);
            let mut blocked: Vec<&ToolCall> = Vec::new();
            let mut allowed = 0usize;
            for call in &ai.tool_calls {
                if self.tool.as_ref().is_some_and(|n| *n != call.name) {
                    continue;
                }
                if self.would_exceed(t, r) {
                    blocked.push(call);
                } else {
                    allowed += 1;
                    t += 1;
                    r += 1;
                }
            }
            let run_total = r + blocked.len() as u64;
            thread_counts.insert(key.clone(), json!(t));
            run_counts.insert(key.clone(), json!(run_total));
            let counts_update = |thread: &Map<String, Value>| {
                AgentGraphUpdate::new()
                    .set("thread_tool_call_count", Value::Object(thread.clone()))
                    .set(
                        "run_tool_call_count",
                        json!({"run_id": rt.run_id(), "counts": run_counts}),
                    )
            };
            if blocked.is_empty() {
                if allowed == 0 {
                    return Ok(HookResult::none());
                }
                return Ok(HookResult::update(counts_update(&thread_counts)));
            }
            let hypothetical = t + blocked.len() as u64;
            if self.exit == ExitBehavior::Error {
                return Err(limit_error(
                    "tool_calls",
                    self.final_message(hypothetical, run_total),
                ));
            }
            let mut messages: Vec<Message> = blocked
                .iter()
                .map(|c| error_tool_message(self.blocked_message(), c))
                .collect();
            if self.exit == ExitBehavior::End {
                for call in &ai.tool_calls {
                    if blocked.iter().any(|b| b.id == call.id) {
                        continue;
                    }
                    messages.push(error_tool_message(
                        "Execution stopped before this tool call could run because another tool call in the same batch exceeded the limit.".to_owned(),
                        call,
                    ));
                }
                messages.push(Message::ai(self.final_message(hypothetical, run_total)));
                thread_counts.insert(key, json!(thread_now));
                return Ok(
                    HookResult::jump(Jump::End).with_update(counts_update(&thread_counts).messages(messages))
                );
            }
            Ok(HookResult::update(
                counts_update(&thread_counts).messages(messages),
            ))
        })
    }
}
