//! The thread-centric streaming protocol that `@langchain/langgraph-sdk` 1.x
//! (`client.threads.stream`) and `@langchain/react`'s `useStream` speak: commands posted
//! to a thread, events read from the thread, filtered by channel and namespace.
//!
//! The frames, as the client reads them:
//!
//! - A [`Command`] `{"id": 1, "method": "run.start", "params": {..}}` goes to
//!   `POST /threads/{id}/commands` (or over the thread's WebSocket). Its answer is
//!   `{"type": "success", "id", "result", "meta": {"applied_through_seq"}}` or an error
//!   frame `{"type": "error", "id", "error": <code>, "message"}` ([`ErrorCode`]), sent with
//!   HTTP 200 as the reference server does.
//! - An [`Event`] `{"type": "event", "event_id", "seq", "method", "params": {"namespace",
//!   "timestamp", "data"}}` goes out as SSE (`event: <method>`, `id: <seq>`) on
//!   `POST /threads/{id}/stream/events`, or as a WebSocket text message.
//!
//! [`Filter`] is what a stream or a subscription asks for (channels, namespace prefixes,
//! depth); [`translate::RunTranslator`] turns a run's event log (the same log the
//! run-centric API streams) into events, so a run started on either API shows on both.
//!
//! Sequence numbers are thread-wide and the same on every connection: the `k`-th run of
//! a thread (in creation order, its stored `ordinal`: a deleted run renumbers nothing)
//! numbers its events from `k << 32`, each event of the
//! run's log `n` giving the events `k << 32 | n << 8 | i` ([`seq`]). Event ids are
//! `"<run id>:<n>:<i>"`, stable across connections, so a client that reads a thread on
//! two streams at once drops the copies.

pub mod filter;
mod messages;
pub mod translate;

pub use filter::{Channel, Filter};
pub use messages::is_model_chunk;

use serde::Serialize;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// Largest run-log event index a sequence number carries (larger ones share it).
const MAX_EVENT_INDEX: u64 = (1 << 24) - 1;
/// Events one run-log event can give (more share the last number).
const MAX_SUB: u64 = 255;

/// The sequence number of the `sub`-th protocol event made from event `index` of the
/// thread's `ordinal`-th run (see the module docs). Below 2^53 for 2^21 runs of a
/// thread, so JavaScript compares them exactly.
#[must_use]
pub fn seq(ordinal: u64, index: u64, sub: u64) -> u64 {
    (ordinal << 32) | (index.min(MAX_EVENT_INDEX) << 8) | sub.min(MAX_SUB)
}

/// Milliseconds since the Unix epoch (the events' `timestamp`).
#[must_use]
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// What an event reports, by its protocol `method`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// `values`: the whole state of a namespace after a step.
    Values,
    /// `updates`: one node's update (`{"node", "values"}`).
    Updates,
    /// `messages`: a model's message, block by block (`message-start`, ...).
    Messages,
    /// `tools`: a tool call's start, and its result or error.
    Tools,
    /// `custom`: what a node wrote with its stream writer (`{"payload"}`, or
    /// `{"name", "payload"}` for a named extension).
    Custom,
    /// `lifecycle`: a namespace's status (`running`, `started`, `completed`,
    /// `interrupted`, `failed`).
    Lifecycle,
    /// `input.requested`: an interrupt waiting for an answer.
    InputRequested,
    /// `checkpoints`: a checkpoint's envelope (`{"id", "parent_id", "step", "source"}`).
    Checkpoints,
    /// `tasks`: task starts and results.
    Tasks,
}

impl Method {
    /// The wire name.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Values => "values",
            Self::Updates => "updates",
            Self::Messages => "messages",
            Self::Tools => "tools",
            Self::Custom => "custom",
            Self::Lifecycle => "lifecycle",
            Self::InputRequested => "input.requested",
            Self::Checkpoints => "checkpoints",
            Self::Tasks => "tasks",
        }
    }
}

/// One protocol event.
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    /// Thread-wide sequence number (see [`seq`]).
    pub seq: u64,
    /// Stable id (`"<run id>:<n>:<i>"`).
    pub event_id: String,
    /// What it reports.
    pub method: Method,
    /// Where in the graph (`[]`: the root; `["review:<task id>"]`: a subgraph).
    pub namespace: Vec<String>,
    /// The node that produced it, when known (messages and tools).
    pub node: Option<String>,
    /// When it was made (ms since the epoch).
    pub timestamp: u64,
    /// Its payload, shared with the run's log when it passes through (`values`).
    pub data: Arc<Value>,
}

