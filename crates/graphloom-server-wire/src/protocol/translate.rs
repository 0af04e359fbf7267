//! A run's event log (the wire events the run-centric API streams: `values|<ns>`,
//! `updates`, `messages` as `[chunk, metadata]`, `custom`, `checkpoints`, `tasks`,
//! `error`) as protocol [`Event`]s: [`RunTranslator`].
//!
//! - `metadata` (a run's start) gives `lifecycle` `running` for the root.
//! - The first event of a namespace gives `lifecycle` `started` for it (with its
//!   `graph_name`, the node that runs it, and `trigger_call_id`, its task); the parent's
//!   update from that node gives `completed`; the run's end gives the run's outcome
//!   (`completed`, `interrupted`, `failed`) to every namespace still open, deepest first,
//!   then to the root.
//! - `values` pass through; `updates` `{node: update}` give one `updates` event
//!   `{"node", "values"}` per node, and `tools` events (`tool-started`, then
//!   `tool-finished` or `tool-error`) for the tool messages in it; interrupts
//!   (`__interrupt__`) give one `input.requested` `{"interrupt_id", "payload"}` each (with
//!   the interrupt's `response_schema` when it has one).
//! - Message chunks give `messages` block events (see `messages.rs`). A whole message a
//!   node returns is not streamed: only what a model streamed reaches `messages`.
//! - `custom` gives `{"payload"}`, or the value itself when it is `{"name", "payload"}`
//!   (a named extension, `custom:<name>`); `checkpoints` give their envelope.

use super::messages::{is_model_chunk, FinishedCall, MessageStreams};
use super::{now_ms, seq, Channel, Event, Filter, Method};
use graphloom_server_db::models::RunStatus;
use graphloom_server_db::RunEventRecord;
use serde_json::{json, Map, Value};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// How a namespace of the run stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Running.
    Running,
    /// Ended well.
    Completed,
    /// Paused at an interrupt.
    Interrupted,
    /// Failed.
    Failed,
}

impl Status {
    /// The wire name (`running`, `completed`, ...).
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Completed => "completed",
            Self::Interrupted => "interrupted",
            Self::Failed => "failed",
        }
    }
}

/// Turns one run's events into protocol events (see the module docs).
#[derive(Debug)]
pub struct RunTranslator {
    run_id: String,
    ordinal: u64,
    graph_name: String,
    root: Option<Status>,
    /// Subgraph namespaces in the order they started, with how they stand.
    namespaces: Vec<(Vec<String>, Status)>,
    seen: HashSet<Vec<String>>,
    messages: MessageStreams,
    /// Tool calls seen so far: id -> (name, args).
    calls: HashMap<String, (String, Value)>,
    interrupts: HashSet<String>,
    error: Option<String>,
    index: u64,
    sub: u64,
    /// The methods whose events are built (the others are only counted).
    builds: Methods,
}

/// The methods a [`RunTranslator`] builds events of. The events of the others are only
/// counted, so the events it does build have the sequence numbers and ids they have on a
/// translator that builds them all: a stream whose channels are fixed (SSE) skips the
/// work of the events it would drop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Methods(u16);

impl Methods {
    /// Every method.
    pub const ALL: Self = Self(u16::MAX);

    /// The methods whose events `filter` may deliver (by channel: `custom:<name>` needs
    /// the custom events, whatever their name).
    #[must_use]
    pub fn of(filter: &Filter) -> Self {
        let mut bits = 0u16;
        for c in &filter.channels {
            let m = match c {
                Channel::Values => Method::Values,
                Channel::Updates => Method::Updates,
                Channel::Messages => Method::Messages,
                Channel::Tools => Method::Tools,
                Channel::Lifecycle => Method::Lifecycle,
                Channel::Input => Method::InputRequested,
                Channel::Checkpoints => Method::Checkpoints,
                Channel::Tasks => Method::Tasks,
                Channel::Custom | Channel::CustomNamed(_) => Method::Custom,
            };
            bits |= Self::bit(m);
        }
        Self(bits)
    }

