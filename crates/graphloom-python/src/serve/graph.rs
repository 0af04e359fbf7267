//! `PyGraph`: a Python LangGraph graph as the server hosts it.
//!
//! The graph itself runs in Python, on the event loop of the package's `graphloom serve`
//! (`graphloom/server/_bridge.py`, one `GraphBridge` per graph): every call is one coroutine
//! scheduled there with `submit(kind, payload, sink)`, its request as JSON text, its parts
//! and answer coming back through a [`Sink`]. This side turns the server's requests into
//! those calls and the answers into [`JsonRunEvent`]s; it owns the run's cancel and time
//! limit (the Python task is cancelled, its answer no longer awaited).

use super::sink::{Said, Sink};
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::StreamExt as _;
use graphloom_core::checkpoint::CheckpointConfig;
use graphloom_core::{Durability, ErrorSource, Interrupt, NodeErrorKind, NodeSet, DEFAULT_RECURSION_LIMIT};
use graphloom_server::hosted::{JsonRunEvent, JsonRunOutput, JsonRunRequest};
use graphloom_server::HostedGraph;
use graphloom_server_wire::json::ForeignError;
use pyo3::prelude::*;
use serde_json::{json, Map, Value};
use std::sync::Arc;
use tokio::sync::mpsc;

/// What the bridge's `describe()` says of its graph, read once when the server starts.
#[derive(Debug, Default)]
pub(crate) struct Described {
    nodes: Vec<String>,
    input_schema: Value,
    output_schema: Value,
    state_schema: Value,
    drawing: Value,
    mermaid: String,
    /// `(namespace, name, state schema, mermaid)`.
    subgraphs: Vec<(String, String, Value, String)>,
}

impl Described {
    pub(crate) fn from_json(v: &Value) -> Self {
        let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or_default().to_owned();
        let mut nodes: Vec<String> = v
            .get("nodes")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect();
        nodes.sort();
        Self {
            nodes,
            input_schema: v.get("input_schema").cloned().unwrap_or(Value::Null),
            output_schema: v.get("output_schema").cloned().unwrap_or(Value::Null),
            state_schema: v.get("state_schema").cloned().unwrap_or(Value::Null),
            drawing: v
                .get("drawing")
                .cloned()
                .unwrap_or_else(|| json!({"nodes": [], "edges": []})),
            mermaid: text(v, "mermaid"),
            subgraphs: v
                .get("subgraphs")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|s| {
                    (
                        text(s, "ns"),
                        text(s, "name"),
                        s.get("schema").cloned().unwrap_or(Value::Null),
                        text(s, "mermaid"),
                    )
                })
                .collect(),
        }
    }
}

/// A Python graph behind the server's JSON interface (see the module docs).
pub(crate) struct PyGraph {
    bridge: Arc<Py<PyAny>>,
    described: Described,
}

impl PyGraph {
    pub(crate) fn new(bridge: Arc<Py<PyAny>>, described: Described) -> Self {
        Self { bridge, described }
    }
}

/// Schedule call `kind` on the bridge's event loop; the handle cancels it.
async fn submit(
    bridge: Arc<Py<PyAny>>,
    kind: &'static str,
    payload: String,
    sink: Sink,
) -> Result<Py<PyAny>, String> {
    let scheduled = tokio::task::spawn_blocking(move || {
        Python::attach(|py| {
            bridge
                .bind(py)
                .call_method1("submit", (kind, payload, sink))
                .map(Bound::unbind)
                .map_err(|e| e.to_string())
        })
    })
    .await;
    scheduled.map_err(|e| format!("the Python call could not be scheduled: {e}"))?
}

/// Cancel a scheduled call (its task gets `CancelledError` at its next await).
fn cancel(handle: Py<PyAny>) {
    drop(tokio::task::spawn_blocking(move || {
        Python::attach(|py| {
            if let Err(e) = handle.bind(py).call_method0("cancel") {
                tracing::warn!(error = %e, "cancelling a Python call failed");
            }
        });
    }));
}

/// The error a Python failure of class `class` ends a run with. The bridge names the node
/// from LangGraph's note on the exception (`node: message`), when it has one.
fn failure(class: &str, message: String, recursion_limit: usize) -> graphloom_core::Error {
    match class {
        "CancelledError" => graphloom_core::Error::Cancelled,
        // LangGraph stopped the run at a step boundary, its checkpoint saved, because the
        // server asked it to drain.
        "GraphDrained" => graphloom_core::Error::Drained,
        "GraphRecursionError" => graphloom_core::Error::RecursionLimit {
            limit: recursion_limit,
        },
        _ => {
            let (node, text) = match message.split_once('\u{1f}') {
                Some((node, text)) => (node.to_owned(), text.to_owned()),
                None => ("graph".to_owned(), message),
            };
            let foreign = ForeignError {
                class: class.to_owned(),
                message: text,
            };
            graphloom_core::Error::Node {
                node,
                message: foreign.to_string(),
                kind: NodeErrorKind::Terminal,
                source: Some(ErrorSource::new(foreign)),
            }
        }
    }
}

