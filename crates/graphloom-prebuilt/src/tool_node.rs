//! [`ToolNode`]: run the tool calls of the last AI message, in parallel, with validation,
//! timeouts, result caps, stream redaction and the approval gate for mutating tools.

use crate::middleware::{ToolCallRequest, ToolExec, ToolWrap};
use crate::tool::{
    Tool, ToolCommand, ToolError, ToolErrorCode, ToolOutput, ToolRuntime, ToolState, DEFAULT_MAX_RESULT_BYTES,
};
use crate::tool_command::MessagesOut;
use futures::future::BoxFuture;
use graphloom_core::{
    Message, MessageKind, NodeError, NodeOutput, RunType, Runtime, Seq, State, StateGraph, ToolCall,
};
use graphloom_llm::{MessageExt, ToolSpec};
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

/// The future of a tool node in a graph over `S`.
pub type NodeFuture<S> = BoxFuture<'static, Result<NodeOutput<S>, NodeError>>;

/// How [`ToolNode::run_calls`] answered one tool call.
#[derive(Debug, Clone)]
// One short-lived answer per call: boxing the command would buy nothing.
#[allow(clippy::large_enum_variant)]
pub enum ToolAnswer {
    /// A tool message (a result, or an error the model reads).
    Message(Message),
    /// The tool returned a [`ToolCommand`] (or several) for the graph.
    Command {
        /// The call it answers.
        call: ToolCall,
        /// What the tool asked for.
        command: ToolCommand,
        /// The commands it returned after `command`, in order.
        then: Vec<ToolCommand>,
    },
}

/// Default timeout of one tool call.
pub const DEFAULT_TOOL_TIMEOUT: Duration = Duration::from_secs(60);

/// Most schema violations listed in one validation message.
const MAX_VIOLATIONS: usize = 5;

struct Entry {
    tool: Arc<dyn Tool>,
    validator: Result<jsonschema::Validator, String>,
}

/// Runs every tool call of the last AI message, in parallel, each with a timeout, and
/// answers each with a tool message.
///
/// Before a tool runs: its name must be known, its call id unique in the message, its
/// arguments valid JSON and valid against the tool's schema (after dropping keys the tool
/// declares as injected). A call failing any check is answered with an error tool message
/// (`status: "error"`) telling the model what to fix, and the tool does not run. Tools that
/// fail, time out or return more than the size cap are answered the same way. With
/// [`ToolNode::handle_errors`]`(false)` the node fails instead.
///
/// # Approval gate
///
/// Calls of [mutating](Tool::mutating) tools pause the run before anything in the message
/// runs, with `interrupt({"tool_call": {"id", "name", "args"}, ...})` carrying the frozen,
/// validated arguments. Resume with `{"decision": "approve"}`,
/// `{"decision": "edit", "args": {..}}` or `{"decision": "reject", "reason": ".."}`. A
/// malformed or unknown decision (or edited arguments that fail validation) is refused:
/// the node interrupts again, with an `error` field saying why, and nothing runs. Several
/// gated calls in one message are asked one after the other.
///
/// **Siblings run once**: because every verdict is collected *before* any call of the
/// message executes, and a resumed node re-runs from its start, the non-gated siblings run
/// exactly once, together with the approved calls, after the last verdict. (The
/// alternative — running siblings first — would run them again on resume.) A crash while
/// tools execute re-runs the task; every tool gets the same
/// [`ToolRuntime::idempotency_key`] then (derived from thread, task and tool call id), so
/// side effects can be deduplicated downstream.
///
/// # Streams
///
/// For every result, a `custom` stream event
/// `{"tool_result": {"tool_call_id", "name", "status", "content"?}}` is written. `content`
/// holds only the top-level fields of an object result named in the tool's
/// [stream allowlist](Tool::stream_allowlist); without an allowlist no content is written,
/// and a non-object result under an allowlist is withheld with a `redaction` error code.
/// (The full result is in the tool message of the state, which `values`/`updates` streams
/// show: keep secrets out of results, or out of those stream modes.)
#[derive(Clone)]
pub struct ToolNode {
    tools: Arc<BTreeMap<String, Entry>>,
    timeout: Duration,
    max_result_bytes: usize,
    handle_errors: bool,
    wrap: Option<Arc<dyn ToolWrap>>,
    stream_results: bool,
}