/// An [`Event`] as the client reads it, borrowed: written out without copying its payload.
/// Keys in the order a JSON object of them is written.
#[derive(Serialize)]
struct WireEvent<'a> {
    event_id: &'a str,
    method: &'static str,
    params: WireParams<'a>,
    seq: u64,
    #[serde(rename = "type")]
    kind: &'static str,
}

/// The `params` of a [`WireEvent`].
#[derive(Serialize)]
struct WireParams<'a> {
    data: &'a Value,
    namespace: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    node: Option<&'a str>,
    timestamp: u64,
}

impl Event {
    fn wire(&self) -> WireEvent<'_> {
        WireEvent {
            event_id: &self.event_id,
            method: self.method.as_str(),
            params: WireParams {
                data: &self.data,
                namespace: &self.namespace,
                node: self.node.as_deref(),
                timestamp: self.timestamp,
            },
            seq: self.seq,
            kind: "event",
        }
    }

    /// The event as the client reads it, as JSON text.
    #[must_use]
    pub fn to_text(&self) -> String {
        serde_json::to_string(&self.wire()).unwrap_or_else(|_| "null".to_owned())
    }

    /// The event as one SSE frame: `event: <method>`, `data: <json>`, `id: <seq>`.
    #[must_use]
    pub fn sse_frame(&self) -> String {
        crate::stream::sse_text_frame(self.method.as_str(), &self.to_text(), Some(&self.seq.to_string()))
    }
}

/// The error codes of the protocol's error frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorCode {
    /// The command or its parameters do not read.
    InvalidArgument,
    /// No such command.
    UnknownCommand,
    /// Something else failed.
    UnknownError,
    /// No run fits the command (none active, none interrupted).
    NoSuchRun,
    /// No such subscription on this connection.
    NoSuchSubscription,
    /// No such namespace.
    NoSuchNamespace,
    /// No pending interrupt with that id.
    NoSuchInterrupt,
    /// No such checkpoint.
    NoSuchCheckpoint,
    /// The caller may not do this.
    PermissionDenied,
    /// Not supported here.
    NotSupported,
}

impl ErrorCode {
    /// The wire name.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InvalidArgument => "invalid_argument",
            Self::UnknownCommand => "unknown_command",
            Self::UnknownError => "unknown_error",
            Self::NoSuchRun => "no_such_run",
            Self::NoSuchSubscription => "no_such_subscription",
            Self::NoSuchNamespace => "no_such_namespace",
            Self::NoSuchInterrupt => "no_such_interrupt",
            Self::NoSuchCheckpoint => "no_such_checkpoint",
            Self::PermissionDenied => "permission_denied",
            Self::NotSupported => "not_supported",
        }
    }
}

/// A command that failed: its error frame's code and message.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}: {message}", code.as_str())]
pub struct ProtocolError {
    /// The code.
    pub code: ErrorCode,
    /// What went wrong, for a person.
    pub message: String,
}

impl ProtocolError {
    /// An error with this code and message.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    /// `invalid_argument`.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidArgument, message)
    }
}

impl ProtocolError {
    /// The error frame of an HTTP error answer with this status and detail: 401 and 403
    /// are `permission_denied`, other 4xx `invalid_argument`, the rest `unknown_error`.
    pub fn from_status(status: u16, detail: impl Into<String>) -> Self {
        let code = match status {
            403 | 401 => ErrorCode::PermissionDenied,
            400..=499 => ErrorCode::InvalidArgument,
            _ => ErrorCode::UnknownError,
        };
        Self::new(code, detail)
    }
}

/// A command as sent: its id, method and parameters (parsed by method later).
#[derive(Clone, Debug, PartialEq)]
pub struct Command {
    /// The client's id for it (echoed in the answer).
    pub id: u64,
    /// `run.start`, `input.respond`, ...
    pub method: String,
    /// Its parameters (`{}` when absent).
    pub params: Value,
}

/// Why a frame is not a command: the error frame to answer (its id when the frame had one).
#[derive(Clone, Debug, PartialEq)]
pub struct BadFrame {
    /// The frame's id, when it had an integer one.
    pub id: Option<u64>,
    /// The error.
    pub error: ProtocolError,
}

impl BadFrame {
    /// The error frame that answers it.
    #[must_use]
    pub fn response(&self) -> Value {
        error_frame(self.id, &self.error, None)
    }
}