fn nodes_json(set: &NodeSet) -> Value {
    match set {
        NodeSet::None => Value::Null,
        NodeSet::All => json!("*"),
        NodeSet::Some(names) => json!(names),
    }
}

/// The run request as the bridge reads it.
fn request_json(req: &JsonRunRequest) -> String {
    let command = req.command.as_ref().map(|c| {
        json!({
            "update": c.update,
            "resume": c.resume,
            "goto": c.goto,
        })
    });
    json!({
        "input": req.input,
        "command": command,
        "thread_id": req.thread_id,
        "checkpoint_id": req.checkpoint_id,
        "recursion_limit": req.recursion_limit,
        "interrupt_before": nodes_json(&req.interrupt_before),
        "interrupt_after": nodes_json(&req.interrupt_after),
        "durability": match req.durability {
            Durability::Sync => "sync",
            Durability::Async => "async",
            Durability::Exit => "exit",
        },
        // The context a run gives of its own; the server hands `configurable` to graphs
        // without one as their context, which a LangGraph graph reads from its config.
        "context": req.context.as_ref().filter(|c| Some(*c) != req.configurable.as_ref()),
        "configurable": req.configurable,
        "metadata": req.metadata,
        "run_id": req.run_id,
        "modes": req.modes.iter().map(|m| m.as_str()).collect::<Vec<_>>(),
        "subgraphs": req.subgraphs,
    })
    .to_string()
}

/// A run's answer: `{values, interrupts: [{id, value}], interrupted, checkpoint}`.
fn run_output(v: Value) -> JsonRunOutput {
    let interrupts = v
        .get("interrupts")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|i| Interrupt {
            id: i.get("id").and_then(Value::as_str).unwrap_or_default().to_owned(),
            value: i.get("value").cloned().unwrap_or(Value::Null),
            // LangGraph's own, when the graph gave one.
            response_schema: i.get("response_schema").cloned().filter(|v| !v.is_null()),
        })
        .collect();
    JsonRunOutput {
        values: v.get("values").cloned().unwrap_or(Value::Null),
        interrupts,
        interrupted: v.get("interrupted").and_then(Value::as_bool).unwrap_or(false),
        checkpoint: v
            .get("checkpoint")
            .and_then(|c| serde_json::from_value(c.clone()).ok()),
    }
}