impl std::fmt::Debug for ToolNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolNode")
            .field("tools", &self.tools.keys().collect::<Vec<_>>())
            .field("timeout", &self.timeout)
            .field("max_result_bytes", &self.max_result_bytes)
            .field("handle_errors", &self.handle_errors)
            .finish()
    }
}

/// One call after the checks: what happens to it.
enum Plan {
    /// Answer with this error, do not run.
    Refuse(ToolError),
    /// Run with these (validated) arguments.
    Run(Value),
    /// Rejected by a reviewer.
    Rejected(Option<String>),
}

enum Decision {
    Approve,
    Edit(Value),
    Reject(Option<String>),
}

fn parse_decision(v: &Value) -> Result<Decision, String> {
    let obj = v
        .as_object()
        .ok_or_else(|| "the decision must be an object like {\"decision\": \"approve\"}".to_owned())?;
    match obj.get("decision").and_then(Value::as_str) {
        Some("approve") => Ok(Decision::Approve),
        Some("edit") => match obj.get("args") {
            Some(Value::Object(a)) => Ok(Decision::Edit(Value::Object(a.clone()))),
            _ => Err("an `edit` decision needs `args`, an object".to_owned()),
        },
        Some("reject") => match obj.get("reason") {
            None | Some(Value::Null) => Ok(Decision::Reject(None)),
            Some(Value::String(r)) => Ok(Decision::Reject(Some(r.clone()))),
            Some(_) => Err("a `reject` decision's `reason` must be a string".to_owned()),
        },
        Some(other) => Err(format!(
            "unknown decision `{other}`: use `approve`, `edit` or `reject`"
        )),
        None => Err("missing `decision`: use `approve`, `edit` or `reject`".to_owned()),
    }
}

