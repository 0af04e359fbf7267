//! Run events on the wire: [`JsonRunEvent`]s turned into the server-sent events the
//! official `langgraph-sdk` clients read.
//!
//! A client asks for wire modes ([`WireMode`]s in `stream_mode`: `values`, `updates`,
//! `messages`, `messages-tuple`, `custom`, `events`, `debug`, `tasks`, `checkpoints`);
//! [`WireModes::from_modes`] collects them and [`WireModes::core_modes`] says which core
//! [`StreamMode`]s the run must produce for them. A [`WireEncoder`] (one per run) turns each
//! event of the run into zero or more `(event name, data)` pairs, and [`sse_frame`] writes
//! one pair as an SSE frame.
//!
//! The rules, as LangGraph Server applies them:
//!
//! - A part from a subgraph is named `"<name>|<ns1>|<ns2>…"` (`values|sub:1f0…`), for
//!   every event name except `events` (whose nesting lives in `parent_ids`).
//! - `messages-tuple` parts go out as event `messages` with data `[chunk, metadata]`.
//! - `messages` parts are accumulated per message id: `messages/metadata`
//!   `{id: {"metadata": …}}` once per id, then `messages/partial` `[message so far]` for
//!   each chunk (content concatenated, tool-call chunks merged by index and parsed into
//!   `tool_calls`, type `ai`), or `messages/complete` `[message]` for a whole message.
//! - Interrupts go out as `updates` `{"__interrupt__": […]}` when `updates` was asked for,
//!   else as a `values` event with that same data when `values` was, else not at all (a
//!   client that asked for `custom` or `events` alone gets no frame for them, as from
//!   LangGraph Server). Since the core reports interrupts only in its `updates` mode,
//!   [`WireModes::core_modes`] always includes it.
//! - `events` parts (the core's `astream_events` v2 events, see `graphloom_core::events`)
//!   go out as event `events`, at any depth, as LangGraph Server sends them: the graph's
//!   own run is named after the graph id and sends no `on_chain_stream` (its start and end
//!   only), and every event's metadata gets the run's (`run_id`, `thread_id`, `graph_id`,
//!   `assistant_id`) where it lacks them.
//! - A failed run ends with `error` `{"error": <error type>, "message": …}`; a run that
//!   ends well adds nothing (the stream just closes).

mod modes;

pub use modes::{parse_stream_modes, WireMode, WireModes};

use crate::json::{JsonRunEvent, JsonRunOutput};
use graphloom_core::{Error, StreamMode};
use serde_json::{json, Map, Value};
use std::collections::HashMap;

/// The comment line sent every few seconds to keep an SSE connection open.
pub const HEARTBEAT: &str = ": heartbeat\r\n\r\n";

/// The type name an error is reported under in `error` events and `__error__` bodies,
/// after LangGraph's exception classes where one fits.
#[must_use]
pub fn error_name(e: &Error) -> &'static str {
    match e {
        Error::RecursionLimit { .. } => "GraphRecursionError",
        Error::State { .. } => "InvalidUpdateError",
        Error::NodeTimeout { .. } | Error::RunTimeout { .. } => "TimeoutError",
        Error::Node { .. } => "NodeError",
        Error::BudgetExceeded { .. } => "BudgetExceededError",
        Error::Cancelled => "CancelledError",
        Error::Drained => "GraphDrained",
        Error::NotFound(_) => "NotFoundError",
        Error::CorruptCheckpoint { .. } => "CorruptCheckpointError",
        Error::Backend(_) => "BackendError",
        Error::InvalidGraph(_)
        | Error::Decode(_)
        | Error::UnknownNode(_)
        | Error::InvalidResume(_)
        | Error::NoCheckpointer(_) => "ValueError",
        _ => "Error",
    }
}

/// `{"error": <type name>, "message": <message>}` for an error (a [`ForeignError`]'s class
/// and message as they are).
///
/// [`ForeignError`]: crate::json::ForeignError
#[must_use]
pub fn error_json(e: &Error) -> Value {
    if let Some(foreign) = e.find_source::<crate::json::ForeignError>() {
        return json!({"error": foreign.class, "message": foreign.message});
    }
    json!({"error": error_name(e), "message": e.to_string()})
}

/// The first event of a run's stream: `metadata` `{"run_id", "attempt"}`.
#[must_use]
pub fn metadata_event(run_id: &str, attempt: u32) -> (String, Value) {
    (
        "metadata".to_owned(),
        json!({"run_id": run_id, "attempt": attempt}),
    )
}

