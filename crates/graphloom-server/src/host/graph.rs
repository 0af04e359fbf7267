//! Graphs as the server sees them: type-erased, JSON in and JSON out.
//!
//! A graph is registered as a factory that compiles it against the server's checkpointer
//! and store ([`GraphDeps`]); [`HostedGraph`] is implemented for every
//! [`CompiledGraph<S>`](graphloom_core::CompiledGraph).

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::StreamExt as _;
use graphloom_core::checkpoint::{CheckpointConfig, DynCheckpointer};
use graphloom_core::store::DynStore;
use graphloom_core::{
    Command, CompiledGraph, HistoryQuery, Resume, Route, RunConfig, RunEvent, RunInput, RunOutput, RunStatus,
    State, StateError, StateSnapshot, StreamOptions, DEFAULT_RECURSION_LIMIT, END, START,
};
use serde_json::{json, Map, Value};
use std::sync::Arc;
use std::time::Duration;

pub use graphloom_server_wire::json::{JsonCommand, JsonRunEvent, JsonRunOutput, JsonRunRequest};

/// What a graph is compiled against inside the server.
#[derive(Clone)]
pub struct GraphDeps {
    /// The server's checkpointer (SQLite or PostgreSQL).
    pub checkpointer: Arc<dyn DynCheckpointer>,
    /// The server's store.
    pub store: Arc<dyn DynStore>,
    /// Where the graph registers its own Prometheus metrics: `/metrics` exports them
    /// after the server's own.
    pub metrics: GraphMetrics,
}

impl GraphDeps {
    /// Dependencies over this checkpointer and store, with no graph metrics yet.
    #[must_use]
    pub fn new(checkpointer: Arc<dyn DynCheckpointer>, store: Arc<dyn DynStore>) -> Self {
        Self {
            checkpointer,
            store,
            metrics: GraphMetrics::default(),
        }
    }
}

/// A metric registry a graph keeps, as `/metrics` reads it.
pub type SharedRegistry = Arc<dyn AsRef<prometheus_client::registry::Registry> + Send + Sync>;

/// The graphs' own Prometheus metrics, exported by the server's `/metrics` after its own
/// (`graphloom_*`) ones. A graph keeps its metrics in a `prometheus_client` registry of its
/// own (with its own names, e.g. `ops_agent_*`) and hands it over here when it is built;
/// a registry handed over twice is exported once.
#[derive(Clone, Default)]
pub struct GraphMetrics {
    registries: Arc<std::sync::Mutex<Vec<SharedRegistry>>>,
}

impl GraphMetrics {
    /// Export `registry` on `/metrics`.
    pub fn export(&self, registry: SharedRegistry) {
        let mut all = self
            .registries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let same = |r: &SharedRegistry| {
            std::ptr::eq(Arc::as_ptr(r).cast::<()>(), Arc::as_ptr(&registry).cast::<()>())
        };
        if !all.iter().any(same) {
            all.push(registry);
        }
    }

    /// The exported registries in the text exposition format, each without the closing
    /// `# EOF` (the server writes it once, at the end).
    pub(crate) fn encode_into(&self, out: &mut String) {
        let all = self
            .registries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        for r in all {
            let mut text = String::new();
            if prometheus_client::encoding::text::encode(&mut text, r.as_ref().as_ref()).is_ok() {
                out.push_str(text.strip_suffix("# EOF\n").unwrap_or(&text));
            }
        }
    }
}

/// Builds a graph against the server's persistence.
pub type GraphFactory = Arc<dyn Fn(&GraphDeps) -> graphloom_core::Result<Arc<dyn HostedGraph>> + Send + Sync>;