impl ToolNode {
    /// A node over these tools (later tools replace earlier ones of the same name).
    pub fn new(tools: impl IntoIterator<Item = Arc<dyn Tool>>) -> Self {
        let tools = tools
            .into_iter()
            .map(|tool| {
                let validator = jsonschema::validator_for(tool.schema())
                    .map_err(|e| format!("the schema of `{}` does not compile: {e}", tool.name()));
                (tool.name().to_owned(), Entry { tool, validator })
            })
            .collect();
        Self {
            tools: Arc::new(tools),
            timeout: DEFAULT_TOOL_TIMEOUT,
            max_result_bytes: DEFAULT_MAX_RESULT_BYTES,
            handle_errors: true,
            wrap: None,
            stream_results: true,
        }
    }
    /// `true` (default): write a `tool_result` event to the `custom` stream for every call
    /// (see [Streams](ToolNode#streams)). `false`: write none (for a pipeline that emits
    /// its own events).
    #[must_use]
    pub fn stream_results(mut self, on: bool) -> Self {
        self.stream_results = on;
        self
    }
    /// Run every call (after the approval gate, before the checks) through `wrap`, which
    /// may change the call, retry it, or answer without running the tool. A duplicate call
    /// id is refused before `wrap` sees it.
    #[must_use]
    pub fn wrap_calls(mut self, wrap: Arc<dyn ToolWrap>) -> Self {
        self.wrap = Some(wrap);
        self
    }
    /// The tool named `name`.
    #[must_use]
    pub fn tool(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.tools.get(name).map(|e| &e.tool)
    }
    /// Time each call out after `d` (tools may set their own).
    #[must_use]
    pub fn timeout(mut self, d: Duration) -> Self {
        self.timeout = d;
        self
    }
    /// Cap results at `bytes` of JSON text (tools may set their own).
    #[must_use]
    pub fn max_result_bytes(mut self, bytes: usize) -> Self {
        self.max_result_bytes = bytes;
        self
    }
    /// `true` (default): failures become error tool messages. `false`: the node fails.
    #[must_use]
    pub fn handle_errors(mut self, on: bool) -> Self {
        self.handle_errors = on;
        self
    }
    /// The specs to offer a model.
    #[must_use]
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.tools.values().map(|e| e.tool.spec()).collect()
    }
    /// The tool names.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tools.keys().map(String::as_str)
    }

    /// Check a call's arguments: parse, drop injected keys, validate.
    fn check_args(&self, entry: &Entry, raw: &Value) -> Result<Value, ToolError> {
        let name = entry.tool.name();
        let mut args = match raw {
            Value::Null => Value::Object(Map::new()),
            Value::String(s) => serde_json::from_str::<Value>(s).map_err(|e| {
                ToolError::validation(format!("the arguments for `{name}` are not valid JSON: {e}"))
            })?,
            other => other.clone(),
        };
        let Value::Object(obj) = &mut args else {
            return Err(ToolError::validation(format!(
                "the arguments for `{name}` must be a JSON object"
            )));
        };
        for key in entry.tool.injected() {
            obj.remove(key);
        }
        let validator = entry
            .validator
            .as_ref()
            .map_err(|e| ToolError::unavailable(e.clone()))?;
        let violations: Vec<String> = validator
            .iter_errors(&args)
            .take(MAX_VIOLATIONS)
            .map(|e| {
                let at = e.instance_path().to_string();
                if at.is_empty() {
                    e.to_string()
                } else {
                    format!("at {at}: {e}")
                }
            })
            .collect();
        if violations.is_empty() {
            Ok(args)
        } else {
            Err(ToolError::validation(format!(
                "invalid arguments for `{name}`: {}",
                violations.join("; ")
            )))
        }
    }

    /// Ask for a verdict on a gated call until a well-formed one arrives.
    fn gate(
        &self,
        entry: &Entry,
        call: &ToolCall,
        args: Value,
        rt: Option<&Runtime>,
    ) -> Result<Plan, NodeError> {
        let Some(rt) = rt else {
            // No one to ask: fail closed.
            return Ok(Plan::Refuse(ToolError::unavailable(format!(
                "`{}` needs approval and no approver is available",
                call.name
            ))));
        };
        let mut error: Option<String> = None;
        loop {
            let mut request = json!({
                "tool_call": {"id": call.id, "name": call.name, "args": args},
                "description": entry.tool.description(),
                "allowed_decisions": ["approve", "edit", "reject"],
            });
            if let (Some(e), Value::Object(m)) = (&error, &mut request) {
                m.insert("error".into(), Value::String(e.clone()));
            }
            let verdict = rt.interrupt(request)?;
            match parse_decision(&verdict) {
                Ok(Decision::Approve) => return Ok(Plan::Run(args)),
                Ok(Decision::Reject(reason)) => return Ok(Plan::Rejected(reason)),
                Ok(Decision::Edit(new_args)) => match self.check_args(entry, &new_args) {
                    Ok(valid) => return Ok(Plan::Run(valid)),
                    Err(e) => error = Some(format!("the edited arguments were refused: {}", e.message)),
                },
                Err(e) => error = Some(format!("the decision was refused: {e}")),
            }
        }
    }

    /// Answer the tool calls of `message` (an AI message): one tool message per call, in
    /// the order of the calls. `state` is what tools see as [`ToolRuntime::state`]; `rt`
    /// is the node's runtime (without one, gated calls are refused).
    ///
    /// # Errors
    /// `NodeError::Interrupted` while a gated call waits for a verdict; any failure when
    /// error handling is off.
    ///
    /// A tool that returns a [`ToolCommand`] fails the node here (only messages can be
    /// answered): run such tools through [`ToolNode::into_node`] or [`ToolNode::run_calls`].
    pub async fn run_message(
        &self,
        message: &Message,
        state: impl Into<ToolState>,
        rt: Option<&Runtime>,
    ) -> Result<Vec<Message>, NodeError> {
        self.run_calls(message, state, rt)
            .await?
            .into_iter()
            .map(|a| match a {
                ToolAnswer::Message(m) => Ok(m),
                ToolAnswer::Command { call, .. } => Err(NodeError::fatal(format!(
                    "tool `{}` (call `{}`) returned a Command, which `run_message` cannot apply; run it through `ToolNode::into_node` or `run_calls`",
                    call.name, call.id
                ))),
            })
            .collect()
    }

    /// Like [`ToolNode::run_message`], keeping what tools returned as [`ToolCommand`]s: one
    /// answer per call, in the order of the calls, then one per invalid call.
    ///
    /// # Errors
    /// As [`ToolNode::run_message`].
    pub async fn run_calls(
        &self,
        message: &Message,
        state: impl Into<ToolState>,
        rt: Option<&Runtime>,
    ) -> Result<Vec<ToolAnswer>, NodeError> {
        let state: ToolState = state.into();
        let calls = &message.tool_calls;
        let mut id_counts: HashMap<&str, usize> = HashMap::new();
        for c in calls {
            *id_counts.entry(c.id.as_str()).or_default() += 1;
        }
        // Checks first, then every verdict, then execution: nothing runs before the gate.
        let mut plans: Vec<Plan> = Vec::with_capacity(calls.len());
        let mut duplicate: Vec<bool> = Vec::with_capacity(calls.len());
        for call in calls {
            let dup = id_counts.get(call.id.as_str()).copied().unwrap_or(0) > 1;
            duplicate.push(dup);
            let plan = if dup {
                Plan::Refuse(ToolError::validation(format!(
                    "tool call id `{}` is used by more than one call in this message; no call with it was run. Use a unique id for each call",
                    call.id
                )))
            } else {
                match self.tools.get(&call.name) {
                    None => Plan::Refuse(ToolError::unavailable(format!(
                        "`{}` is not a valid tool; try one of [{}]",
                        call.name,
                        self.tools.keys().cloned().collect::<Vec<_>>().join(", ")
                    ))),
                    Some(entry) => match self.check_args(entry, &call.args) {
                        Err(e) => Plan::Refuse(e),
                        Ok(args) if entry.tool.mutating() => self.gate(entry, call, args, rt)?,
                        Ok(args) => Plan::Run(args),
                    },
                }
            };
            plans.push(plan);
        }

        // A reviewer's rejection is an answer, not a failure: it never fails the node.
        let rejected: Vec<bool> = plans.iter().map(|p| matches!(p, Plan::Rejected(_))).collect();
        let mut handles = Vec::with_capacity(calls.len());
        for ((call, plan), dup) in calls.iter().zip(plans).zip(duplicate) {
            let outcome: BoxFuture<'static, Result<ToolOutput, ToolError>> = match plan {
                Plan::Run(args) if self.wrap.is_some() => {
                    let call = ToolCall {
                        id: call.id.clone(),
                        name: call.name.clone(),
                        args,
                    };
                    self.wrapped(call, state.clone(), rt)
                }
                Plan::Refuse(_) if self.wrap.is_some() && !dup => {
                    self.wrapped(call.clone(), state.clone(), rt)
                }
                Plan::Refuse(e) => Box::pin(async move { Err(e) }),
                Plan::Rejected(reason) => {
                    let text = match reason {
                        Some(r) => format!("the call to `{}` was rejected by a reviewer: {r}", call.name),
                        None => format!("the call to `{}` was rejected by a reviewer", call.name),
                    };
                    Box::pin(async move { Err(ToolError::execution(text)) })
                }
                Plan::Run(args) => {
                    let entry = self.tools.get(&call.name);
                    match entry {
                        None => Box::pin(async { Err(ToolError::unavailable("tool vanished")) }),
                        Some(entry) => self.execute(entry, call, args, state.clone(), rt),
                    }
                }
            };
            handles.push(outcome);
        }
        let outcomes = futures::future::join_all(handles).await;

        let mut out = Vec::with_capacity(calls.len());
        for ((call, outcome), was_rejected) in calls.iter().zip(outcomes).zip(rejected) {
            let allowlist = self.tools.get(&call.name).and_then(|e| e.tool.stream_allowlist());
            if let Some(rt) = rt.filter(|_| self.stream_results) {
                rt.write(stream_event(call, &outcome, allowlist));
            }
            match outcome {
                Ok(ToolOutput {
                    command: Some(command),
                    then,
                    ..
                }) => out.push(ToolAnswer::Command {
                    call: call.clone(),
                    command,
                    then,
                }),
                Ok(output) => out.push(ToolAnswer::Message(success_message(
                    &call.id,
                    &call.name,
                    output.into_text(),
                ))),
                Err(e) => {
                    if !self.handle_errors && !was_rejected {
                        return Err(NodeError::fatal(format!(
                            "tool call `{}` ({}): {e}",
                            call.id, call.name
                        ))
                        .with_source(e));
                    }
                    out.push(ToolAnswer::Message(error_message(call, &e)));
                }
            }
        }
        for bad in message.invalid_tool_calls() {
            let id = bad.id.clone().unwrap_or_default();
            let name = bad.name.clone().unwrap_or_default();
            let e = ToolError::validation(format!(
                "the arguments for `{name}` are not valid JSON{}",
                bad.error.map(|r| format!(": {r}")).unwrap_or_default()
            ));
            if !self.handle_errors {
                return Err(NodeError::fatal(format!("tool call `{id}` ({name}): {e}")).with_source(e));
            }
            out.push(ToolAnswer::Message(error_message(
                &ToolCall {
                    id,
                    name,
                    args: Value::Null,
                },
                &e,
            )));
        }
        Ok(out)
    }

    /// One call through the wrapper: the wrapper gets the call; what it passes on is
    /// checked and run.
    fn wrapped(
        &self,
        call: ToolCall,
        state: ToolState,
        rt: Option<&Runtime>,
    ) -> BoxFuture<'static, Result<ToolOutput, ToolError>> {
        let Some(wrap) = self.wrap.clone() else {
            return Box::pin(async { Err(ToolError::unavailable("no tool wrapper")) });
        };
        let runtime = match rt {
            Some(rt) => ToolRuntime::new(state, &call.id, rt.clone()),
            None => ToolRuntime::detached(state, &call.id),
        };
        let request = ToolCallRequest {
            tool: self.tools.get(&call.name).map(|e| Arc::clone(&e.tool)),
            call,
            runtime,
        };
        let node = self.clone();
        let exec: ToolExec = Arc::new(move |req: ToolCallRequest| {
            let Some(entry) = node.tools.get(&req.call.name) else {
                let names = node.tools.keys().cloned().collect::<Vec<_>>().join(", ");
                let name = req.call.name.clone();
                return Box::pin(async move {
                    Err(ToolError::unavailable(format!(
                        "`{name}` is not a valid tool; try one of [{names}]"
                    )))
                });
            };
            match node.check_args(entry, &req.call.args) {
                Err(e) => Box::pin(async move { Err(e) }),
                Ok(args) => node.execute(
                    entry,
                    &req.call,
                    args,
                    req.runtime.state.clone(),
                    req.runtime.runtime(),
                ),
            }
        });
        wrap.wrap(request, exec)
    }

    fn execute(
        &self,
        entry: &Entry,
        call: &ToolCall,
        args: Value,
        state: ToolState,
        rt: Option<&Runtime>,
    ) -> BoxFuture<'static, Result<ToolOutput, ToolError>> {
        let tool_rt = match rt {
            Some(rt) => ToolRuntime::new(state, &call.id, rt.clone()),
            None => ToolRuntime::detached(state, &call.id),
        };
        let timeout = entry.tool.timeout().unwrap_or(self.timeout);
        let cap = entry.tool.max_result_bytes().unwrap_or(self.max_result_bytes);
        let name = call.name.clone();
        let call_id = call.id.clone();
        // `on_tool_start` now; `on_tool_end` / `on_tool_error` when the call ends.
        let events = rt
            .filter(|rt| rt.wants_events())
            .and_then(|rt| rt.event_run(RunType::Tool, &call.name, args.clone(), Map::new()));
        let span = tool_span(call);
        let fut = span.in_scope(|| entry.tool.call(args, tool_rt));
        Box::pin(async move {
            // The spawned call keeps the span, so what the tool traces nests under it.
            let task = tokio::spawn(tracing::Instrument::instrument(
                tokio::time::timeout(timeout, fut),
                span.clone(),
            ));
            let result = match task.await {
                Ok(Ok(result)) => result,
                Ok(Err(_elapsed)) => Err(ToolError::timeout(format!(
                    "`{name}` did not finish within {} ms",
                    timeout.as_millis()
                ))),
                Err(_join) => Err(ToolError::execution(format!("`{name}` crashed"))),
            };
            let result = result.and_then(|output| {
                let size = output.text_len();
                if size > cap {
                    return Err(ToolError::execution(format!(
                        "the result of `{name}` is {size} bytes, over the limit of {cap} bytes; ask for less (narrow the query or page through the results)"
                    )));
                }
                Ok(output)
            });
            if let Some(ev) = events {
                match &result {
                    Ok(output) => ev.end(
                        serde_json::to_value(success_message(&call_id, &name, output.to_text()))
                            .unwrap_or(Value::Null),
                    ),
                    Err(e) => ev.error("ToolError", e.to_string(), Some(&call_id)),
                }
            }
            if let Err(e) = &result {
                if !span.is_disabled() {
                    span.record("otel.status_code", "ERROR");
                    span.record("otel.status_description", e.message.as_str());
                    span.record("error.type", e.code.as_str());
                }
            }
            result
        })
    }

    /// This tool node as a graph node over any state with an `add_messages` messages field:
    /// `get_messages` reads it, `make_update` builds the update that appends the tool
    /// messages. Tools that return a [`ToolCommand`] make the node return a `Command`: the
    /// answers of every call, joined as [`ToolCommand`] describes, and every `goto`.
    ///
    /// ```
    /// # use graphloom_core::{Message, Seq, State, StateGraph};
    /// # use graphloom_prebuilt::ToolNode;
    /// #[derive(State, Clone, Default, Debug)]
    /// struct Chat {
    ///     #[reducer(add_messages)]
    ///     messages: Seq<Message>,
    /// }
    /// let node = ToolNode::new([]).into_node::<Chat>(|s| &s.messages, |m| ChatUpdate::new().messages(m));
    /// let _graph = StateGraph::<Chat>::new().add_node("tools", node);
    /// ```
    pub fn into_node<S: State>(
        self,
        get_messages: fn(&S) -> &Seq<Message>,
        make_update: fn(Vec<Message>) -> S::Update,
    ) -> impl Fn(Arc<S>, Runtime) -> NodeFuture<S> + Send + Sync + Clone + 'static {
        move |state: Arc<S>, rt: Runtime| {
            let node = self.clone();
            Box::pin(async move {
                let last = get_messages(&state).last().cloned();
                node.answer_last(state, rt, last, MessagesOut::Update(make_update))
                    .await
            })
        }
    }

    /// This tool node as a graph node over any state whose messages live in a field
    /// called `messages` (LangGraph's `ToolNode(tools)`, whose `messages_key` is
    /// `"messages"`): the same node as [`ToolNode::into_node`], reading the last message
    /// and writing the answers through the [`State`] trait, so it needs no functions.
    /// Only the last message is read (never the whole conversation).
    ///
    /// A state without a `messages` field fails the node on its first run with an error
    /// naming the field; [`ToolNodeGraph::add_tool_node`] refuses such a graph at
    /// `compile()` instead.
    ///
    /// ```
    /// # use graphloom_core::{Message, Seq, State, StateGraph};
    /// # use graphloom_prebuilt::ToolNode;
    /// #[derive(State, Clone, Default, Debug)]
    /// struct Chat {
    ///     #[reducer(add_messages)]
    ///     messages: Seq<Message>,
    /// }
    /// let _graph = StateGraph::<Chat>::new().add_node("tools", ToolNode::new([]).messages_node());
    /// ```
    pub fn messages_node<S: State>(
        self,
    ) -> impl Fn(Arc<S>, Runtime) -> NodeFuture<S> + Send + Sync + Clone + 'static {
        move |state: Arc<S>, rt: Runtime| {
            let node = self.clone();
            Box::pin(async move {
                let last = last_message(state.as_ref(), MESSAGES_KEY)?;
                node.answer_last(state, rt, last, MessagesOut::Field(MESSAGES_KEY))
                    .await
            })
        }
    }

    /// Answer the tool calls of `last`, the last message of `state`: the node's update or
    /// `Command`.
    async fn answer_last<S: State>(
        &self,
        state: Arc<S>,
        rt: Runtime,
        last: Option<Message>,
        out: MessagesOut<S>,
    ) -> Result<NodeOutput<S>, NodeError> {
        let Some(last) = last else {
            return Err(NodeError::fatal("ToolNode: there are no messages"));
        };
        if last.kind != MessageKind::Ai {
            return Err(NodeError::fatal(
                "ToolNode: the last message is not an AI message",
            ));
        }
        if last.tool_calls.is_empty() && last.invalid_tool_calls().is_empty() {
            return Ok(NodeOutput::None);
        }
        let snapshot = Arc::clone(&state);
        let lazy = ToolState::lazy(move || snapshot.to_json().unwrap_or(Value::Null));
        let answers = self.run_calls(&last, lazy, Some(&rt)).await?;
        if answers.iter().all(|a| matches!(a, ToolAnswer::Message(_))) {
            let msgs = answers
                .into_iter()
                .filter_map(|a| match a {
                    ToolAnswer::Message(m) => Some(m),
                    ToolAnswer::Command { .. } => None,
                })
                .collect();
            return Ok(NodeOutput::Update(out.update(state.as_ref(), msgs)?));
        }
        crate::tool_command::join_answers(state.as_ref(), answers, out)
    }
}