/// The body of `runs/wait` (and `join`): the final values; for an interrupted run the
/// values with `"__interrupt__": [...]` added; for a failed run
/// `{"__error__": {"error", "message"}}`.
#[must_use]
pub fn wait_body(out: &Result<JsonRunOutput, Error>) -> Value {
    match out {
        Ok(o) => {
            let mut values = o.values.clone();
            if o.interrupted && !o.interrupts.is_empty() {
                let ints = serde_json::to_value(&o.interrupts).unwrap_or(Value::Null);
                match &mut values {
                    Value::Object(m) => {
                        m.insert("__interrupt__".into(), ints);
                    }
                    Value::Null => values = json!({"__interrupt__": ints}),
                    _ => {}
                }
            }
            values
        }
        Err(e) => json!({"__error__": error_json(e)}),
    }
}

/// One SSE frame: `event: <name>\r\ndata: <compact json>\r\n[id: <id>\r\n]\r\n`. Line
/// breaks in the name or id (which would end the field) are replaced by spaces; the JSON
/// is compact, so it is one line.
#[must_use]
pub fn sse_frame(event: &str, data: &Value, id: Option<&str>) -> String {
    let data = serde_json::to_string(data).unwrap_or_else(|_| "null".to_owned());
    sse_text_frame(event, &data, id)
}

/// [`sse_frame`] of data already written as compact JSON.
#[must_use]
pub fn sse_text_frame(event: &str, data: &str, id: Option<&str>) -> String {
    let clean = |s: &str| s.replace(['\r', '\n'], " ");
    let mut out = format!("event: {}\r\ndata: {data}\r\n", clean(event));
    if let Some(id) = id {
        out.push_str("id: ");
        out.push_str(&clean(id));
        out.push_str("\r\n");
    }
    out.push_str("\r\n");
    out
}

/// Turns one run's events into wire events. Keeps what the run needs across events: the
/// messages accumulated so far (for `messages` mode).
#[derive(Debug)]
pub struct WireEncoder {
    modes: WireModes,
    run_meta: Map<String, Value>,
    /// Accumulated messages by id.
    messages: HashMap<String, Value>,
    anon: u64,
}

impl WireEncoder {
    /// An encoder for a run. `run_meta` (an object: `run_id`, `thread_id`, `graph_id`,
    /// `assistant_id`, …) is merged into the metadata of message and `events` events.
    #[must_use]
    pub fn new(modes: WireModes, run_meta: Value) -> Self {
        let run_meta = match run_meta {
            Value::Object(m) => m,
            _ => Map::new(),
        };
        Self {
            modes,
            run_meta,
            messages: HashMap::new(),
            anon: 0,
        }
    }

    /// The wire events for one run event, in order.
    pub fn encode(&mut self, ev: JsonRunEvent) -> Vec<(String, Value)> {
        match ev {
            JsonRunEvent::Part { mode, ns, data } => self.part(mode, &ns, data),
            JsonRunEvent::End(r) => Self::end(&r),
        }
    }

    /// The wire events for the run's end: an `error` event when it failed. A cancelled
    /// run's stream ends without one, as the reference server's does (its status says
    /// how it ended: `interrupted`, or gone when rolled back), and so does a drained one's
    /// (it goes back to the queue and continues: it has not ended).
    #[must_use]
    pub fn end(r: &Result<JsonRunOutput, Error>) -> Vec<(String, Value)> {
        match r {
            Ok(_) | Err(Error::Cancelled | Error::Drained) => Vec::new(),
            Err(e) => vec![("error".to_owned(), error_json(e))],
        }
    }