/// A compiled graph behind JSON.
pub trait HostedGraph: Send + Sync + 'static {
    /// Node names, sorted.
    fn node_names(&self) -> Vec<String>;
    /// JSON Schema of the input (the state's update shape).
    fn input_schema(&self) -> Value;
    /// Decode a run's `input` as the run will, without running anything: the error
    /// names what the run would fail on (a field, a key the state does not have, a
    /// message role). The default accepts everything.
    fn check_input(&self, input: &Value) -> Result<(), String> {
        let _ = input;
        Ok(())
    }
    /// Whether the server refuses a run whose input does not match [`Self::input_schema`]
    /// before the run starts (yes by default). A graph whose schema describes whole
    /// states rather than the partial updates it accepts (LangGraph's Python graphs: a
    /// `TypedDict` state lists every key as required) says no, and checks its input itself.
    fn validates_input_schema(&self) -> bool {
        true
    }
    /// JSON Schema of the output.
    fn output_schema(&self) -> Value;
    /// JSON Schema of the state.
    fn state_schema(&self) -> Value;
    /// The drawing data, LangGraph's `get_graph().to_json()`: `{"nodes": [{"id", "type",
    /// "data", "metadata"?}], "edges": [{"source", "target", "data"?, "conditional"?}]}`.
    fn drawing(&self) -> Value;
    /// Mermaid text.
    fn mermaid(&self) -> String;
    /// What the graph looks like, for the SVG renderer
    /// ([`Drawing::to_svg`](graphloom_core::draw::Drawing::to_svg)). The default reads
    /// [`Self::drawing`] (no subgraphs); a compiled graph gives its own, subgraphs included.
    fn draw(&self) -> graphloom_core::draw::Drawing {
        drawing_from_json(&self.drawing())
    }
    /// The subgraph nodes by namespace (`parent|child` with `recurse`): the child graph's
    /// name and its state's JSON Schema.
    fn subgraphs(&self, recurse: bool) -> Vec<(String, String, Value)>;
    /// The Mermaid text of every subgraph node, nested ones too, by namespace
    /// (`parent|child`): what the `xray` drawing expands. None by default.
    fn subgraph_mermaids(&self) -> Vec<(String, String)> {
        Vec::new()
    }
    /// The store the graph was compiled with, if any (a run may be given another:
    /// [`JsonRunRequest::store`]).
    fn store(&self) -> Option<Arc<dyn DynStore>> {
        None
    }
    /// The graph's own run limit: a run of it gets the smaller of this and the server's
    /// [`ServerConfig::run_timeout`](crate::ServerConfig::run_timeout). None by default;
    /// [`Hosting::run_timeout`](crate::Hosting::run_timeout) sets one.
    fn run_timeout(&self) -> Option<Duration> {
        None
    }
    /// What the server calls when a run of the graph ends (see
    /// [`Hosting::on_run_end`](crate::Hosting::on_run_end) for when, and how often).
    /// None by default.
    fn run_end_hook(&self) -> Option<super::run_end::RunEndHook> {
        None
    }
    /// Whether a run of the graph can drain: stop at its next step boundary when its
    /// request's [`JsonRunRequest::control`] asks. At a graceful shutdown the server drains
    /// such a run and hands it back to the queue once it stops; any other run is given the
    /// shutdown grace and then cancelled (its finished writes kept). No by default; a
    /// compiled graph says yes.
    fn drains(&self) -> bool {
        false
    }
    /// Run and stream.
    fn stream(&self, req: JsonRunRequest) -> BoxStream<'static, JsonRunEvent>;
    /// The thread's state (latest, or at a checkpoint) as a LangGraph `ThreadState` JSON
    /// object; `None` when the thread has no checkpoint.
    fn get_state<'a>(
        &'a self,
        thread_id: &'a str,
        checkpoint_id: Option<&'a str>,
    ) -> BoxFuture<'a, graphloom_core::Result<Option<Value>>>;
    /// History, newest first, as `ThreadState` objects.
    fn history<'a>(
        &'a self,
        thread_id: &'a str,
        filter: Map<String, Value>,
        before: Option<String>,
        limit: Option<usize>,
    ) -> BoxFuture<'a, graphloom_core::Result<Vec<Value>>>;
    /// Apply `values` as if `as_node` wrote them; returns the new checkpoint.
    fn update_state<'a>(
        &'a self,
        thread_id: &'a str,
        checkpoint_id: Option<&'a str>,
        values: Option<Value>,
        as_node: Option<&'a str>,
    ) -> BoxFuture<'a, graphloom_core::Result<CheckpointConfig>>;
}

/// Host a compiled graph behind the JSON interface.
#[must_use]
pub fn hosted<S: State>(g: CompiledGraph<S>) -> Arc<dyn HostedGraph> {
    Arc::new(g)
}

