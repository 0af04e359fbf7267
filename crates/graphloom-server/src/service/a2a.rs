//! Assistants as A2A agents: a message becomes a run on the thread of its context, the
//! run a task (task id = run id, context id = thread id). The wire shapes of each protocol
//! version are written by `api/a2a.rs`; this module works on [`Task`] and [`A2aMessage`].

use super::agents;
use crate::auth::Identity;
use crate::error::ServiceError;
use crate::models::{now_rfc3339, Assistant, Run, RunStatus};
use crate::state::AppRef;
use serde_json::{json, Map, Value};
use std::sync::Arc;

/// A JSON-RPC error of the A2A protocol.
#[derive(Debug)]
pub(crate) struct RpcError {
    pub code: i64,
    pub message: String,
}

impl RpcError {
    pub(crate) const PARSE: i64 = -32700;
    pub(crate) const INVALID_REQUEST: i64 = -32600;
    pub(crate) const METHOD_NOT_FOUND: i64 = -32601;
    pub(crate) const INVALID_PARAMS: i64 = -32602;
    pub(crate) const INTERNAL: i64 = -32603;
    pub(crate) const TASK_NOT_FOUND: i64 = -32001;
    pub(crate) const CONTENT_TYPE_NOT_SUPPORTED: i64 = -32005;

    pub(crate) fn new(code: i64, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Self::new(Self::INVALID_PARAMS, message)
    }
}

impl From<ServiceError> for RpcError {
    fn from(e: ServiceError) -> Self {
        if e.is_client_error() {
            Self::invalid(e.detail)
        } else {
            Self::new(Self::INTERNAL, e.detail)
        }
    }
}

/// Who wrote a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Role {
    User,
    Agent,
}

/// A part of a message or an artifact.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Part {
    Text(String),
    Data(Value),
}

/// A message, in either protocol version.
#[derive(Clone, Debug)]
pub(crate) struct A2aMessage {
    pub role: Role,
    pub parts: Vec<Part>,
    pub message_id: String,
    pub context_id: Option<String>,
    pub task_id: Option<String>,
}

/// The state of a task.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TaskState {
    Submitted,
    Working,
    Completed,
    Failed,
    Canceled,
    InputRequired,
}

/// A task: one run of the agent's assistant.
#[derive(Clone, Debug)]
pub(crate) struct Task {
    pub id: String,
    pub context_id: String,
    pub state: TaskState,
    /// What the agent says with the status (an error, an interrupt's question).
    pub status_message: Option<A2aMessage>,
    pub timestamp: String,
    /// The answer, as one artifact's parts (none before the end).
    pub artifact: Vec<Part>,
    pub history: Vec<A2aMessage>,
    /// The assistant, named in the artifact.
    pub assistant_id: String,
}

/// A message of the client (either version's shape: `kind`ed parts or bare ones).
pub(crate) fn parse_message(params: &Value) -> Result<A2aMessage, RpcError> {
    let m = params
        .get("message")
        .and_then(Value::as_object)
        .ok_or_else(|| RpcError::invalid("params.message is missing or not an object"))?;
    let role = match m.get("role").and_then(Value::as_str) {
        Some("user" | "ROLE_USER") | None => Role::User,
        Some("agent" | "ROLE_AGENT") => Role::Agent,
        Some(other) => {
            return Err(RpcError::invalid(format!(
                "params.message.role: unknown role {other:?}"
            )))
        }
    };
    let raw_parts = m
        .get("parts")
        .and_then(Value::as_array)
        .ok_or_else(|| RpcError::invalid("params.message.parts is missing or not a list"))?;
    let mut parts = Vec::with_capacity(raw_parts.len());
    for (i, p) in raw_parts.iter().enumerate() {
        let kind = p.get("kind").and_then(Value::as_str);
        if let (Some("text") | None, Some(t)) = (kind, p.get("text").and_then(Value::as_str)) {
            parts.push(Part::Text(t.to_owned()));
        } else if let (Some("data") | None, Some(d)) = (kind, p.get("data")) {
            parts.push(Part::Data(d.clone()));
        } else if kind == Some("file")
            || p.get("raw").is_some()
            || p.get("url").is_some()
            || p.get("file").is_some()
        {
            return Err(RpcError::new(
                RpcError::CONTENT_TYPE_NOT_SUPPORTED,
                format!("params.message.parts[{i}]: file parts are not supported"),
            ));
        } else {
            return Err(RpcError::invalid(format!(
                "params.message.parts[{i}]: not a text or data part"
            )));
        }
    }
    if parts.is_empty() {
        return Err(RpcError::invalid("params.message.parts is empty"));
    }
    let text = |k: &str| {
        m.get(k)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    };
    Ok(A2aMessage {
        role,
        parts,
        message_id: text("messageId").unwrap_or_else(|| uuid::Uuid::new_v4().to_string()),
        context_id: text("contextId"),
        task_id: text("taskId"),
    })
}