    /// The wire events for one part of the run's stream (its payload moves into them).
    pub fn part(&mut self, mode: StreamMode, ns: &[String], data: Value) -> Vec<(String, Value)> {
        let mut out = Vec::new();
        let name = |base: &str| {
            if ns.is_empty() {
                base.to_owned()
            } else {
                format!("{base}|{}", ns.join("|"))
            }
        };
        let m = self.modes;
        match mode {
            StreamMode::Values if m.values => out.push((name("values"), data)),
            StreamMode::Updates => {
                if m.updates {
                    out.push((name("updates"), data));
                } else if m.values && is_interrupt(&data) {
                    out.push((name("values"), data));
                }
            }
            StreamMode::Messages => {
                let (chunk, meta) = match data {
                    Value::Array(mut pair) if pair.len() == 2 => {
                        let meta = pair.pop().unwrap_or(Value::Null);
                        (pair.pop().unwrap_or(Value::Null), meta)
                    }
                    other => (other, Value::Null),
                };
                let meta = self.message_meta(meta);
                match (m.messages_tuple, m.messages) {
                    (true, true) => {
                        out.push((name("messages"), Value::Array(vec![chunk.clone(), meta.clone()])));
                        self.accumulate(chunk, &meta, &name, &mut out);
                    }
                    (true, false) => out.push((name("messages"), Value::Array(vec![chunk, meta]))),
                    (false, true) => self.accumulate(chunk, &meta, &name, &mut out),
                    (false, false) => {}
                }
            }
            StreamMode::Custom if m.custom => out.push((name("custom"), data)),
            StreamMode::Tasks if m.tasks => out.push((name("tasks"), data)),
            StreamMode::Events if m.events => {
                if let Some(ev) = self.event(data) {
                    out.push(("events".to_owned(), ev));
                }
            }
            StreamMode::Checkpoints if m.checkpoints => out.push((name("checkpoints"), data)),
            StreamMode::Debug if m.debug => out.push((name("debug"), data)),
            _ => {}
        }
        out
    }

    fn run_id(&self) -> Value {
        self.run_meta.get("run_id").cloned().unwrap_or(Value::Null)
    }

    /// An `events` part as LangGraph Server sends it: the graph's own run named after the
    /// graph id, without its `on_chain_stream` events, and the run's metadata under every
    /// event's own. `None` for a part to leave out.
    fn event(&self, mut ev: Value) -> Option<Value> {
        let root = ev
            .get("run_id")
            .is_some_and(|id| Some(id) == self.run_meta.get("run_id"))
            && ev
                .get("parent_ids")
                .and_then(Value::as_array)
                .is_some_and(Vec::is_empty);
        if root {
            if ev.get("event").and_then(Value::as_str) == Some("on_chain_stream") {
                return None;
            }
            if let (Some(id), Value::Object(m)) = (self.run_meta.get("graph_id"), &mut ev) {
                m.insert("name".into(), id.clone());
            }
        }
        if let Some(Value::Object(meta)) = ev.get_mut("metadata") {
            for (k, v) in &self.run_meta {
                meta.entry(k.clone()).or_insert_with(|| v.clone());
            }
        }
        Some(ev)
    }

    /// A message's metadata with the run's metadata merged in and `checkpoint_ns` set.
    fn message_meta(&self, meta: Value) -> Value {
        let mut meta = match meta {
            Value::Object(m) => m,
            _ => Map::new(),
        };
        for (k, v) in &self.run_meta {
            meta.insert(k.clone(), v.clone());
        }
        if !meta.contains_key("checkpoint_ns") {
            let ns = meta
                .get("langgraph_checkpoint_ns")
                .cloned()
                .unwrap_or_else(|| json!(""));
            meta.insert("checkpoint_ns".into(), ns);
        }
        Value::Object(meta)
    }

    fn accumulate(
        &mut self,
        mut chunk: Value,
        meta: &Value,
        name: &dyn Fn(&str) -> String,
        out: &mut Vec<(String, Value)>,
    ) {
        let id = match chunk.get("id").and_then(Value::as_str) {
            Some(id) if !id.is_empty() => id.to_owned(),
            _ => {
                self.anon += 1;
                let id = format!("run-{}-msg-{}", self.run_id().as_str().unwrap_or(""), self.anon);
                if let Value::Object(m) = &mut chunk {
                    m.insert("id".into(), json!(id));
                }
                id
            }
        };
        let is_chunk = is_chunk(&chunk);
        if !self.messages.contains_key(&id) {
            out.push((
                name("messages/metadata"),
                json!({ id.clone(): {"metadata": meta} }),
            ));
        }
        if is_chunk {
            let acc = match self.messages.remove(&id) {
                Some(mut acc) => {
                    merge_chunk(&mut acc, &chunk);
                    acc
                }
                None => chunk,
            };
            out.push((name("messages/partial"), json!([chunk_to_message(&acc)])));
            self.messages.insert(id, acc);
        } else {
            out.push((name("messages/complete"), json!([chunk])));
            self.messages.insert(id, chunk);
        }
    }
}

/// Whether a `messages` part is a chunk of a streamed message (`AIMessageChunk`, ...)
/// rather than a whole message.
fn is_chunk(message: &Value) -> bool {
    message
        .get("type")
        .and_then(Value::as_str)
        .is_some_and(|t| t.ends_with("Chunk"))
}

fn is_interrupt(data: &Value) -> bool {
    data.get("__interrupt__")
        .and_then(Value::as_array)
        .is_some_and(|a| !a.is_empty())
}