/// Forward what the Python run says to `out` until its end, the run's cancel, its time
/// limit, or the reader going away (each of the last three cancels the Python task).
async fn drive(bridge: Arc<Py<PyAny>>, req: JsonRunRequest, out: mpsc::UnboundedSender<JsonRunEvent>) {
    let limit = req.recursion_limit.unwrap_or(DEFAULT_RECURSION_LIMIT);
    let (sink, mut said) = Sink::with_control(req.control.clone());
    let handle = match submit(bridge, "run", request_json(&req), sink).await {
        Ok(h) => h,
        Err(e) => {
            let _ = out.send(JsonRunEvent::End(Err(failure("RuntimeError", e, limit))));
            return;
        }
    };
    let cancelled = async {
        match &req.cancel {
            Some(token) => token.cancelled().await,
            None => std::future::pending().await,
        }
    };
    let timed_out = async {
        match req.timeout {
            Some(t) => tokio::time::sleep(t).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(cancelled, timed_out);
    loop {
        let ended = tokio::select! {
            s = said.recv() => match s {
                Some(Said::Part { mode, ns, data }) => {
                    if out.send(JsonRunEvent::Part { mode, ns, data }).is_err() {
                        cancel(handle);
                        return;
                    }
                    continue;
                }
                Some(Said::End(v)) => Ok(run_output(v)),
                Some(Said::Fail { class, message }) => Err(failure(&class, message, limit)),
                None => Err(failure("RuntimeError", "the Python run ended without an answer".into(), limit)),
            },
            () = &mut cancelled => {
                cancel(handle);
                Err(graphloom_core::Error::Cancelled)
            }
            () = &mut timed_out => {
                cancel(handle);
                let after_ms = req.timeout.map_or(0, |t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX));
                Err(graphloom_core::Error::RunTimeout { after_ms })
            }
            () = out.closed() => {
                cancel(handle);
                return;
            }
        };
        let _ = out.send(JsonRunEvent::End(ended));
        return;
    }
}

/// One request-and-answer call: `kind` with `payload`, its answer's JSON.
pub(super) async fn call(
    bridge: &Arc<Py<PyAny>>,
    kind: &'static str,
    payload: Value,
) -> graphloom_core::Result<Value> {
    let (sink, mut said) = Sink::new();
    let handle = submit(Arc::clone(bridge), kind, payload.to_string(), sink)
        .await
        .map_err(|e| failure("RuntimeError", e, DEFAULT_RECURSION_LIMIT))?;
    loop {
        match said.recv().await {
            Some(Said::Part { .. }) => continue,
            Some(Said::End(v)) => return Ok(v),
            Some(Said::Fail { class, message }) => {
                return Err(match class.as_str() {
                    "NotFound" => graphloom_core::Error::NotFound(message),
                    _ => failure(&class, message, DEFAULT_RECURSION_LIMIT),
                })
            }
            None => {
                drop(handle);
                return Err(failure(
                    "RuntimeError",
                    format!("the Python call `{kind}` ended without an answer"),
                    DEFAULT_RECURSION_LIMIT,
                ));
            }
        }
    }
}

impl HostedGraph for PyGraph {
    fn node_names(&self) -> Vec<String> {
        self.described.nodes.clone()
    }

    fn input_schema(&self) -> Value {
        self.described.input_schema.clone()
    }

    /// LangGraph checks a run's input itself, as a partial update of the state.
    fn validates_input_schema(&self) -> bool {
        false
    }

    fn output_schema(&self) -> Value {
        self.described.output_schema.clone()
    }

    fn state_schema(&self) -> Value {
        self.described.state_schema.clone()
    }

    fn drawing(&self) -> Value {
        self.described.drawing.clone()
    }

    fn mermaid(&self) -> String {
        self.described.mermaid.clone()
    }

    fn subgraphs(&self, recurse: bool) -> Vec<(String, String, Value)> {
        self.described
            .subgraphs
            .iter()
            .filter(|(ns, ..)| recurse || !ns.contains('|'))
            .map(|(ns, name, schema, _)| (ns.clone(), name.clone(), schema.clone()))
            .collect()
    }

    fn subgraph_mermaids(&self) -> Vec<(String, String)> {
        self.described
            .subgraphs
            .iter()
            .map(|(ns, _, _, mermaid)| (ns.clone(), mermaid.clone()))
            .collect()
    }

    /// LangGraph's `RunControl` drains a run (LangGraph 1.2): the bridge gives each run one
    /// that reads the request's control.
    fn drains(&self) -> bool {
        true
    }

    fn stream(&self, req: JsonRunRequest) -> BoxStream<'static, JsonRunEvent> {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(drive(Arc::clone(&self.bridge), req, tx));
        futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|ev| (ev, rx)) }).boxed()
    }

    fn get_state<'a>(
        &'a self,
        thread_id: &'a str,
        checkpoint_id: Option<&'a str>,
    ) -> BoxFuture<'a, graphloom_core::Result<Option<Value>>> {
        Box::pin(async move {
            let state = call(
                &self.bridge,
                "get_state",
                json!({"thread_id": thread_id, "checkpoint_id": checkpoint_id}),
            )
            .await?;
            Ok(Some(state).filter(|s| !s.is_null()))
        })
    }

    fn history<'a>(
        &'a self,
        thread_id: &'a str,
        filter: Map<String, Value>,
        before: Option<String>,
        limit: Option<usize>,
    ) -> BoxFuture<'a, graphloom_core::Result<Vec<Value>>> {
        Box::pin(async move {
            let states = call(
                &self.bridge,
                "history",
                json!({"thread_id": thread_id, "filter": filter, "before": before, "limit": limit}),
            )
            .await?;
            match states {
                Value::Array(all) => Ok(all),
                Value::Null => Ok(Vec::new()),
                other => Err(failure(
                    "TypeError",
                    format!("history answered {other} instead of a list"),
                    DEFAULT_RECURSION_LIMIT,
                )),
            }
        })
    }

    fn update_state<'a>(
        &'a self,
        thread_id: &'a str,
        checkpoint_id: Option<&'a str>,
        values: Option<Value>,
        as_node: Option<&'a str>,
    ) -> BoxFuture<'a, graphloom_core::Result<CheckpointConfig>> {
        Box::pin(async move {
            let config = call(
                &self.bridge,
                "update_state",
                json!({"thread_id": thread_id, "checkpoint_id": checkpoint_id, "values": values, "as_node": as_node}),
            )
            .await?;
            serde_json::from_value(config).map_err(|e| {
                failure(
                    "TypeError",
                    format!("update_state answered no checkpoint: {e}"),
                    DEFAULT_RECURSION_LIMIT,
                )
            })
        })
    }
}