/// The graph input of a message: its text parts as one user message (graphs with
/// `messages` only), its data parts' objects merged.
fn input_of(state: &AppRef, a: &Assistant, msg: &A2aMessage) -> Result<Value, RpcError> {
    let (_, has_messages) = agents::input_schema(state, a);
    let mut input = Map::new();
    let mut texts = Vec::new();
    for p in &msg.parts {
        match p {
            Part::Text(t) => texts.push(t.as_str()),
            Part::Data(Value::Object(d)) => input.extend(d.iter().map(|(k, v)| (k.clone(), integral(v)))),
            Part::Data(_) => return Err(RpcError::invalid("a data part must hold an object")),
        }
    }
    if !texts.is_empty() {
        if !has_messages {
            return Err(RpcError::invalid(format!(
                "assistant {} (graph {}) takes no messages: send its input as a data part",
                a.assistant_id, a.graph_id
            )));
        }
        input.insert(
            "messages".into(),
            json!([agents::user_message(&texts.join("\n"))]),
        );
    }
    Ok(Value::Object(input))
}

/// `v` with whole floating-point numbers as integers: a 1.0 client's data parts are
/// protobuf `Value`s, whose numbers are all doubles (`2` arrives as `2.0`), and an integer
/// field must still read them.
fn integral(v: &Value) -> Value {
    match v {
        Value::Number(n) if n.is_f64() => match n.as_f64() {
            // Within ±2^53 a double holds the integer exactly.
            Some(f) if f.fract() == 0.0 && f.abs() <= 9_007_199_254_740_992.0 => json!(f as i64),
            _ => v.clone(),
        },
        Value::Array(a) => Value::Array(a.iter().map(integral).collect()),
        Value::Object(m) => Value::Object(m.iter().map(|(k, x)| (k.clone(), integral(x))).collect()),
        _ => v.clone(),
    }
}

/// The text of a message as the graphs store it (a string, or content blocks).
fn message_text(m: &Value) -> Option<String> {
    match m.get("content")? {
        Value::String(s) => Some(s.clone()),
        Value::Array(blocks) => Some(
            blocks
                .iter()
                .filter_map(|b| b.as_str().or_else(|| b.get("text").and_then(Value::as_str)))
                .collect::<Vec<_>>()
                .join(""),
        ),
        _ => None,
    }
}

fn is_ai(m: &Value) -> bool {
    matches!(
        m.get("type").or_else(|| m.get("role")).and_then(Value::as_str),
        Some("ai" | "assistant" | "AIMessage" | "AIMessageChunk")
    )
}

fn agent_message(parts: Vec<Part>, task: &str, context: &str) -> A2aMessage {
    A2aMessage {
        role: Role::Agent,
        parts,
        message_id: uuid::Uuid::new_v4().to_string(),
        context_id: Some(context.to_owned()),
        task_id: Some(task.to_owned()),
    }
}

/// The task of `run`, from what it answered (`out`: a `runs/wait` body).
fn task_of(run: &Run, has_messages: bool, out: &Value, mut history: Vec<A2aMessage>) -> Task {
    let (id, ctx) = (run.run_id.as_str(), run.thread_id.as_str());
    let mut task = Task {
        id: id.to_owned(),
        context_id: ctx.to_owned(),
        state: TaskState::Completed,
        status_message: None,
        timestamp: now_rfc3339(),
        artifact: Vec::new(),
        history: Vec::new(),
        assistant_id: run.assistant_id.clone(),
    };
    if let Some(err) = out.get("__error__") {
        task.state = TaskState::Failed;
        let why = err.get("message").map_or_else(String::new, |m| {
            m.as_str().map_or_else(|| m.to_string(), str::to_owned)
        });
        task.status_message = Some(agent_message(vec![Part::Text(why)], id, ctx));
    } else if let Some(list) = out
        .get("__interrupt__")
        .filter(|v| v.as_array().is_some_and(|l| !l.is_empty()))
    {
        task.state = TaskState::InputRequired;
        task.status_message = Some(agent_message(
            vec![Part::Data(json!({"interrupts": list}))],
            id,
            ctx,
        ));
    } else if has_messages {
        let last = out
            .get("messages")
            .and_then(Value::as_array)
            .and_then(|l| l.iter().rev().find(|m| is_ai(m)))
            .and_then(message_text);
        if let Some(text) = last {
            task.artifact = vec![Part::Text(text.clone())];
            history.push(agent_message(vec![Part::Text(text)], id, ctx));
        }
    } else {
        let mut values = out.clone();
        if let Some(m) = values.as_object_mut() {
            m.remove("__interrupt__");
        }
        task.artifact = vec![Part::Data(values)];
    }
    for m in &mut history {
        m.task_id = Some(id.to_owned());
        m.context_id = Some(ctx.to_owned());
    }
    task.history = history;
    task
}