    fn bit(m: Method) -> u16 {
        1 << (m as u16)
    }

    /// Whether `m`'s events are built.
    #[must_use]
    pub fn has(self, m: Method) -> bool {
        self.0 & Self::bit(m) != 0
    }
}

impl RunTranslator {
    /// A translator of run `run_id`, the `ordinal`-th run of its thread, of graph
    /// `graph_name`.
    #[must_use]
    pub fn new(run_id: impl Into<String>, ordinal: u64, graph_name: impl Into<String>) -> Self {
        Self {
            run_id: run_id.into(),
            ordinal,
            graph_name: graph_name.into(),
            root: None,
            namespaces: Vec::new(),
            seen: HashSet::new(),
            messages: MessageStreams::default(),
            calls: HashMap::new(),
            interrupts: HashSet::new(),
            error: None,
            index: 0,
            sub: 0,
            builds: Methods::ALL,
        }
    }

    /// This translator, building only the events of `methods` (see [`Methods`]).
    #[must_use]
    pub fn building(mut self, methods: Methods) -> Self {
        self.builds = methods;
        self
    }

    /// The run's id.
    #[must_use]
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// The protocol events of one event of the run's log.
    pub fn push(&mut self, rec: &RunEventRecord) -> Vec<Event> {
        self.index = rec.id;
        self.sub = 0;
        let mut out = Vec::new();
        let mut parts = rec.event.split('|');
        let base = parts.next().unwrap_or_default();
        let ns: Vec<String> = parts.map(str::to_owned).collect();
        if self.root.is_none() {
            self.root = Some(Status::Running);
            let running = json!({"event": "running", "graph_name": self.graph_name});
            self.emit(&mut out, Method::Lifecycle, &[], None, running);
        }
        if base == "metadata" || base == "error" {
            // A cancel is not a failure: the run ends `interrupted`, as a run stopped by a
            // newer run's `interrupt` does on the reference server. (Logs stored before
            // cancelled runs stopped logging an error still hold one.)
            let cancel = rec.data.get("error").and_then(Value::as_str) == Some("CancelledError");
            if base == "error" && !cancel {
                let msg = rec
                    .data
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("the run failed");
                self.error = Some(msg.to_owned());
            }
            return out;
        }
        self.start_namespaces(&ns, &mut out);
        match base {
            "values" => self.values(&ns, &rec.data, &mut out),
            "updates" => self.updates(&ns, &rec.data, &mut out),
            "messages" => self.message(&ns, &rec.data, &mut out),
            "custom" if !self.builds.has(Method::Custom) => self.skip(),
            "custom" => {
                let named = rec.data.as_object().is_some_and(|m| {
                    m.len() == 2 && m.get("name").is_some_and(Value::is_string) && m.contains_key("payload")
                });
                let data = if named {
                    Arc::clone(&rec.data)
                } else {
                    let mut m = Map::new();
                    m.insert("payload".into(), Value::clone(&rec.data));
                    Arc::new(Value::Object(m))
                };
                self.emit(&mut out, Method::Custom, &ns, None, data);
            }
            "checkpoints" if !self.builds.has(Method::Checkpoints) => self.skip(),
            "checkpoints" => {
                let cfg_id = |c: Option<&Value>| {
                    c.and_then(|c| c.get("configurable")?.get("checkpoint_id"))
                        .cloned()
                };
                let mut env = Map::new();
                env.insert("id".into(), cfg_id(rec.data.get("config")).unwrap_or(Value::Null));
                if let Some(p) = cfg_id(rec.data.get("parent_config")).filter(|p| !p.is_null()) {
                    env.insert("parent_id".into(), p);
                }
                let meta = rec.data.get("metadata");
                env.insert(
                    "step".into(),
                    meta.and_then(|m| m.get("step")).cloned().unwrap_or(json!(0)),
                );
                env.insert(
                    "source".into(),
                    meta.and_then(|m| m.get("source"))
                        .cloned()
                        .unwrap_or(json!("loop")),
                );
                self.emit(&mut out, Method::Checkpoints, &ns, None, Value::Object(env));
            }
            "tasks" => self.emit(&mut out, Method::Tasks, &ns, None, Arc::clone(&rec.data)),
            _ => {}
        }
        out
    }