impl Command {
    /// Read a command from the bytes of a frame.
    ///
    /// # Errors
    /// Not JSON, or not an object with an integer `id` and a string `method` (`params`, when
    /// present, must be an object).
    pub fn parse(frame: &[u8]) -> Result<Self, BadFrame> {
        let v: Value = serde_json::from_slice(frame).map_err(|_| BadFrame {
            id: None,
            error: ProtocolError::invalid("Protocol commands must be valid JSON."),
        })?;
        let id = v.get("id").and_then(Value::as_u64);
        let method = v.get("method").and_then(Value::as_str);
        let (Some(id), Some(method)) = (id, method) else {
            return Err(BadFrame {
                id,
                error: ProtocolError::invalid(
                    "Protocol commands must include an integer id and string method.",
                ),
            });
        };
        let params = match v.get("params") {
            None | Some(Value::Null) => json!({}),
            Some(p @ Value::Object(_)) => p.clone(),
            Some(_) => {
                return Err(BadFrame {
                    id: Some(id),
                    error: ProtocolError::invalid("Protocol command params must be an object."),
                })
            }
        };
        Ok(Self {
            id,
            method: method.to_owned(),
            params,
        })
    }
}

/// `{"type": "success", "id", "result", "meta": {"applied_through_seq"}}`.
#[must_use]
pub fn success_frame(id: u64, result: Value, applied_through_seq: u64) -> Value {
    json!({
        "type": "success",
        "id": id,
        "result": result,
        "meta": {"applied_through_seq": applied_through_seq},
    })
}

/// `{"type": "error", "id", "error", "message"}` (with `meta` when given).
#[must_use]
pub fn error_frame(id: Option<u64>, e: &ProtocolError, applied_through_seq: Option<u64>) -> Value {
    let mut v = json!({
        "type": "error",
        "id": id,
        "error": e.code.as_str(),
        "message": e.message,
    });
    if let (Some(seq), Value::Object(m)) = (applied_through_seq, &mut v) {
        m.insert("meta".into(), json!({"applied_through_seq": seq}));
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_read_or_say_why_not() {
        let c = Command::parse(br#"{"id": 3, "method": "run.start", "params": {"a": 1}}"#).unwrap();
        assert_eq!(
            (c.id, c.method.as_str(), c.params.clone()),
            (3, "run.start", json!({"a": 1}))
        );
        let c = Command::parse(br#"{"id": 4, "method": "agent.getTree"}"#).unwrap();
        assert_eq!(c.params, json!({}));
        let bad = Command::parse(b"not json").unwrap_err();
        assert_eq!(bad.response()["error"], "invalid_argument");
        assert_eq!(bad.response()["id"], Value::Null);
        let bad = Command::parse(br#"{"id": 8}"#).unwrap_err();
        assert_eq!((bad.id, bad.error.code), (Some(8), ErrorCode::InvalidArgument));
        let bad = Command::parse(br#"{"id": "x", "method": "run.start"}"#).unwrap_err();
        assert_eq!(bad.id, None);
        let bad = Command::parse(br#"{"id": 1, "method": "run.start", "params": [1]}"#).unwrap_err();
        assert_eq!(bad.id, Some(1));
    }

    #[test]
    fn sequence_numbers_order_runs_then_events() {
        assert!(seq(0, 5, 1) < seq(0, 6, 0));
        assert!(seq(0, MAX_EVENT_INDEX + 9, 255) < seq(1, 0, 0));
        assert!(seq((1 << 21) - 1, MAX_EVENT_INDEX, MAX_SUB) < (1u64 << 53));
    }

    #[test]
    fn events_serialise_as_the_client_reads_them() {
        let ev = Event {
            seq: 7,
            event_id: "r:1:0".into(),
            method: Method::InputRequested,
            namespace: vec!["review:1".into()],
            node: None,
            timestamp: 1,
            data: json!({"interrupt_id": "i"}).into(),
        };
        let v: Value = serde_json::from_str(&ev.to_text()).unwrap();
        // The keys in the order a JSON object of them is written.
        assert_eq!(ev.to_text(), v.to_string());
        assert_eq!(v["method"], "input.requested");
        assert_eq!(v["params"]["namespace"], json!(["review:1"]));
        assert!(ev.sse_frame().starts_with("event: input.requested\r\ndata: {"));
        assert!(ev.sse_frame().ends_with("id: 7\r\n\r\n"));
    }
}
