//! [`CompiledGraph`]: run it, stream it, inspect and edit its threads.

use super::node::{Branch, SubgraphInfo};
use super::spec::GraphInner;
use crate::checkpoint::{CheckpointConfig, DynCheckpointer};
use crate::config::{RunConfig, RunInput, StreamOptions};
use crate::error::{Error, Result};
use crate::events::{EventFilter, EventRun, RunType, StreamEvent};
use crate::pregel::{run_loop, LoopEnd};
use crate::runtime::{RunShared, Runtime, StreamSink};
use crate::state::State;
use crate::store::DynStore;
use crate::stream::StreamMode;
use crate::stream::StreamPart;
use crate::types::{Interrupt, NodeError};
use futures::Stream;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::future::Future as _;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use tokio::sync::{mpsc, oneshot};

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunStatus {
    /// The graph ran to its end.
    Done,
    /// The graph paused at an interrupt; resume it with a `Command`.
    Interrupted,
}

/// The result of a run.
#[derive(Debug, Clone)]
pub struct RunOutput<S> {
    /// The state when the run stopped.
    pub values: S,
    /// Pending interrupts (empty when done, and for static interrupts).
    pub interrupts: Vec<Interrupt>,
    /// Done or interrupted.
    pub status: RunStatus,
    /// The checkpoint the run ended on (when it persists).
    pub config: Option<CheckpointConfig>,
}

/// A compiled graph. Cheap to clone.
pub struct CompiledGraph<S: State> {
    pub(crate) inner: Arc<GraphInner<S>>,
}

impl<S: State> Clone for CompiledGraph<S> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<S: State> CompiledGraph<S> {
    pub(crate) fn from_inner(inner: GraphInner<S>) -> Self {
        Self {
            inner: Arc::new(inner),
        }
    }

    /// The graph's name.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Node names, sorted.
    #[must_use]
    pub fn node_names(&self) -> &[String] {
        &self.inner.node_names
    }

    /// JSON Schema of the state.
    #[must_use]
    pub fn state_schema(&self) -> serde_json::Value {
        self.inner.shape.json_schema()
    }

    /// The nodes that are compiled graphs, by namespace: the node name, and with `recurse`
    /// their own subgraphs too, as `parent|child` (LangGraph's `get_subgraphs`).
    #[must_use]
    pub fn subgraphs(&self, recurse: bool) -> Vec<(String, Arc<SubgraphInfo>)> {
        fn walk(
            prefix: &str,
            children: &BTreeMap<String, Arc<SubgraphInfo>>,
            recurse: bool,
            out: &mut Vec<(String, Arc<SubgraphInfo>)>,
        ) {
            for (name, info) in children {
                let ns = if prefix.is_empty() {
                    name.clone()
                } else {
                    format!("{prefix}|{name}")
                };
                out.push((ns.clone(), Arc::clone(info)));
                if recurse {
                    walk(&ns, &info.subgraphs, recurse, out);
                }
            }
        }
        let mut out = Vec::new();
        walk("", &self.subgraph_nodes(), recurse, &mut out);
        out
    }

    /// This graph as a subgraph node of a parent describes it.
    pub(crate) fn info(&self) -> Arc<SubgraphInfo> {
        Arc::new(SubgraphInfo {
            name: self.inner.name.clone(),
            mermaid: self.draw_mermaid(),
            drawing: Arc::new(self.drawing()),
            state_schema: self.state_schema(),
            subgraphs: self.subgraph_nodes(),
        })
    }

    fn subgraph_nodes(&self) -> BTreeMap<String, Arc<SubgraphInfo>> {
        self.inner
            .nodes
            .iter()
            .filter_map(|(name, spec)| spec.subgraph.as_ref().map(|i| (name.clone(), Arc::clone(i))))
            .collect()
    }

    /// An empty state of this graph's shape.
    #[must_use]
    pub fn empty_state(&self) -> S {
        self.inner.shape.empty_like()
    }

    /// The checkpointer the graph was compiled with.
    #[must_use]
    pub fn checkpointer(&self) -> Option<&Arc<dyn DynCheckpointer>> {
        self.inner.checkpointer.as_ref()
    }