/// A message for the agent of assistant `a`: where it runs (its context's thread, made
/// when new) and what it runs with.
pub(crate) struct Accepted {
    pub started: agents::Started,
    pub has_messages: bool,
    pub message: A2aMessage,
}

/// Start the run of `msg` (see [`Accepted`]).
pub(crate) async fn accept(
    state: &AppRef,
    identity: &Arc<Identity>,
    a: &Assistant,
    msg: A2aMessage,
) -> Result<Accepted, RpcError> {
    if msg.role != Role::User {
        return Err(RpcError::invalid("params.message.role must be user"));
    }
    let input = input_of(state, a, &msg)?;
    let (_, has_messages) = agents::input_schema(state, a);
    let thread = msg
        .context_id
        .clone()
        .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    let mut metadata = Map::new();
    metadata.insert("a2a_message_id".into(), json!(msg.message_id));
    let started = agents::start(state, identity, a, Some(thread), input, metadata).await?;
    Ok(Accepted {
        started,
        has_messages,
        message: msg,
    })
}

/// The task of an accepted message before it ends.
pub(crate) fn submitted(acc: &Accepted) -> Task {
    let run = &acc.started.run;
    let mut user = acc.message.clone();
    user.task_id = Some(run.run_id.clone());
    user.context_id = Some(run.thread_id.clone());
    Task {
        id: run.run_id.clone(),
        context_id: run.thread_id.clone(),
        state: TaskState::Submitted,
        status_message: None,
        timestamp: now_rfc3339(),
        artifact: Vec::new(),
        history: vec![user],
        assistant_id: run.assistant_id.clone(),
    }
}

/// Wait for an accepted message's run to end: its task.
pub(crate) async fn settle(state: &AppRef, owner: &str, acc: Accepted) -> Task {
    let run = acc.started.run.clone();
    let user = acc.message.clone();
    let out = agents::finish(state, owner, acc.started).await;
    task_of(&run, acc.has_messages, &out, vec![user])
}

/// Task `id` of the agent of assistant `a`, as `identity` may see it.
pub(crate) async fn get(
    state: &AppRef,
    identity: &Identity,
    a: &Assistant,
    id: &str,
    history_length: Option<usize>,
) -> Result<Task, RpcError> {
    let grant = crate::auth::check(
        &*state.auth,
        identity,
        crate::auth::Resource::Runs,
        crate::auth::Action::Read,
        None,
        &Value::Null,
    )
    .await?;
    let not_found = || RpcError::new(RpcError::TASK_NOT_FOUND, format!("task not found: {id}"));
    let run = state
        .db
        .get_run(&identity.identity, None, id)
        .await
        .map_err(ServiceError::from)?
        .filter(|r| r.assistant_id == a.assistant_id)
        .ok_or_else(not_found)?;
    let (_, has_messages) = agents::input_schema(state, a);
    let state_of = |s: TaskState| {
        let mut t = task_of(&run, has_messages, &json!({}), Vec::new());
        t.state = s;
        t.timestamp.clone_from(&run.updated_at);
        t
    };
    let thread = state
        .db
        .get_thread(&identity.identity, &run.thread_id)
        .await
        .map_err(ServiceError::from)?;
    if thread
        .as_ref()
        .is_some_and(|t| !grant.filter.matches(&t.metadata))
    {
        return Err(not_found());
    }
    let mut task = match run.status {
        RunStatus::Pending => state_of(TaskState::Submitted),
        RunStatus::Running => state_of(TaskState::Working),
        _ => {
            let out = crate::service::runs::settled_body(state, &identity.identity, &run).await;
            let mut t = task_of(&run, has_messages, &out, Vec::new());
            if run.status == RunStatus::Interrupted && t.state == TaskState::Completed {
                t.state = TaskState::Canceled;
            }
            t.timestamp.clone_from(&run.updated_at);
            t
        }
    };
    if let Some(values) = thread.map(|t| t.values) {
        let mut history: Vec<A2aMessage> = values
            .get("messages")
            .and_then(Value::as_array)
            .map(|l| {
                l.iter()
                    .filter_map(|m| {
                        let text = message_text(m)?;
                        let mut msg = agent_message(vec![Part::Text(text)], &task.id, &task.context_id);
                        if !is_ai(m) {
                            msg.role = Role::User;
                        }
                        if let Some(mid) = m.get("id").and_then(Value::as_str) {
                            mid.clone_into(&mut msg.message_id);
                        }
                        Some(msg)
                    })
                    .collect()
            })
            .unwrap_or_default();
        if let Some(n) = history_length {
            let skip = history.len().saturating_sub(n);
            history.drain(..skip);
        }
        task.history = history;
    }
    Ok(task)
}