/// The field [`ToolNode::messages_node`] reads and writes (LangGraph's default
/// `messages_key`).
pub const MESSAGES_KEY: &str = "messages";

/// The last message of `state`'s field `key`, reading only that one item.
fn last_message<S: State>(state: &S, key: &str) -> Result<Option<Message>, NodeError> {
    let idx = state.field_index(key).ok_or_else(|| {
        NodeError::fatal(format!(
            "ToolNode: the state has no field `{key}` to read the tool calls from; add a `{key}` field with the `add_messages` reducer, or name the field with `ToolNode::into_node`"
        ))
    })?;
    match state.field_tail_to_json(idx, 1) {
        None => Err(NodeError::fatal(format!(
            "ToolNode: state field `{key}` is not a list of messages"
        ))),
        Some(Err(e)) => Err(NodeError::terminal(e)),
        Some(Ok(items)) => items
            .into_iter()
            .next_back()
            .map(serde_json::from_value::<Message>)
            .transpose()
            .map_err(|e| {
                NodeError::fatal(format!(
                    "ToolNode: the last item of `{key}` is not a message: {e}"
                ))
                .with_source(e)
            }),
    }
}

/// A [`StateGraph`] method to add a [`ToolNode`] over the state's `messages` field, as
/// LangGraph's `add_node("tools", ToolNode(tools))` reads.
pub trait ToolNodeGraph: Sized {
    /// Add `node` as [`ToolNode::messages_node`] under `name`; `compile()` refuses the graph
    /// when the state has no `messages` field, naming it.
    ///
    /// ```
    /// use graphloom_core::{Message, Seq, State, StateGraph, START, END};
    /// use graphloom_prebuilt::{ToolNode, ToolNodeGraph};
    ///
    /// #[derive(State, Clone, Default, Debug)]
    /// struct Chat {
    ///     #[reducer(add_messages)]
    ///     messages: Seq<Message>,
    /// }
    /// #[derive(State, Clone, Default, Debug)]
    /// struct Counter {
    ///     n: i64,
    /// }
    /// let ok = StateGraph::<Chat>::new()
    ///     .add_tool_node("tools", ToolNode::new([]))
    ///     .add_edge(START, "tools")
    ///     .add_edge("tools", END)
    ///     .compile();
    /// assert!(ok.is_ok());
    /// let err = StateGraph::<Counter>::new()
    ///     .add_tool_node("tools", ToolNode::new([]))
    ///     .add_edge(START, "tools")
    ///     .add_edge("tools", END)
    ///     .compile()
    ///     .err()
    ///     .map(|e| e.to_string())
    ///     .unwrap_or_default();
    /// assert!(err.contains("reads state field `messages`"), "{err}");
    /// ```
    #[must_use]
    fn add_tool_node(self, name: &str, node: ToolNode) -> Self;
}