    /// The store the graph was compiled with (a run may use another:
    /// [`RunConfig::store`]).
    #[must_use]
    pub fn store(&self) -> Option<&Arc<dyn DynStore>> {
        self.inner.store.as_ref()
    }

    fn shared(&self, config: &RunConfig, sink: Option<StreamSink>) -> Arc<RunShared> {
        Arc::new(RunShared {
            run_id: config
                .run_id
                .clone()
                .unwrap_or_else(|| uuid::Uuid::new_v4().to_string()),
            thread_id: config.thread_id.clone(),
            store: config.store.clone().or_else(|| self.inner.store.clone()),
            checkpointer: self.inner.checkpointer.clone(),
            context: config.context.clone(),
            sink,
            resume: Mutex::new(HashMap::new()),
            recursion_limit: config.recursion_limit,
            durability: config.durability,
            on_task_end: config.on_task_end.clone(),
            seen_messages: Mutex::new(std::collections::HashSet::new()),
            checkpoint_events: config.checkpoint_events,
            message_events: config.message_events,
            early_checkpoint_events: config.early_checkpoint_events,
        })
    }

    /// Run with new input (a partial update) until the graph ends or pauses. As in
    /// LangGraph, `None` continues from the checkpoint ([`RunInput::Continue`]: after an
    /// error, a static interrupt or a limit), and the config may be the one
    /// [`Self::update_state`] returns (to run a fork).
    ///
    /// ```
    /// # use graphloom_core::{checkpoint::InMemorySaver, RunConfig, State, StateGraph, NodeSet, END, START};
    /// # #[derive(State, Clone, Default, Debug)]
    /// # struct S { n: i64 }
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> graphloom_core::Result<()> {
    /// let g = StateGraph::<S>::new()
    ///     .add_node("inc", |s, _rt| async move { Ok(SUpdate::new().n(s.n + 1)) })
    ///     .add_edge(START, "inc")
    ///     .add_edge("inc", END)
    ///     .interrupt_before(NodeSet::of(["inc"]))
    ///     .checkpointer(InMemorySaver::new())
    ///     .compile()?;
    /// let cfg = RunConfig::thread("t");
    /// g.invoke(SUpdate::new().n(1), cfg.clone()).await?; // pauses before `inc`
    /// let fork = g.update_state(&cfg, Some(SUpdate::new().n(10)), None).await?;
    /// let out = g.invoke(None, fork).await?; // continue the edited checkpoint
    /// assert_eq!(out.values.n, 11);
    /// # Ok(()) }
    /// ```
    pub async fn invoke(
        &self,
        input: impl Into<Option<S::Update>>,
        config: impl Into<RunConfig>,
    ) -> Result<RunOutput<S>> {
        let input = match input.into() {
            Some(u) => RunInput::Update(u),
            None => RunInput::Continue,
        };
        self.invoke_input(input, config).await
    }

    /// Run from any input: new values, JSON, a `Command` (resume), or `Continue`.
    pub async fn invoke_input(
        &self,
        input: impl Into<RunInput<S>>,
        config: impl Into<RunConfig>,
    ) -> Result<RunOutput<S>> {
        let config = config.into();
        let run = self.shared(&config, None);
        execute(Arc::clone(&self.inner), input.into(), config, run).await
    }

    /// Resume pending interrupts (or continue after an error when `cmd` has no resume).
    pub async fn resume(
        &self,
        cmd: crate::types::Command<S>,
        config: impl Into<RunConfig>,
    ) -> Result<RunOutput<S>> {
        self.invoke_input(RunInput::Command(cmd), config).await
    }

    /// Run and stream events in the modes asked for. The stream ends with exactly one
    /// [`RunEvent::End`]; a run that panics ends with [`Error::Node`] naming the panic.
    pub fn stream(
        &self,
        input: impl Into<RunInput<S>>,
        config: impl Into<RunConfig>,
        opts: StreamOptions,
    ) -> RunStream<S> {
        let input = input.into();
        let config = config.into();
        let (tx, rx) = mpsc::unbounded_channel();
        let (done_tx, done_rx) = oneshot::channel();
        let run = self.shared(&config, Some(StreamSink::new(tx, &opts.modes, opts.subgraphs)));
        let inner = Arc::clone(&self.inner);
        // The run carries the caller's span (a server's `run` span, say) into its task, so
        // node spans nest under it.
        tokio::spawn(tracing::Instrument::in_current_span(async move {
            // A panic in the run (a node's, on the task that runs a lone node) ends the
            // stream with an error, not with what looks like a cancel.
            let out = futures::FutureExt::catch_unwind(std::panic::AssertUnwindSafe(execute(
                inner, input, config, run,
            )))
            .await
            .unwrap_or_else(|panic| {
                Err(Error::node_failed(
                    "?",
                    format!("the run panicked: {}", panic_message(panic.as_ref())),
                ))
            });
            let _ = done_tx.send(out);
        }));
        RunStream {
            rx: Some(rx),
            done: Some(done_rx),
        }
    }

    /// Run and stream LangChain's `astream_events` (v2) events: `on_chain_start`,
    /// `on_chain_stream` and `on_chain_end` of the graph, each node and each subgraph,
    /// `on_chat_model_*` of every model call in a node (graphloom-llm's models), and
    /// `on_tool_*` of every tool a `ToolNode` runs; see [`crate::events`]. `filter` keeps
    /// some of them, as LangChain's `include_*`/`exclude_*` arguments do
    /// ([`EventFilter::all`] keeps all). The stream ends after the graph's `on_chain_end`,
    /// or with the run's error.
    ///
    /// ```
    /// use futures::StreamExt;
    /// use graphloom_core::{EventFilter, EventKind, RunConfig, RunInput, State, StateGraph, END, START};
    ///
    /// #[derive(State, Clone, Default, Debug)]
    /// struct Count {
    ///     n: i64,
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> graphloom_core::Result<()> {
    /// let graph = StateGraph::<Count>::new()
    ///     .add_node("inc", |s, _rt| async move { Ok(CountUpdate::new().n(s.n + 1)) })
    ///     .add_edge(START, "inc")
    ///     .add_edge("inc", END)
    ///     .compile()?;
    /// let mut events = graph.stream_events(
    ///     RunInput::Update(CountUpdate::new().n(1)),
    ///     RunConfig::default(),
    ///     EventFilter::all(),
    /// );
    /// let mut seen = Vec::new();
    /// while let Some(ev) = events.next().await {
    ///     let ev = ev?;
    ///     seen.push(format!("{} {}", ev.event.as_str(), ev.name));
    /// }
    /// assert_eq!(seen, [
    ///     "on_chain_start LangGraph",
    ///     "on_chain_start inc",
    ///     "on_chain_stream inc",
    ///     "on_chain_end inc",
    ///     "on_chain_stream LangGraph",
    ///     "on_chain_end LangGraph",
    /// ]);
    /// # Ok(()) }
    /// ```
    pub fn stream_events(&self, input: RunInput<S>, config: RunConfig, filter: EventFilter) -> EventStream {
        let stream = self.stream(input, config, StreamOptions::modes([StreamMode::Events]));
        Box::pin(futures::StreamExt::filter_map(stream, move |ev| {
            let item = match ev {
                RunEvent::Part(p) => match p.data {
                    crate::stream::StreamData::Event(e) if filter.keeps(&e) => Some(Ok(*e)),
                    _ => None,
                },
                RunEvent::End(Ok(_)) => None,
                RunEvent::End(Err(e)) => Some(Err(e)),
            };
            std::future::ready(item)
        }))
    }

    /// Run this graph as a subgraph of the task behind `rt`: its checkpoints go to the
    /// task's namespace, its events carry that namespace, its interrupts pause the parent.
    pub async fn run_nested(&self, input: S::Update, rt: &Runtime) -> Result<S, NodeError> {
        self.run_nested_input(RunInput::Update(input), rt)
            .await
            .map(|(s, _)| s)
    }

    /// Run as a subgraph sharing keys with the parent: the child starts from the parent's
    /// values of the fields it also has, and hands back only what its nodes changed (for
    /// sequence fields, just the appended items, so the parent's reducer does not add the
    /// whole list again).
    pub(crate) async fn run_nested_shared(
        &self,
        parent_values: serde_json::Value,
        rt: &Runtime,
    ) -> Result<serde_json::Value, NodeError> {
        let serde_json::Value::Object(all) = parent_values else {
            return Err(NodeError::fatal("parent state is not an object"));
        };
        let shape = &self.inner.shape;
        let input: serde_json::Map<String, serde_json::Value> = all
            .into_iter()
            .filter(|(k, _)| shape.field_index(k).is_some())
            .collect();
        let (out, changes) = self
            .run_nested_input(RunInput::Json(serde_json::Value::Object(input)), rt)
            .await?;
        let mut back = serde_json::Map::new();
        for (idx, change) in changes {
            let value = match change {
                crate::state::FieldChange::Appended(n) => match out.field_tail_to_json(idx, n) {
                    Some(tail) => tail.map(serde_json::Value::Array),
                    None => out.field_to_json(idx),
                },
                crate::state::FieldChange::Replaced => out.field_to_json(idx),
            }
            .map_err(NodeError::terminal)?;
            back.insert(out.field_name(idx).to_owned(), value);
        }
        Ok(serde_json::Value::Object(back))
    }

    async fn run_nested_input(
        &self,
        input: RunInput<S>,
        rt: &Runtime,
    ) -> Result<(S, std::collections::BTreeMap<usize, crate::state::FieldChange>), NodeError> {
        let parent_ns = rt.ns();
        let mut ns: Vec<String> = parent_ns.iter().cloned().collect();
        ns.push(format!("{}:{}", rt.node(), rt.task_id()));
        let run = Arc::clone(rt.run());
        let resuming = !run
            .resume
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .is_empty();
        let cfg = RunConfig {
            recursion_limit: run.recursion_limit,
            durability: run.durability,
            thread_id: run.thread_id.clone(),
            ..RunConfig::default()
        };
        let ns: Arc<[String]> = ns.into();
        // Reported as a chain nested in its node's, as LangGraph reports a compiled graph
        // called from a node.
        let events = rt.event_scope().map(|task| {
            let scope = task.child([(
                "checkpoint_ns".to_owned(),
                serde_json::Value::String(ns.join("|")),
            )]);
            Arc::new(
                EventRun::new(
                    Arc::clone(&run),
                    Arc::clone(&ns),
                    RunType::Chain,
                    self.inner.name.clone(),
                    vec!["seq:step:1".to_owned()],
                    Arc::new(scope),
                )
                .start(input_json(&self.inner, &input), true),
            )
        });
        let res = run_loop(
            Arc::clone(&self.inner),
            input,
            &cfg,
            run,
            ns,
            resuming,
            events.clone(),
        )
        .await;
        if let (Some(ev), Ok(r)) = (&events, &res) {
            if matches!(r.end, LoopEnd::Done) {
                ev.end_ref(r.state.to_json().unwrap_or(serde_json::Value::Null));
            }
        }
        match res {
            Ok(r) => match r.end {
                LoopEnd::Done => Ok((Arc::unwrap_or_clone(r.state), r.changes)),
                LoopEnd::Interrupted(i) => Err(NodeError::Interrupted(i)),
                LoopEnd::Parent(update, goto) => Err(NodeError::ParentCommand { update, goto }),
            },
            Err(e) => Err(NodeError::fatal(format!("subgraph `{}`: {e}", self.inner.name)).with_source(e)),
        }
    }

    /// The graph's edges for drawing, as `(source, target, conditional)`, sorted and
    /// without duplicates: static edges and join edges are unconditional; conditional
    /// edges (every declared destination, or every node and END when the router declared
    /// none) and declared `Command` destinations are conditional. The edges of
    /// [`drawing`](Self::drawing), which the SVG and [`draw_mermaid`](Self::draw_mermaid) draw.
    #[must_use]
    pub fn edges(&self) -> Vec<(String, String, bool)> {
        let set: BTreeSet<(String, String, bool)> = self
            .drawing()
            .edges
            .into_iter()
            .map(|e| (e.source, e.target, e.conditional))
            .collect();
        set.into_iter().collect()
    }

    /// What the graph looks like: its nodes in the order they were added (subgraph nodes
    /// with their own drawing) and its edges; [`Drawing::to_svg`](crate::draw::Drawing::to_svg)
    /// lays it out top down.
    #[must_use]
    pub fn drawing(&self) -> crate::draw::Drawing {
        use crate::draw::{DrawEdge, DrawNode, DrawNodeKind, Drawing};
        let g = &self.inner;
        let mut names: Vec<(&String, usize)> = g.nodes.iter().map(|(n, spec)| (n, spec.order)).collect();
        names.sort_by_key(|(n, order)| (*order, (*n).clone()));
        let nodes = names
            .into_iter()
            .map(|(name, _)| DrawNode {
                id: name.clone(),
                kind: DrawNodeKind::Node,
                subgraph: g
                    .nodes
                    .get(name)
                    .and_then(|spec| spec.subgraph.as_ref())
                    .map(|info| Arc::clone(&info.drawing)),
            })
            .collect();
        let edge = |source: &str, target: &str, conditional: bool, label: Option<&str>| DrawEdge {
            source: source.to_owned(),
            target: target.to_owned(),
            conditional,
            label: label.map(str::to_owned),
        };
        // A path-map key names the edge; where it is just the target's name, the router's
        // name (a named function) says which condition leads there.
        let branch_label = |key: Option<&str>, target: &str, b: &Branch<S>| -> Option<String> {
            key.filter(|k| *k != target)
                .map(str::to_owned)
                .or_else(|| b.name.clone())
        };
        let mut edges = Vec::new();
        for (a, b) in &g.declared_edges {
            edges.push(edge(a, b, false, None));
        }
        for j in &g.joins {
            for s in &j.sources {
                edges.push(edge(s, &j.target, false, None));
            }
        }
        for (src, branches) in &g.branches {
            for b in branches {
                match &b.path_map {
                    Some(map) => {
                        for (key, target) in map {
                            let label = branch_label(Some(key), target, b);
                            edges.push(edge(src, target, true, label.as_deref()));
                        }
                    }
                    None => {
                        for target in g.node_names.iter().map(String::as_str).chain([crate::types::END]) {
                            let label = branch_label(None, target, b);
                            edges.push(edge(src, target, true, label.as_deref()));
                        }
                    }
                }
            }
        }
        for (name, spec) in &g.nodes {
            for d in &spec.destinations {
                edges.push(edge(name, d, true, None));
            }
        }
        Drawing::new(g.name.clone(), nodes, edges)
    }

    /// The graph's nodes and edges as LangGraph's `get_graph(xray=..)` gives them (see
    /// [`GraphView`](crate::draw::GraphView)); `.to_json()` is `get_graph().to_json()`.
    /// `xray`: `false`, `true` (every level) or a depth. A node the graph interrupts at
    /// carries LangGraph's `__interrupt` metadata.
    #[must_use]
    pub fn get_graph(&self, xray: impl Into<crate::draw::XRay>) -> crate::draw::GraphView {
        let mut view = crate::draw::GraphView::from_drawing(&self.drawing(), xray);
        let g = &self.inner;
        for n in &mut view.nodes {
            if !g.nodes.contains_key(&n.id) {
                continue;
            }
            let at = match (
                g.interrupt_before.contains(&n.id),
                g.interrupt_after.contains(&n.id),
            ) {
                (true, true) => "before,after",
                (true, false) => "before",
                (false, true) => "after",
                (false, false) => continue,
            };
            n.metadata
                .get_or_insert_with(serde_json::Map::new)
                .insert("__interrupt".into(), serde_json::Value::from(at));
        }
        view
    }

    /// The graph as an SVG document, laid out top down (see [`crate::draw`]).
    #[must_use]
    pub fn draw_svg(&self, options: &crate::draw::SvgOptions) -> String {
        self.drawing().to_svg(options)
    }

    /// Mermaid text of the graph; conditional edges are dotted.
    #[must_use]
    pub fn draw_mermaid(&self) -> String {
        crate::mermaid::draw(&self.drawing())
    }
}

async fn execute<S: State>(
    inner: Arc<GraphInner<S>>,
    input: RunInput<S>,
    config: RunConfig,
    run: Arc<RunShared>,
) -> Result<RunOutput<S>> {
    let resuming =
        matches!(&input, RunInput::Continue) || matches!(&input, RunInput::Command(c) if c.resume.is_some());
    let events = run.wants_any(StreamMode::Events).then(|| {
        let mut meta = config.metadata.clone();
        if let Some(t) = &run.thread_id {
            meta.insert("thread_id".into(), serde_json::Value::String(t.clone()));
        }
        meta.insert("ls_integration".into(), serde_json::Value::from("langgraph"));
        let scope = crate::events::EventScope {
            run_id: run.run_id.clone(),
            parent_ids: Vec::new(),
            metadata: meta,
        };
        Arc::new(
            EventRun::new(
                Arc::clone(&run),
                Arc::from(Vec::new()),
                RunType::Chain,
                inner.name.clone(),
                Vec::new(),
                Arc::new(scope),
            )
            .start(input_json(&inner, &input), false),
        )
    });
    let r = run_loop(
        inner,
        input,
        &config,
        run,
        Arc::from(Vec::new()),
        resuming,
        events.clone(),
    )
    .await?;
    if let Some(ev) = &events {
        ev.end_ref(r.state.to_json().unwrap_or(serde_json::Value::Null));
    }
    let (status, interrupts) = match r.end {
        LoopEnd::Done => (RunStatus::Done, Vec::new()),
        LoopEnd::Interrupted(i) => (RunStatus::Interrupted, i),
        LoopEnd::Parent(..) => {
            return Err(Error::InvalidGraph(
                "a node sent a Command to the parent graph, but this graph has no parent".into(),
            ))
        }
    };
    Ok(RunOutput {
        values: Arc::unwrap_or_clone(r.state),
        interrupts,
        status,
        config: r.config,
    })
}

/// A run's input as `on_chain_start` reports it: the update or JSON given; `null` for a
/// resume or a continue.
fn input_json<S: State>(g: &GraphInner<S>, input: &RunInput<S>) -> serde_json::Value {
    match input {
        RunInput::Update(u) => g.shape.update_to_json(u).unwrap_or(serde_json::Value::Null),
        RunInput::Json(v) => v.clone(),
        RunInput::Command(_) | RunInput::Continue => serde_json::Value::Null,
    }
}

/// The events of a run ([`CompiledGraph::stream_events`]): each `astream_events` event the
/// filter keeps, then, if the run failed, its error as the last item.
pub type EventStream = futures::stream::BoxStream<'static, Result<StreamEvent>>;

/// An event of a run's stream.
#[derive(Debug)]
pub enum RunEvent<S> {
    /// A part in one of the requested modes.
    Part(StreamPart),
    /// The run's end: its output or its error. Always the last event, exactly once.
    End(Result<RunOutput<S>>),
}

/// The stream of a run. Dropping it does not stop the run.
pub struct RunStream<S> {
    rx: Option<mpsc::UnboundedReceiver<StreamPart>>,
    done: Option<oneshot::Receiver<Result<RunOutput<S>>>>,
}

/// The message of a panic payload (`panic!` with a literal or a formatted message).
fn panic_message(payload: &(dyn std::any::Any + Send)) -> &str {
    payload
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| payload.downcast_ref::<&str>().copied())
        .unwrap_or("(no message)")
}

impl<S> Stream for RunStream<S> {
    type Item = RunEvent<S>;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if let Some(rx) = self.rx.as_mut() {
            match rx.poll_recv(cx) {
                Poll::Ready(Some(part)) => return Poll::Ready(Some(RunEvent::Part(part))),
                Poll::Ready(None) => self.rx = None,
                Poll::Pending => return Poll::Pending,
            }
        }
        if let Some(done) = self.done.as_mut() {
            return match Pin::new(done).poll(cx) {
                Poll::Ready(r) => {
                    self.done = None;
                    let out = r.unwrap_or(Err(Error::Cancelled));
                    Poll::Ready(Some(RunEvent::End(out)))
                }
                Poll::Pending => Poll::Pending,
            };
        }
        Poll::Ready(None)
    }
}