    /// The events that end the run, after event `end_index - 1` of its log, given the
    /// run's final `status`: messages still open finish, then every open namespace and
    /// the root get the run's outcome.
    pub fn finish(&mut self, end_index: u64, status: RunStatus) -> Vec<Event> {
        self.index = end_index;
        self.sub = 0;
        let mut out = Vec::new();
        let mut calls = Vec::new();
        for (ns, node, evs) in self.messages.finish_all(&mut calls) {
            for data in evs {
                self.emit(&mut out, Method::Messages, &ns, Some(&node), data);
            }
        }
        self.remember(calls);
        let outcome = self.outcome(status);
        let open: Vec<Vec<String>> = self
            .namespaces
            .iter()
            .filter(|(_, s)| *s == Status::Running)
            .map(|(ns, _)| ns.clone())
            .collect();
        for ns in open.iter().rev() {
            self.set_status(ns, outcome);
            let data = json!({"event": outcome.as_str(), "graph_name": ns_name(ns)});
            self.emit(&mut out, Method::Lifecycle, ns, None, data);
        }
        let mut data = json!({"event": outcome.as_str(), "graph_name": self.graph_name});
        if let (Status::Failed, Some(err), Value::Object(m)) = (outcome, &self.error, &mut data) {
            m.insert("error".into(), json!(err));
        }
        self.root = Some(outcome);
        self.emit(&mut out, Method::Lifecycle, &[], None, data);
        out
    }

    /// The run's outcome for its final status and what its events said.
    fn outcome(&self, status: RunStatus) -> Status {
        if self.error.is_some() || matches!(status, RunStatus::Error | RunStatus::Timeout) {
            Status::Failed
        } else if !self.interrupts.is_empty() || status == RunStatus::Interrupted {
            Status::Interrupted
        } else {
            Status::Completed
        }
    }

    /// The run's agent tree (`agent.getTree`): the root and the namespaces below it, each
    /// with its status.
    #[must_use]
    pub fn tree(&self) -> Value {
        fn children(all: &[(Vec<String>, Status)], parent: &[String]) -> Vec<Value> {
            all.iter()
                .filter(|(ns, _)| ns.len() == parent.len() + 1 && ns.starts_with(parent))
                .map(|(ns, st)| {
                    let mut node = json!({"namespace": ns, "status": st.as_str(), "graph_name": ns_name(ns)});
                    let kids = children(all, ns);
                    if let (false, Value::Object(m)) = (kids.is_empty(), &mut node) {
                        m.insert("children".into(), Value::Array(kids));
                    }
                    node
                })
                .collect()
        }
        let root = self.root.unwrap_or(Status::Running);
        let mut tree = json!({"namespace": [], "status": root.as_str(), "graph_name": self.graph_name});
        let kids = children(&self.namespaces, &[]);
        if let (false, Value::Object(m)) = (kids.is_empty(), &mut tree) {
            m.insert("children".into(), Value::Array(kids));
        }
        tree
    }

    fn emit(
        &mut self,
        out: &mut Vec<Event>,
        method: Method,
        ns: &[String],
        node: Option<&str>,
        data: impl Into<Arc<Value>>,
    ) {
        if self.builds.has(method) {
            out.push(Event {
                seq: seq(self.ordinal, self.index, self.sub),
                event_id: format!("{}:{}:{}", self.run_id, self.index, self.sub),
                method,
                namespace: ns.to_vec(),
                node: node.map(str::to_owned),
                timestamp: now_ms(),
                data: data.into(),
            });
        }
        self.sub += 1;
    }

    /// Count an event that is not built (its data would be dear to make).
    fn skip(&mut self) {
        self.sub += 1;
    }