/// Add `next` into the accumulated chunk `acc`, as LangChain adds message chunks: text
/// concatenated, content blocks and tool-call chunks merged by `index`, usage summed,
/// metadata merged.
fn merge_chunk(acc: &mut Value, next: &Value) {
    let (Value::Object(a), Value::Object(n)) = (acc, next) else {
        return;
    };
    for (k, v) in n {
        match k.as_str() {
            "id" | "type" => {
                if a.get(k).is_none_or(Value::is_null) {
                    a.insert(k.clone(), v.clone());
                }
            }
            "content" => {
                let cur = a.remove("content").unwrap_or(Value::Null);
                a.insert("content".into(), merge_content(cur, v));
            }
            "tool_call_chunks" => {
                let cur = a.remove(k).unwrap_or_else(|| json!([]));
                a.insert(k.clone(), merge_indexed(cur, v));
            }
            "usage_metadata" => {
                let cur = a.remove(k).unwrap_or(Value::Null);
                a.insert(k.clone(), add_numbers(cur, v));
            }
            "response_metadata" | "additional_kwargs" => {
                let mut cur = a.remove(k).unwrap_or_else(|| json!({}));
                merge_objects(&mut cur, v);
                a.insert(k.clone(), cur);
            }
            _ => {
                if !v.is_null() {
                    a.insert(k.clone(), v.clone());
                }
            }
        }
    }
}

fn merge_content(cur: Value, next: &Value) -> Value {
    match (cur, next) {
        (Value::Null, n) => n.clone(),
        (c, Value::Null) => c,
        (Value::String(mut a), Value::String(b)) => {
            a.push_str(b);
            Value::String(a)
        }
        (Value::String(a), Value::Array(b)) => {
            let start = if a.is_empty() {
                json!([])
            } else {
                json!([{"type": "text", "text": a}])
            };
            merge_indexed(start, &Value::Array(b.clone()))
        }
        (Value::Array(a), Value::String(b)) => {
            let mut a = a;
            if !b.is_empty() {
                match a.last_mut() {
                    Some(Value::Object(last)) if last.get("type") == Some(&json!("text")) => {
                        let text = last.get("text").and_then(Value::as_str).unwrap_or("").to_owned() + b;
                        last.insert("text".into(), json!(text));
                    }
                    _ => a.push(json!({"type": "text", "text": b})),
                }
            }
            Value::Array(a)
        }
        (a @ Value::Array(_), b @ Value::Array(_)) => merge_indexed(a, b),
        (_, n) => n.clone(),
    }
}

/// Merge two lists whose object items may carry an `index`: items with the same index
/// merge (strings concatenated, first non-null id/name/type kept), others are appended.
fn merge_indexed(cur: Value, next: &Value) -> Value {
    let mut items = match cur {
        Value::Array(a) => a,
        Value::Null => Vec::new(),
        other => vec![other],
    };
    let Value::Array(next) = next else {
        return Value::Array(items);
    };
    for item in next {
        let idx = item.get("index").filter(|i| !i.is_null());
        let target = idx.and_then(|i| items.iter_mut().find(|x| x.get("index") == Some(i)));
        match (target, item) {
            (Some(Value::Object(t)), Value::Object(n)) => {
                for (k, v) in n {
                    match (t.get_mut(k), v) {
                        (_, Value::Null) => {}
                        (Some(Value::String(a)), Value::String(b))
                            if !matches!(k.as_str(), "id" | "name" | "type") =>
                        {
                            a.push_str(b);
                        }
                        (Some(cur), _) if !cur.is_null() => {}
                        _ => {
                            t.insert(k.clone(), v.clone());
                        }
                    }
                }
            }
            _ => items.push(item.clone()),
        }
    }
    Value::Array(items)
}

fn add_numbers(cur: Value, next: &Value) -> Value {
    match (cur, next) {
        (Value::Null, n) => n.clone(),
        (Value::Object(mut a), Value::Object(b)) => {
            for (k, v) in b {
                let c = a.remove(k).unwrap_or(Value::Null);
                a.insert(k.clone(), add_numbers(c, v));
            }
            Value::Object(a)
        }
        (Value::Number(a), Value::Number(b)) => match (a.as_i64(), b.as_i64()) {
            (Some(x), Some(y)) => json!(x.saturating_add(y)),
            _ => json!(a.as_f64().unwrap_or(0.0) + b.as_f64().unwrap_or(0.0)),
        },
        (_, n) => n.clone(),
    }
}