impl<S: State> ToolNodeGraph for StateGraph<S> {
    fn add_tool_node(self, name: &str, node: ToolNode) -> Self {
        self.add_node(name, node.messages_node::<S>())
            .node_reads(name, [MESSAGES_KEY])
    }
}

/// An `execute_tool` span with the OpenTelemetry GenAI attributes of a tool call; errors
/// (failure, timeout, oversized result) are recorded on it when the call ends.
fn tool_span(call: &ToolCall) -> tracing::Span {
    let span = tracing::info_span!(
        "execute_tool",
        otel.name = tracing::field::Empty,
        otel.kind = "internal",
        otel.status_code = tracing::field::Empty,
        otel.status_description = tracing::field::Empty,
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = call.name.as_str(),
        gen_ai.tool.call.id = call.id.as_str(),
        gen_ai.tool.type = "function",
        error.type = tracing::field::Empty,
    );
    if !span.is_disabled() {
        span.record("otel.name", format!("execute_tool {}", call.name));
    }
    span
}

fn success_message(call_id: &str, name: &str, text: String) -> Message {
    let mut m = Message::tool(text, call_id);
    m.name = Some(name.to_owned());
    m.extra.insert("status".into(), Value::String("success".into()));
    m
}

fn error_message(call: &ToolCall, e: &ToolError) -> Message {
    let mut m = Message::tool(format!("Error ({}): {}", e.code, e.message), &call.id);
    if !call.name.is_empty() {
        m.name = Some(call.name.clone());
    }
    m.extra.insert("status".into(), Value::String("error".into()));
    m
}