/// A [`GraphFactory`] from a function that compiles a typed graph against the server's
/// checkpointer and store.
pub fn factory<S, F>(f: F) -> GraphFactory
where
    S: State,
    F: Fn(&GraphDeps) -> graphloom_core::Result<CompiledGraph<S>> + Send + Sync + 'static,
{
    Arc::new(move |deps: &GraphDeps| f(deps).map(hosted))
}

/// Whether `key` looks like an interrupt id (32 lowercase hex digits), as the ids
/// `Runtime::interrupt` gives out.
fn is_interrupt_id(key: &str) -> bool {
    key.len() == 32 && key.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// A resume value from JSON: an object whose keys are all interrupt ids resumes those
/// interrupts by id; anything else is one value for the single pending interrupt.
#[must_use]
pub fn resume_from_json(value: Value) -> Resume {
    match value {
        Value::Object(map) if !map.is_empty() && map.keys().all(|k| is_interrupt_id(k)) => {
            Resume::ById(map.into_iter().collect())
        }
        other => Resume::Value(other),
    }
}

fn bad_command(field: &str, message: impl Into<String>) -> graphloom_core::Error {
    graphloom_core::Error::Decode(StateError::Decode {
        field: format!("command.{field}"),
        message: message.into(),
    })
}

/// A state update from request JSON: an object, or a list of `[key, value]` pairs (as
/// LangGraph accepts) with distinct keys.
fn update_json(value: Value) -> graphloom_core::Result<Value> {
    match value {
        Value::Array(pairs) => {
            let mut map = Map::new();
            for pair in pairs {
                match pair {
                    Value::Array(kv) if kv.len() == 2 => {
                        let mut kv = kv.into_iter();
                        let (Some(Value::String(k)), Some(v)) = (kv.next(), kv.next()) else {
                            return Err(bad_command("update", "pairs must be [key, value]"));
                        };
                        if map.insert(k.clone(), v).is_some() {
                            return Err(bad_command("update", format!("key `{k}` given twice")));
                        }
                    }
                    _ => {
                        return Err(bad_command(
                            "update",
                            "a list update must hold [key, value] pairs",
                        ))
                    }
                }
            }
            Ok(Value::Object(map))
        }
        other => Ok(other),
    }
}

/// A [`Command`] from its JSON form, for graph `g`.
pub fn command_from_json<S: State>(
    g: &CompiledGraph<S>,
    cmd: JsonCommand,
) -> graphloom_core::Result<Command<S>> {
    let mut out = Command::<S>::new();
    if let Some(update) = cmd.update.filter(|u| !u.is_null()) {
        let update = g
            .empty_state()
            .update_from_json(update_json(update)?)
            .map_err(graphloom_core::Error::Decode)?;
        out.update = Some(update);
    }
    out.resume = cmd.resume.map(resume_from_json);
    for goto in cmd.goto {
        let route = match goto {
            Value::String(node) => Route::from(node),
            Value::Object(mut send) => {
                let Some(Value::String(node)) = send.remove("node") else {
                    return Err(bad_command("goto", "a Send needs a `node` string"));
                };
                let input = send.remove("input").unwrap_or(Value::Null);
                Route::Send(graphloom_core::Send::json(node, input))
            }
            other => {
                return Err(bad_command(
                    "goto",
                    format!("expected a node name or a Send, got {other}"),
                ))
            }
        };
        out.goto.push(route);
    }
    Ok(out)
}

fn run_config(req: &JsonRunRequest) -> RunConfig {
    RunConfig {
        thread_id: req.thread_id.clone(),
        checkpoint_id: req.checkpoint_id.clone(),
        recursion_limit: req.recursion_limit.unwrap_or(DEFAULT_RECURSION_LIMIT),
        interrupt_before: req.interrupt_before.clone(),
        interrupt_after: req.interrupt_after.clone(),
        durability: req.durability,
        timeout: req.timeout,
        context: req
            .context
            .clone()
            .map(|c| Arc::new(c) as Arc<dyn std::any::Any + Send + Sync>),
        metadata: req.metadata.clone(),
        run_id: req.run_id.clone(),
        cancel: req.cancel.clone(),
        control: req.control.clone(),
        on_task_end: req.on_task_end.clone(),
        on_complete: req.on_complete.clone(),
        store: req.store.clone(),
        checkpoint_events: req.checkpoint_events,
        message_events: req.message_events,
        early_checkpoint_events: req.early_checkpoint_events,
    }
}

fn output_json<S: State>(out: RunOutput<S>) -> graphloom_core::Result<JsonRunOutput> {
    Ok(JsonRunOutput {
        values: out.values.to_json().map_err(graphloom_core::Error::Decode)?,
        interrupts: out.interrupts,
        interrupted: out.status == RunStatus::Interrupted,
        checkpoint: out.config,
    })
}

/// `{thread_id, checkpoint_ns, checkpoint_id, checkpoint_map}` as LangGraph Server shows a
/// checkpoint.
#[must_use]
pub fn checkpoint_json(c: &CheckpointConfig) -> Value {
    json!({
        "thread_id": c.thread_id,
        "checkpoint_ns": c.checkpoint_ns,
        "checkpoint_id": c.checkpoint_id,
        "checkpoint_map": null,
    })
}

/// A [`StateSnapshot`] as a LangGraph Server `ThreadState` object.
pub fn thread_state_json<S: State>(snap: &StateSnapshot<S>) -> graphloom_core::Result<Value> {
    let values = snap.values.to_json().map_err(graphloom_core::Error::Decode)?;
    let tasks: Vec<Value> = snap
        .tasks
        .iter()
        .map(|t| {
            json!({
                "id": t.id,
                "name": t.name,
                "path": [],
                "error": t.error,
                "interrupts": t.interrupts,
                "checkpoint": null,
                "state": null,
                "result": null,
            })
        })
        .collect();
    let metadata = match &snap.metadata {
        Some(m) => serde_json::to_value(m).map_err(|e| bad_state_json(&e))?,
        None => Value::Null,
    };
    Ok(json!({
        "values": values,
        "next": snap.next,
        "tasks": tasks,
        "checkpoint": checkpoint_json(&snap.config),
        "metadata": metadata,
        "created_at": snap.created_at,
        "parent_checkpoint": snap.parent_config.as_ref().map(checkpoint_json),
        "interrupts": snap.interrupts,
        "checkpoint_id": snap.config.checkpoint_id,
        "parent_checkpoint_id": snap.parent_config.as_ref().and_then(|p| p.checkpoint_id.clone()),
    }))
}

fn bad_state_json(e: &serde_json::Error) -> graphloom_core::Error {
    graphloom_core::Error::Decode(StateError::Decode {
        field: "metadata".into(),
        message: e.to_string(),
    })
}

/// The drawing data of `g` (see [`HostedGraph::drawing`]): LangGraph's
/// `get_graph().to_json()`.
fn drawing_json<S: State>(g: &CompiledGraph<S>) -> Value {
    g.get_graph(false).to_json()
}

/// A [`Drawing`](graphloom_core::draw::Drawing) from the drawing JSON of
/// [`HostedGraph::drawing`].
fn drawing_from_json(v: &Value) -> graphloom_core::draw::Drawing {
    use graphloom_core::draw::{DrawEdge, DrawNode, DrawNodeKind, Drawing};
    let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or_default().to_owned();
    let nodes = v
        .get("nodes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|n| text(n, "id"))
        .filter(|id| id != START && id != END && !id.is_empty())
        .map(|id| DrawNode {
            id,
            kind: DrawNodeKind::Node,
            subgraph: None,
        })
        .collect();
    let edges: Vec<DrawEdge> = v
        .get("edges")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|e| DrawEdge {
            source: text(e, "source"),
            target: text(e, "target"),
            conditional: e.get("conditional").and_then(Value::as_bool).unwrap_or(false),
            label: e.get("data").and_then(Value::as_str).map(str::to_owned),
        })
        .collect();
    Drawing::new("graph", nodes, edges)
}

impl<S: State> HostedGraph for CompiledGraph<S> {
    fn node_names(&self) -> Vec<String> {
        CompiledGraph::node_names(self).to_vec()
    }

    fn input_schema(&self) -> Value {
        // A state's update has the same fields as the state, each optional; the state
        // schema describes both.
        self.state_schema()
    }

    fn check_input(&self, input: &Value) -> Result<(), String> {
        self.empty_state()
            .update_from_json(input.clone())
            .map(drop)
            .map_err(|e| e.to_string())
    }

    fn output_schema(&self) -> Value {
        self.state_schema()
    }

    fn state_schema(&self) -> Value {
        CompiledGraph::state_schema(self)
    }

    fn drawing(&self) -> Value {
        drawing_json(self)
    }

    fn subgraphs(&self, recurse: bool) -> Vec<(String, String, Value)> {
        CompiledGraph::subgraphs(self, recurse)
            .into_iter()
            .map(|(ns, info)| (ns, info.name.clone(), info.state_schema.clone()))
            .collect()
    }

    fn mermaid(&self) -> String {
        self.draw_mermaid()
    }

    fn subgraph_mermaids(&self) -> Vec<(String, String)> {
        CompiledGraph::subgraphs(self, true)
            .into_iter()
            .map(|(ns, info)| (ns, info.mermaid.clone()))
            .collect()
    }

    fn draw(&self) -> graphloom_core::draw::Drawing {
        self.drawing()
    }

    fn store(&self) -> Option<Arc<dyn DynStore>> {
        CompiledGraph::store(self).cloned()
    }

    fn drains(&self) -> bool {
        true
    }

    fn stream(&self, req: JsonRunRequest) -> BoxStream<'static, JsonRunEvent> {
        let config = run_config(&req);
        let input = match (req.command, req.input) {
            (Some(cmd), _) => match command_from_json(self, cmd) {
                Ok(c) => RunInput::Command(c),
                Err(e) => return futures::stream::once(async move { JsonRunEvent::End(Err(e)) }).boxed(),
            },
            (None, Some(v)) if !v.is_null() => RunInput::Json(v),
            (None, _) => RunInput::Continue,
        };
        let opts = StreamOptions {
            modes: req.modes,
            subgraphs: req.subgraphs,
        };
        CompiledGraph::stream(self, input, config, opts)
            .filter_map(|ev| async move {
                match ev {
                    RunEvent::Part(mut part) => {
                        let (mode, ns) = (part.mode, std::mem::take(&mut part.ns));
                        match part.into_data_json() {
                            Ok(data) => Some(JsonRunEvent::Part { mode, ns, data }),
                            Err(e) => {
                                tracing::warn!(mode = mode.as_str(), error = %e, "stream part is not JSON; dropped");
                                None
                            }
                        }
                    }
                    RunEvent::End(out) => Some(JsonRunEvent::End(out.and_then(output_json))),
                }
            })
            .boxed()
    }

    fn get_state<'a>(
        &'a self,
        thread_id: &'a str,
        checkpoint_id: Option<&'a str>,
    ) -> BoxFuture<'a, graphloom_core::Result<Option<Value>>> {
        Box::pin(async move {
            let mut cfg = RunConfig::thread(thread_id);
            cfg.checkpoint_id = checkpoint_id.map(str::to_owned);
            let snap = match CompiledGraph::get_state(self, &cfg).await {
                Ok(s) => s,
                Err(graphloom_core::Error::NotFound(_)) => return Ok(None),
                Err(e) => return Err(e),
            };
            if snap.metadata.is_none() {
                return Ok(None);
            }
            thread_state_json(&snap).map(Some)
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
            let cfg = RunConfig::thread(thread_id);
            let query = HistoryQuery {
                filter,
                before,
                limit,
            };
            let snaps = self.get_state_history(&cfg, query).await?;
            snaps.iter().map(thread_state_json).collect()
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
            let mut cfg = RunConfig::thread(thread_id);
            cfg.checkpoint_id = checkpoint_id.map(str::to_owned);
            let update = match values.filter(|v| !v.is_null()) {
                Some(v) => Some(
                    self.empty_state()
                        .update_from_json(update_json(v)?)
                        .map_err(graphloom_core::Error::Decode)?,
                ),
                None => None,
            };
            CompiledGraph::update_state(self, &cfg, update, as_node).await
        })
    }
}