fn merge_objects(cur: &mut Value, next: &Value) {
    match (cur, next) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                if v.is_null() {
                    continue;
                }
                match a.get_mut(k) {
                    Some(c @ Value::Object(_)) => merge_objects(c, v),
                    _ => {
                        a.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (c, n) => *c = n.clone(),
    }
}

/// An accumulated chunk as the message a client sees (LangChain's
/// `message_chunk_to_message`): type without `Chunk`, tool-call chunks parsed into
/// `tool_calls` (or `invalid_tool_calls` when their arguments are not JSON yet).
fn chunk_to_message(acc: &Value) -> Value {
    let Value::Object(src) = acc else {
        return acc.clone();
    };
    let mut m = src.clone();
    let ty = m
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("AIMessageChunk")
        .to_owned();
    let ty = match ty.as_str() {
        "AIMessageChunk" => "ai".to_owned(),
        "HumanMessageChunk" => "human".to_owned(),
        "SystemMessageChunk" => "system".to_owned(),
        "ToolMessageChunk" => "tool".to_owned(),
        "ChatMessageChunk" => "chat".to_owned(),
        "FunctionMessageChunk" => "function".to_owned(),
        other => other.trim_end_matches("Chunk").to_owned(),
    };
    m.insert("type".into(), json!(ty));
    m.remove("chunk_position");
    let chunks = m.remove("tool_call_chunks");
    if ty == "ai" {
        let mut calls = Vec::new();
        let mut invalid = Vec::new();
        if let Some(Value::Array(chunks)) = chunks {
            for c in chunks {
                let args = c.get("args").and_then(Value::as_str).unwrap_or("");
                let name = c.get("name").cloned().unwrap_or(Value::Null);
                let id = c.get("id").cloned().unwrap_or(Value::Null);
                match parse_partial_json(args) {
                    Some(Value::Object(parsed)) => calls.push(json!({
                        "name": name, "args": parsed, "id": id, "type": "tool_call",
                    })),
                    _ => invalid.push(json!({
                        "name": name, "args": args, "id": id, "error": null, "type": "invalid_tool_call",
                    })),
                }
            }
        }
        if m.get("tool_calls")
            .and_then(Value::as_array)
            .is_none_or(Vec::is_empty)
        {
            m.insert("tool_calls".into(), Value::Array(calls));
        }
        if m.get("invalid_tool_calls")
            .and_then(Value::as_array)
            .is_none_or(Vec::is_empty)
        {
            m.insert("invalid_tool_calls".into(), Value::Array(invalid));
        }
        m.entry("usage_metadata").or_insert(Value::Null);
    }
    m.entry("content").or_insert_with(|| json!(""));
    m.entry("additional_kwargs").or_insert_with(|| json!({}));
    m.entry("response_metadata").or_insert_with(|| json!({}));
    m.entry("name").or_insert(Value::Null);
    Value::Object(m)
}

/// Parse JSON that may be cut off (tool-call arguments mid-stream): close open strings,
/// arrays and objects, dropping trailing characters until it parses. Empty text is `{}`.
fn parse_partial_json(s: &str) -> Option<Value> {
    if s.trim().is_empty() {
        return Some(json!({}));
    }
    if let Ok(v) = serde_json::from_str(s) {
        return Some(v);
    }
    let cuts: Vec<usize> = s
        .char_indices()
        .map(|(i, _)| i)
        .skip(1)
        .chain([s.len()])
        .collect();
    for &end in cuts.iter().rev() {
        let prefix = &s[..end];
        let Some(closers) = closers(prefix) else {
            continue;
        };
        if let Ok(v) = serde_json::from_str::<Value>(&format!("{prefix}{closers}")) {
            return Some(v);
        }
    }
    None
}

/// What closes the open strings and brackets of `prefix`, or `None` if it is malformed.
fn closers(prefix: &str) -> Option<String> {
    let mut stack: Vec<char> = Vec::new();
    let mut in_str = false;
    let mut escaped = false;
    for c in prefix.chars() {
        if in_str {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_str = false;
            }
            continue;
        }
        match c {
            '"' => in_str = true,
            '{' => stack.push('}'),
            '[' => stack.push(']'),
            // A closer must match the innermost open bracket.
            '}' | ']' if stack.pop() != Some(c) => return None,
            _ => {}
        }
    }
    if escaped {
        return None;
    }
    let mut out = String::new();
    if in_str {
        out.push('"');
    }
    out.extend(stack.iter().rev());
    Some(out)
}

#[cfg(test)]
mod tests;