    fn start_namespaces(&mut self, ns: &[String], out: &mut Vec<Event>) {
        for len in 1..=ns.len() {
            let prefix = &ns[..len];
            if self.seen.contains(prefix) {
                continue;
            }
            self.seen.insert(prefix.to_vec());
            self.namespaces.push((prefix.to_vec(), Status::Running));
            let last = prefix.last().map_or("", String::as_str);
            let trigger = last.split_once(':').map_or("", |(_, id)| id);
            let data = json!({
                "event": "started", "namespace": prefix, "graph_name": ns_name(prefix),
                "trigger_call_id": trigger,
            });
            self.emit(out, Method::Lifecycle, prefix, None, data);
        }
    }

    fn set_status(&mut self, ns: &[String], st: Status) {
        if let Some(e) = self.namespaces.iter_mut().find(|(n, _)| n == ns) {
            e.1 = st;
        }
    }

    fn values(&mut self, ns: &[String], data: &Arc<Value>, out: &mut Vec<Event>) {
        if let Some(ints) = data.get("__interrupt__").and_then(Value::as_array) {
            let ints = ints.clone();
            self.interrupts_at(ns, &ints, out);
            return;
        }
        let mut evs = Vec::new();
        let mut calls = Vec::new();
        self.messages.finish_namespace(ns, (&mut evs, &mut calls));
        self.remember(calls);
        for e in evs {
            self.emit(out, Method::Messages, ns, None, e);
        }
        self.emit(out, Method::Values, ns, None, Arc::clone(data));
    }

    fn updates(&mut self, ns: &[String], data: &Value, out: &mut Vec<Event>) {
        let Some(map) = data.as_object() else {
            return;
        };
        for (node, upd) in map {
            if node == "__interrupt__" {
                if let Some(ints) = upd.as_array() {
                    self.interrupts_at(ns, ints, out);
                }
                continue;
            }
            let mut evs = Vec::new();
            let mut calls = Vec::new();
            self.messages.finish_node(ns, node, (&mut evs, &mut calls));
            self.remember(calls);
            for e in evs {
                self.emit(out, Method::Messages, ns, Some(node), e);
            }
            self.tool_events(ns, node, upd, out);
            if self.builds.has(Method::Updates) {
                let mut update = Map::new();
                update.insert("node".into(), Value::String(node.clone()));
                update.insert("values".into(), upd.clone());
                let update = Value::Object(update);
                self.emit(out, Method::Updates, ns, Some(node), update);
            } else {
                self.skip();
            }
            self.close_children(ns, node, out);
        }
    }

    /// The subgraphs node `node` of `ns` ran have completed (its update arrived).
    fn close_children(&mut self, ns: &[String], node: &str, out: &mut Vec<Event>) {
        let done: Vec<Vec<String>> = self
            .namespaces
            .iter()
            .filter(|(n, st)| {
                *st == Status::Running
                    && n.len() > ns.len()
                    && n.starts_with(ns)
                    && n[ns.len()].split(':').next() == Some(node)
            })
            .map(|(n, _)| n.clone())
            .collect();
        for n in done.iter().rev() {
            self.set_status(n, Status::Completed);
            let data = json!({"event": "completed", "graph_name": ns_name(n)});
            self.emit(out, Method::Lifecycle, n, None, data);
        }
    }

    fn interrupts_at(&mut self, ns: &[String], ints: &[Value], out: &mut Vec<Event>) {
        for i in ints {
            let id = i
                .get("id")
                .and_then(Value::as_str)
                .map_or_else(|| format!("interrupt_{}", self.interrupts.len()), str::to_owned);
            if !self.interrupts.insert(id.clone()) {
                continue;
            }
            let payload = i.get("value").cloned().unwrap_or(Value::Null);
            let mut data = json!({"interrupt_id": id, "payload": payload});
            // The schema the answer must match travels with the request for input.
            if let (Some(schema), Some(m)) = (i.get("response_schema"), data.as_object_mut()) {
                m.insert("response_schema".to_owned(), schema.clone());
            }
            self.emit(out, Method::InputRequested, ns, None, data);
        }
    }