fn stream_event(
    call: &ToolCall,
    outcome: &Result<ToolOutput, ToolError>,
    allowlist: Option<&[String]>,
) -> Value {
    let mut ev = Map::new();
    ev.insert("tool_call_id".into(), Value::String(call.id.clone()));
    ev.insert("name".into(), Value::String(call.name.clone()));
    match outcome {
        Err(e) => {
            ev.insert("status".into(), json!("error"));
            ev.insert("error_code".into(), json!(e.code));
        }
        Ok(out) => {
            ev.insert("status".into(), json!("success"));
            if let Some(allow) = allowlist {
                match redact(&out.content, allow) {
                    Ok(v) => {
                        ev.insert("content".into(), v);
                    }
                    Err(e) => {
                        ev.insert(
                            "redaction_error".into(),
                            json!({"code": e.code, "message": e.message}),
                        );
                    }
                }
            }
        }
    }
    json!({ "tool_result": ev })
}

/// Keep only the allowed top-level fields of an object result.
///
/// # Errors
/// A `redaction` error for results that are not JSON objects.
pub fn redact(content: &Value, allowlist: &[String]) -> Result<Value, ToolError> {
    match content {
        Value::Object(m) => Ok(Value::Object(
            m.iter()
                .filter(|(k, _)| allowlist.iter().any(|a| a == *k))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        )),
        _ => Err(ToolError::new(
            ToolErrorCode::Redaction,
            "the result is not a JSON object, so no field of it can be allowed through",
        )),
    }
}