    fn message(&mut self, ns: &[String], data: &Value, out: &mut Vec<Event>) {
        let (true, Some([chunk, meta])) = (is_model_chunk(data), data.as_array().map(Vec::as_slice)) else {
            return;
        };
        let node = meta
            .get("langgraph_node")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let mut evs = Vec::new();
        let mut calls = Vec::new();
        self.messages.chunk(ns, &node, chunk, (&mut evs, &mut calls));
        self.remember(calls);
        for e in evs {
            self.emit(out, Method::Messages, ns, Some(&node), e);
        }
    }

    fn remember(&mut self, calls: Vec<FinishedCall>) {
        for c in calls {
            self.calls.insert(c.id, (c.name, c.args));
        }
    }

    /// `tools` events for the tool messages of a node's update; the AI messages' tool
    /// calls are remembered for the inputs.
    fn tool_events(&mut self, ns: &[String], node: &str, upd: &Value, out: &mut Vec<Event>) {
        let msgs: Vec<&Value> = match upd.get("messages") {
            Some(Value::Array(list)) => list.iter().collect(),
            Some(m @ Value::Object(_)) => vec![m],
            _ => return,
        };
        for m in msgs {
            let ty = m.get("type").and_then(Value::as_str).unwrap_or("");
            if let (true, Some(Value::Array(tcs))) = (ty == "ai" || ty == "AIMessage", m.get("tool_calls")) {
                for tc in tcs {
                    if let (Some(id), Some(name)) = (
                        tc.get("id").and_then(Value::as_str),
                        tc.get("name").and_then(Value::as_str),
                    ) {
                        let args = tc.get("args").cloned().unwrap_or(Value::Null);
                        self.calls.insert(id.to_owned(), (name.to_owned(), args));
                    }
                }
            }
            if ty != "tool" {
                continue;
            }
            let Some(call_id) = m.get("tool_call_id").and_then(Value::as_str) else {
                continue;
            };
            if !self.builds.has(Method::Tools) {
                // Its two events, counted.
                self.skip();
                self.skip();
                continue;
            }
            let known = self.calls.get(call_id).cloned();
            let name = m
                .get("name")
                .and_then(Value::as_str)
                .map(str::to_owned)
                .or_else(|| known.as_ref().map(|k| k.0.clone()))
                .unwrap_or_default();
            let input = known.map_or(Value::Null, |k| k.1);
            let started =
                json!({"event": "tool-started", "tool_call_id": call_id, "tool_name": name, "input": input});
            self.emit(out, Method::Tools, ns, Some(node), started);
            let ended = if m.get("status").and_then(Value::as_str) == Some("error") {
                let message = match m.get("content") {
                    Some(Value::String(s)) => s.clone(),
                    Some(other) => other.to_string(),
                    None => String::new(),
                };
                json!({"event": "tool-error", "tool_call_id": call_id, "message": message})
            } else {
                json!({"event": "tool-finished", "tool_call_id": call_id, "output": m})
            };
            self.emit(out, Method::Tools, ns, Some(node), ended);
        }
    }
}

/// The name of a namespace's graph: its last segment before the `:` (the node running it).
fn ns_name(ns: &[String]) -> &str {
    let last = ns.last().map_or("", String::as_str);
    last.split_once(':').map_or(last, |(name, _)| name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(id: u64, event: &str, data: Value) -> RunEventRecord {
        RunEventRecord {
            id,
            event: event.into(),
            data: data.into(),
        }
    }

    fn methods(evs: &[Event]) -> Vec<String> {
        evs.iter()
            .map(|e| {
                let what = e
                    .data
                    .get("event")
                    .and_then(Value::as_str)
                    .map_or(String::new(), |s| format!(":{s}"));
                format!(
                    "{}{}{}",
                    e.method.as_str(),
                    what,
                    if e.namespace.is_empty() { "" } else { "@sub" }
                )
            })
            .collect()
    }

    #[test]
    fn a_run_with_a_tool_a_subgraph_and_an_interrupt() {
        let mut t = RunTranslator::new("r1", 2, "weather");
        let mut all = Vec::new();
        let log = [
            rec(0, "metadata", json!({"run_id": "r1", "attempt": 1})),
            rec(1, "values", json!({"messages": []})),
            rec(
                2,
                "messages",
                json!([{"type": "AIMessageChunk", "id": "m1", "content": "",
                "tool_call_chunks": [{"index": 0, "id": "c1", "name": "get_weather", "args": "{\"city\": \"Paris\"}"}]},
                {"langgraph_node": "agent"}]),
            ),
            rec(
                3,
                "updates",
                json!({"agent": {"messages": [{"type": "ai", "id": "m1", "content": "",
                "tool_calls": [{"id": "c1", "name": "get_weather", "args": {"city": "Paris"}}]}]}}),
            ),
            rec(
                4,
                "updates",
                json!({"tools": {"messages": [{"type": "tool", "tool_call_id": "c1",
                "name": "get_weather", "content": "sunny"}]}}),
            ),
            rec(5, "values|review:t1", json!({"messages": []})),
            rec(
                6,
                "updates|review:t1",
                json!({"__interrupt__": [{"value": {"q": 1}, "id": "i1"}]}),
            ),
            rec(
                7,
                "updates",
                json!({"__interrupt__": [{"value": {"q": 1}, "id": "i1"}]}),
            ),
        ];
        for r in &log {
            all.extend(t.push(r));
        }
        all.extend(t.finish(8, RunStatus::Interrupted));
        assert_eq!(
            methods(&all),
            [
                "lifecycle:running",
                "values",
                "messages:message-start",
                "messages:content-block-start",
                "messages:content-block-delta",
                "messages:content-block-finish",
                "messages:message-finish",
                "updates",
                "tools:tool-started",
                "tools:tool-finished",
                "updates",
                "lifecycle:started@sub",
                "values@sub",
                "input.requested@sub",
                "lifecycle:interrupted@sub",
                "lifecycle:interrupted",
            ]
        );
        let started = &all[8];
        assert_eq!(started.data["input"], json!({"city": "Paris"}));
        assert_eq!(all[11].data["trigger_call_id"], "t1");
        assert_eq!(all[11].data["graph_name"], "review");
        // Sequence numbers rise, and carry the run's ordinal.
        assert!(all.windows(2).all(|w| w[0].seq < w[1].seq));
        assert!(all.iter().all(|e| e.seq >> 32 == 2));
        let ids: HashSet<_> = all.iter().map(|e| e.event_id.clone()).collect();
        assert_eq!(ids.len(), all.len());
        let tree = t.tree();
        assert_eq!(tree["status"], "interrupted");
        assert_eq!(tree["children"][0]["namespace"], json!(["review:t1"]));
    }

    #[test]
    fn a_translator_building_some_methods_makes_those_events_exactly() {
        let log = [
            rec(0, "metadata", json!({"run_id": "r", "attempt": 1})),
            rec(1, "values", json!({"messages": []})),
            rec(
                2,
                "updates",
                json!({"agent": {"messages": [{"type": "ai", "id": "m1", "content": "",
                "tool_calls": [{"id": "c1", "name": "lookup", "args": {"q": 1}}]}]}}),
            ),
            rec(
                3,
                "checkpoints",
                json!({"config": {"configurable": {"checkpoint_id": "k1"}}, "metadata": {"step": 1}}),
            ),
            rec(4, "custom", json!({"name": "progress", "payload": 3})),
            rec(5, "custom", json!(7)),
            rec(
                6,
                "updates",
                json!({"tools": {"messages": [{"type": "tool", "tool_call_id": "c1", "content": "ok"}]}}),
            ),
            rec(7, "values|sub:t", json!({"x": 1})),
            rec(
                8,
                "updates|sub:t",
                json!({"__interrupt__": [{"value": "?", "id": "i1"}]}),
            ),
        ];
        let translate = |builds: Methods| {
            let mut t = RunTranslator::new("r", 1, "g").building(builds);
            let mut all: Vec<Event> = log.iter().flat_map(|r| t.push(r)).collect();
            all.extend(t.finish(9, RunStatus::Interrupted));
            all
        };
        let every = translate(Methods::ALL);
        for channels in [
            json!(["values", "lifecycle"]),
            json!(["tools"]),
            json!(["updates", "input"]),
            json!(["custom:progress", "checkpoints"]),
            json!(["custom"]),
        ] {
            let filter = Filter::parse(&json!({ "channels": channels })).unwrap();
            let wanted: Vec<Event> = every.iter().filter(|e| filter.matches(e)).cloned().collect();
            // Same events, same sequence numbers and ids (timestamps aside).
            let made: Vec<Event> = translate(Methods::of(&filter))
                .into_iter()
                .filter(|e| filter.matches(e))
                .collect();
            let key = |e: &Event| {
                (
                    e.seq,
                    e.event_id.clone(),
                    e.method,
                    e.namespace.clone(),
                    e.data.clone(),
                )
            };
            assert!(!wanted.is_empty(), "{channels}");
            assert_eq!(
                made.iter().map(key).collect::<Vec<_>>(),
                wanted.iter().map(key).collect::<Vec<_>>(),
                "{channels}"
            );
        }
        // What is not read is not made.
        let lean = translate(Methods::of(
            &Filter::parse(&json!({"channels": ["values"]})).unwrap(),
        ));
        assert!(lean.iter().all(|e| e.method == Method::Values), "{lean:?}");
    }

    #[test]
    fn a_subgraph_completes_with_its_node_and_a_failed_run_says_why() {
        let mut t = RunTranslator::new("r", 0, "g");
        let mut all = Vec::new();
        all.extend(t.push(&rec(0, "values|sub:1", json!({}))));
        all.extend(t.push(&rec(1, "updates", json!({"sub": {"x": 1}}))));
        all.extend(t.push(&rec(2, "custom", json!({"name": "progress", "payload": 3}))));
        all.extend(t.push(&rec(3, "custom", json!(7))));
        all.extend(t.push(&rec(4, "error", json!({"error": "NodeError", "message": "boom"}))));
        all.extend(t.finish(5, RunStatus::Error));
        assert_eq!(
            methods(&all),
            [
                "lifecycle:running",
                "lifecycle:started@sub",
                "values@sub",
                "updates",
                "lifecycle:completed@sub",
                "custom",
                "custom",
                "lifecycle:failed",
            ]
        );
        assert_eq!(*all[5].data, json!({"name": "progress", "payload": 3}));
        assert_eq!(*all[6].data, json!({"payload": 7}));
        assert_eq!(all[7].data["error"], "boom");
    }

    #[test]
    fn an_interrupts_response_schema_travels_with_its_request_for_input() {
        let schema = json!({"type": "object", "required": ["approved"]});
        let mut t = RunTranslator::new("r", 1, "g");
        let log = [
            rec(0, "metadata", json!({"run_id": "r", "attempt": 1})),
            rec(
                1,
                "updates",
                json!({"__interrupt__": [
                    {"value": "ok?", "id": "i1", "response_schema": schema},
                    {"value": "note?", "id": "i2"},
                ]}),
            ),
        ];
        let all: Vec<Event> = log.iter().flat_map(|r| t.push(r)).collect();
        let asked: Vec<&Value> = all
            .iter()
            .filter(|e| matches!(e.method, Method::InputRequested))
            .map(|e| &*e.data)
            .collect();
        assert_eq!(
            asked,
            [
                &json!({"interrupt_id": "i1", "payload": "ok?", "response_schema": schema}),
                &json!({"interrupt_id": "i2", "payload": "note?"}),
            ]
        );
    }
}
