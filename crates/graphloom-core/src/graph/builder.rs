//! [`StateGraph`]: declare nodes and edges, then compile.

use super::compiled::CompiledGraph;
use super::node::{Branch, InputKind, NodeFn, NodeInput, NodeSpec};
use super::spec::{GraphInner, Join};
use crate::checkpoint::{Checkpointer, DynCheckpointer};
use crate::error::{Error, Result};
use crate::runtime::Runtime;
use crate::state::State;
use crate::store::{DynStore, Store};
use crate::types::{CachePolicy, NodeError, NodeOutput, NodeSet, Packet, RetryPolicy, Routes, END, START};
use serde::de::DeserializeOwned;
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::future::Future;
use std::sync::Arc;

/// A graph under construction.
///
/// ```
/// use graphloom_core::{State, StateGraph, RunConfig, Seq, END, START};
///
/// #[derive(State, Clone, Default, Debug)]
/// struct Chat {
///     #[reducer(append)]
///     log: Seq<String>,
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> graphloom_core::Result<()> {
/// let graph = StateGraph::<Chat>::new()
///     .add_node("hello", |_s, _rt| async { Ok(ChatUpdate::new().log(vec!["hello".into()])) })
///     .add_node("world", |_s, _rt| async { Ok(ChatUpdate::new().log(vec!["world".into()])) })
///     .add_edge(START, "hello")
///     .add_edge("hello", "world")
///     .add_edge("world", END)
///     .compile()?;
/// let out = graph.invoke(ChatUpdate::new(), RunConfig::default()).await?;
/// assert_eq!(out.values.log.to_vec(), vec!["hello", "world"]);
/// # Ok(()) }
/// ```
#[must_use]
pub struct StateGraph<S: State> {
    shape: S,
    name: String,
    nodes: BTreeMap<String, NodeSpec<S>>,
    edges: Vec<(String, String)>,
    joins: Vec<(Vec<String>, String)>,
    branches: Vec<(String, Branch<S>)>,
    problems: Vec<String>,
    checkpointer: Option<Arc<dyn DynCheckpointer>>,
    store: Option<Arc<dyn DynStore>>,
    interrupt_before: NodeSet,
    interrupt_after: NodeSet,
    defaults: super::defaults::NodeDefaults<S>,
}

impl<S: State + Default> Default for StateGraph<S> {
    fn default() -> Self {
        Self::with_shape(S::default())
    }
}

impl<S: State + Default> StateGraph<S> {
    /// A new graph over a typed state.
    pub fn new() -> Self {
        Self::default()
    }
}

fn is_reserved(name: &str) -> bool {
    name == START || name == END || name.contains('|') || name.contains(':') || name.is_empty()
}

fn state_node_fn<S, F, Fut, O>(f: F) -> NodeFn<S>
where
    S: State,
    F: Fn(Arc<S>, Runtime) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<O, NodeError>> + Send + 'static,
    O: Into<NodeOutput<S>>,
{
    Arc::new(move |input, rt| match input {
        NodeInput::State(s) => {
            let fut = f(s, rt);
            Box::pin(async move { fut.await.map(Into::into) })
        }
        NodeInput::Packet(_) => {
            Box::pin(async { Err(NodeError::fatal("state node received a packet it cannot read")) })
        }
    })
}

fn packet_node_fn<S, T, F, Fut, O>(node: String, f: F) -> NodeFn<S>
where
    S: State,
    T: DeserializeOwned + Clone + Send + Sync + 'static,
    F: Fn(T, Runtime) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<O, NodeError>> + Send + 'static,
    O: Into<NodeOutput<S>>,
{
    Arc::new(move |input, rt| {
        let packet = match input {
            NodeInput::Packet(Packet::Json(v)) => serde_json::from_value::<T>(v).map_err(|e| {
                NodeError::fatal(format!("packet for `{node}` does not decode: {e}")).with_source(e)
            }),
            NodeInput::Packet(p) => p
                .downcast_ref::<T>()
                .cloned()
                .ok_or_else(|| NodeError::fatal(format!("packet for `{node}` has the wrong type"))),
            NodeInput::State(_) => Err(NodeError::fatal(format!(
                "node `{node}` takes Send packets only, but an edge triggered it"
            ))),
        };
        match packet {
            Ok(p) => {
                let fut = f(p, rt);
                Box::pin(async move { fut.await.map(Into::into) })
            }
            Err(e) => Box::pin(async move { Err(e) }),
        }
    })
}

impl<S: State> StateGraph<S> {
    /// A new graph whose state has the shape of `shape` (for [`crate::JsonState`]).
    pub fn with_shape(shape: S) -> Self {
        Self {
            shape: shape.empty_like(),
            name: "LangGraph".to_owned(),
            nodes: BTreeMap::new(),
            edges: Vec::new(),
            joins: Vec::new(),
            branches: Vec::new(),
            problems: Vec::new(),
            checkpointer: None,
            store: None,
            interrupt_before: NodeSet::None,
            interrupt_after: NodeSet::None,
            defaults: super::defaults::NodeDefaults::default(),
        }
    }

    /// Name the graph (shown in drawings and the server).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    fn insert_node(mut self, name: String, spec: NodeSpec<S>) -> Self {
        if is_reserved(&name) {
            self.problems
                .push(format!("node name `{name}` is reserved or contains `|` or `:`"));
        } else {
            let order = self.nodes.len();
            match self.nodes.entry(name) {
                std::collections::btree_map::Entry::Occupied(e) => {
                    self.problems.push(format!("node `{}` is added twice", e.key()));
                }
                std::collections::btree_map::Entry::Vacant(e) => {
                    let mut spec = spec;
                    spec.order = order;
                    e.insert(spec);
                }
            }
        }
        self
    }

    fn spec(func: NodeFn<S>, input: InputKind) -> NodeSpec<S> {
        NodeSpec {
            func,
            input,
            retry: None,
            timeout: None,
            cache: None,
            error_handler: None,
            default_handler: false,
            destinations: Vec::new(),
            subgraph: None,
            defer: false,
            order: 0,
        }
    }

    /// Declare that node `node` reads the state fields `fields` by name (a node built
    /// over any state, such as a prebuilt tool node reading `messages`): `compile()`
    /// refuses the graph, naming the node and the field, when the state has no such field,
    /// rather than the node failing on its first run.
    pub fn node_reads<I, T>(mut self, node: &str, fields: I) -> Self
    where
        I: IntoIterator<Item = T>,
        T: AsRef<str>,
    {
        for field in fields {
            let field = field.as_ref();
            if self.shape.field_index(field).is_none() {
                self.problems.push(format!(
                    "node `{node}` reads state field `{field}`, which the state does not have"
                ));
            }
        }
        self
    }

    /// Add a node: an async function of the state snapshot and the [`Runtime`].
    pub fn add_node<F, Fut, O>(self, name: impl Into<String>, f: F) -> Self
    where
        F: Fn(Arc<S>, Runtime) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, NodeError>> + Send + 'static,
        O: Into<NodeOutput<S>>,
    {
        self.insert_node(name.into(), Self::spec(state_node_fn(f), InputKind::State))
    }

    /// Add a node that only runs for `Send` packets of type `T`.
    pub fn add_packet_node<T, F, Fut, O>(self, name: impl Into<String>, f: F) -> Self
    where
        T: DeserializeOwned + Clone + Send + Sync + 'static,
        F: Fn(T, Runtime) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, NodeError>> + Send + 'static,
        O: Into<NodeOutput<S>>,
    {
        let name = name.into();
        let func = packet_node_fn(name.clone(), f);
        self.insert_node(name, Self::spec(func, InputKind::Packet))
    }

    /// Add a node that runs `on_state` with the state snapshot when an edge or a `goto`
    /// names it, and `on_packet` with its packet when a `Send` of a `T` does: one node
    /// name for both ways in (an agent's tools node runs a whole message's calls, or one
    /// call per `Send`).
    pub fn add_node_with_packets<T, F, FutF, P, FutP, O>(
        self,
        name: impl Into<String>,
        on_state: F,
        on_packet: P,
    ) -> Self
    where
        T: DeserializeOwned + Clone + Send + Sync + 'static,
        F: Fn(Arc<S>, Runtime) -> FutF + Send + Sync + 'static,
        FutF: Future<Output = Result<O, NodeError>> + Send + 'static,
        P: Fn(T, Runtime) -> FutP + Send + Sync + 'static,
        FutP: Future<Output = Result<O, NodeError>> + Send + 'static,
        O: Into<NodeOutput<S>>,
    {
        let name = name.into();
        let state = state_node_fn(on_state);
        let packet = packet_node_fn(name.clone(), on_packet);
        let func: NodeFn<S> = Arc::new(move |input, rt| match input {
            NodeInput::State(_) => state(input, rt),
            NodeInput::Packet(_) => packet(input, rt),
        });
        self.insert_node(name, Self::spec(func, InputKind::Either))
    }

    /// Add a compiled graph as a node. `input` maps the parent state to the child's input;
    /// `output` maps the child's final state to a parent update. The child checkpoints in
    /// its own namespace; its interrupts pause the parent.
    pub fn add_subgraph<C: State>(
        self,
        name: impl Into<String>,
        child: CompiledGraph<C>,
        input: impl Fn(&S) -> C::Update + Send + Sync + 'static,
        output: impl Fn(&C) -> S::Update + Send + Sync + 'static,
    ) -> Self {
        let info = child.info();
        let output = Arc::new(output);
        let func = state_node_fn(move |s: Arc<S>, rt: Runtime| {
            let child = child.clone();
            let output = Arc::clone(&output);
            let child_input = input(&s);
            async move {
                let out = child.run_nested(child_input, &rt).await?;
                Ok(NodeOutput::Update(output(&out)))
            }
        });
        let mut spec = Self::spec(func, InputKind::State);
        spec.subgraph = Some(info);
        self.insert_node(name.into(), spec)
    }

    /// Add a compiled graph that shares keys with this one as a node: the child starts from
    /// this graph's values of the fields it also declares, and only what the child's nodes
    /// changed comes back, through this graph's reducers (appended items once, not the whole
    /// list again). Fields the child has and this graph lacks stay in the child.
    pub fn add_subgraph_shared<C: State>(self, name: impl Into<String>, child: CompiledGraph<C>) -> Self {
        let info = child.info();
        let func = state_node_fn(move |s: Arc<S>, rt: Runtime| {
            let child = child.clone();
            async move {
                let values = s.to_json().map_err(NodeError::terminal)?;
                let back = child.run_nested_shared(values, &rt).await?;
                let serde_json::Value::Object(mut back) = back else {
                    return Ok(NodeOutput::None);
                };
                back.retain(|k, _| s.field_index(k).is_some());
                let update = s.update_from_json(serde_json::Value::Object(back)).map_err(|e| {
                    NodeError::fatal(format!("subgraph output does not fit the parent state: {e}"))
                        .with_source(e)
                })?;
                Ok(NodeOutput::Update(update))
            }
        });
        let mut spec = Self::spec(func, InputKind::State);
        spec.subgraph = Some(info);
        self.insert_node(name.into(), spec)
    }

    /// Add a compiled graph as a node that runs once per `Send` packet of type `T`.
    pub fn add_packet_subgraph<T, C>(
        self,
        name: impl Into<String>,
        child: CompiledGraph<C>,
        input: impl Fn(T) -> C::Update + Send + Sync + 'static,
        output: impl Fn(&C) -> S::Update + Send + Sync + 'static,
    ) -> Self
    where
        T: DeserializeOwned + Clone + Send + Sync + 'static,
        C: State,
    {
        let name = name.into();
        let info = child.info();
        let output = Arc::new(output);
        let func = packet_node_fn(name.clone(), move |p: T, rt: Runtime| {
            let child = child.clone();
            let output = Arc::clone(&output);
            let child_input = input(p);
            async move {
                let out = child.run_nested(child_input, &rt).await?;
                Ok(NodeOutput::Update(output(&out)))
            }
        });
        let mut spec = Self::spec(func, InputKind::Packet);
        spec.subgraph = Some(info);
        self.insert_node(name, spec)
    }

    pub(super) fn with_spec(mut self, node: &str, f: impl FnOnce(&mut NodeSpec<S>)) -> Self {
        match self.nodes.get_mut(node) {
            Some(spec) => f(spec),
            None => self.problems.push(format!("policy set on unknown node `{node}`")),
        }
        self
    }

    /// Retry, cache, timeout and error handler for every node that does not set its own
    /// (LangGraph's `set_node_defaults`); applied at `compile()`, not inherited by
    /// subgraphs.
    pub fn node_defaults(mut self, defaults: super::defaults::NodeDefaults<S>) -> Self {
        self.defaults = defaults;
        self
    }
    /// Retry `node` on failure.
    pub fn retry(self, node: &str, policy: RetryPolicy) -> Self {
        self.with_spec(node, |s| s.retry = Some(policy))
    }
    /// Bound each attempt of `node` by `timeout`: a [`Duration`](std::time::Duration) is a hard cap, a
    /// [`TimeoutPolicy`](crate::TimeoutPolicy) may add (or only set) an idle limit that
    /// progress refreshes. An attempt past a limit fails as
    /// [`NodeError::TimedOut`], which the default retry predicate retries.
    pub fn node_timeout(self, node: &str, timeout: impl Into<crate::timeout::TimeoutPolicy>) -> Self {
        let timeout = timeout.into();
        self.with_spec(node, |s| s.timeout = Some(timeout))
    }
    /// Cache `node`'s output: a task of `node` whose cache key (see [`CachePolicy`]) was
    /// computed by an earlier run of the same compiled graph, within the policy's TTL,
    /// returns that run's output without calling the node. The cache lives in the compiled
    /// graph (shared by its clones and threads), in memory; an entry past its TTL is
    /// recomputed and stored again.
    pub fn cache(self, node: &str, policy: CachePolicy<S>) -> Self {
        self.with_spec(node, |s| s.cache = Some(policy))
    }
    /// Defer `node` (LangGraph's `add_node(.., defer=True)`): once triggered, it waits
    /// until no other task of its graph is pending (no other node triggered, no `Send`
    /// packet left), then runs once. This is the join of a map-reduce whose branches have
    /// uneven lengths: every branch finishes before it runs, however many steps each takes,
    /// and triggers that arrived while it waited are taken together. The wait is part of
    /// the checkpoint (the trigger stays unseen), so it holds across an interrupt, a resume
    /// and a restart. Only edge-triggered runs wait; a `Send` packet to `node` runs at once.
    pub fn defer(self, node: &str) -> Self {
        self.with_spec(node, |s| s.defer = true)
    }
    /// Declare where `node` may go with `Command::goto` (validation and drawing).
    pub fn destinations<I: IntoIterator<Item = T>, T: Into<String>>(self, node: &str, to: I) -> Self {
        let to: Vec<String> = to.into_iter().map(Into::into).collect();
        self.with_spec(node, |s| s.destinations = to)
    }

    /// `to` runs after `from`. With several sources (`add_edge(["a", "b"], "c")`, as in
    /// LangGraph) `to` runs once every one of them has run: the same as [`Self::add_join`].
    pub fn add_edge(mut self, from: impl EdgeSources, to: impl Into<String>) -> Self {
        let mut from = from.into_sources();
        if from.len() == 1 {
            if let Some(from) = from.pop() {
                self.edges.push((from, to.into()));
            }
            self
        } else {
            self.add_join(from, to)
        }
    }
    /// `to` runs once every node of `from` has run (a join).
    pub fn add_join<I: IntoIterator<Item = T>, T: Into<String>>(
        mut self,
        from: I,
        to: impl Into<String>,
    ) -> Self {
        let mut from: Vec<String> = from.into_iter().map(Into::into).collect();
        from.sort();
        from.dedup();
        self.joins.push((from, to.into()));
        self
    }
    /// After `from`, call `router` on the new state; it returns node names, `END`, or
    /// `Send` packets.
    pub fn add_conditional_edges<R, F>(mut self, from: impl Into<String>, router: F) -> Self
    where
        R: Into<Routes>,
        F: Fn(&S) -> R + Send + Sync + 'static,
    {
        self.branches.push((
            from.into(),
            Branch {
                router: Arc::new(move |s| router(s).into()),
                path_map: None,
                name: super::node::router_name::<F>(),
            },
        ));
        self
    }
    /// Like [`Self::add_conditional_edges`], with the router returning keys of `path_map`.
    pub fn add_conditional_edges_map<R, F, I, K, V>(
        mut self,
        from: impl Into<String>,
        router: F,
        path_map: I,
    ) -> Self
    where
        R: Into<Routes>,
        F: Fn(&S) -> R + Send + Sync + 'static,
        I: IntoIterator<Item = (K, V)>,
        K: Into<String>,
        V: Into<String>,
    {
        self.branches.push((
            from.into(),
            Branch {
                router: Arc::new(move |s| router(s).into()),
                path_map: Some(path_map.into_iter().map(|(k, v)| (k.into(), v.into())).collect()),
                name: super::node::router_name::<F>(),
            },
        ));
        self
    }
    /// Like [`Self::add_conditional_edges`], declaring where the router may go
    /// (LangGraph's `path_map` given as a list): the router returns node names (or `END`)
    /// from `destinations`, and `Send` packets as it likes. Drawings (SVG, Mermaid) show
    /// one dotted edge per destination instead of one to every node; compile checks the
    /// names; a router that returns a name outside the list fails the run with
    /// `Error::UnknownNode`.
    ///
    /// ```
    /// use graphloom_core::{State, StateGraph, END, START};
    /// #[derive(State, Clone, Default, Debug)]
    /// struct Ticket {
    ///     urgent: bool,
    /// }
    /// let g = StateGraph::<Ticket>::new()
    ///     .add_node("triage", |_s, _rt| async { Ok(TicketUpdate::new()) })
    ///     .add_node("answer", |_s, _rt| async { Ok(TicketUpdate::new()) })
    ///     .add_edge(START, "triage")
    ///     .add_conditional_edges_to("triage", |s: &Ticket| if s.urgent { "answer" } else { END }, ["answer", END])
    ///     .add_edge("answer", END)
    ///     .compile()
    ///     .unwrap();
    /// assert!(g.edges().contains(&("triage".into(), "answer".into(), true)));
    /// assert!(!g.edges().contains(&("triage".into(), "triage".into(), true)));
    /// ```
    pub fn add_conditional_edges_to<R, F, I, T>(
        self,
        from: impl Into<String>,
        router: F,
        destinations: I,
    ) -> Self
    where
        R: Into<Routes>,
        F: Fn(&S) -> R + Send + Sync + 'static,
        I: IntoIterator<Item = T>,
        T: Into<String>,
    {
        let map: Vec<(String, String)> = destinations
            .into_iter()
            .map(|d| {
                let d = d.into();
                (d.clone(), d)
            })
            .collect();
        self.add_conditional_edges_map(from, router, map)
    }
    /// Shorthand for `add_edge(START, node)`.
    pub fn set_entry_point(self, node: impl Into<String>) -> Self {
        self.add_edge(START, node)
    }
    /// Shorthand for `add_edge(node, END)`.
    pub fn set_finish_point(self, node: impl Into<String>) -> Self {
        self.add_edge(node.into(), END)
    }
    /// Chain nodes: `a -> b -> c`.
    pub fn add_sequence<I: IntoIterator<Item = T>, T: Into<String>>(mut self, nodes: I) -> Self {
        let names: Vec<String> = nodes.into_iter().map(Into::into).collect();
        for w in names.windows(2) {
            self.edges.push((w[0].clone(), w[1].clone()));
        }
        self
    }

    /// Persist checkpoints with this saver (needed for threads, interrupts, time travel).
    pub fn checkpointer(mut self, saver: impl Checkpointer) -> Self {
        self.checkpointer = Some(Arc::new(saver));
        self
    }
    /// Persist checkpoints with a shared saver.
    pub fn checkpointer_dyn(mut self, saver: Arc<dyn DynCheckpointer>) -> Self {
        self.checkpointer = Some(saver);
        self
    }
    /// Give nodes a long-term memory store.
    pub fn store(mut self, store: impl Store) -> Self {
        self.store = Some(Arc::new(store));
        self
    }
    /// Give nodes a shared store.
    pub fn store_dyn(mut self, store: Arc<dyn DynStore>) -> Self {
        self.store = Some(store);
        self
    }
    /// Pause before these nodes on every run.
    pub fn interrupt_before(mut self, nodes: NodeSet) -> Self {
        self.interrupt_before = nodes;
        self
    }
    /// Pause after these nodes on every run.
    pub fn interrupt_after(mut self, nodes: NodeSet) -> Self {
        self.interrupt_after = nodes;
        self
    }

    /// Check the graph and build it.
    ///
    /// Errors (all found here, none at run time): unknown node in an edge, join, branch path
    /// map, destination list or interrupt list; no edge from `START`; a node that cannot be
    /// reached from `START`; a node with no way out (no edge, branch or destination).
    pub fn compile(self) -> Result<CompiledGraph<S>> {
        let mut problems = self.problems.clone();
        let known = |n: &str| n == START || n == END || self.nodes.contains_key(n);
        for (a, b) in &self.edges {
            if a == END {
                problems.push("an edge cannot start at END".into());
            }
            if b == START {
                problems.push("an edge cannot end at START".into());
            }
            for n in [a, b] {
                if !known(n) {
                    problems.push(format!("edge `{a}` -> `{b}` names unknown node `{n}`"));
                }
            }
        }
        for (from, to) in &self.joins {
            for n in from.iter().chain(std::iter::once(to)) {
                if !known(n) || n == START || n == END {
                    problems.push(format!("join {from:?} -> `{to}` names unknown node `{n}`"));
                }
            }
        }
        for (from, b) in &self.branches {
            if !known(from) || from == END {
                problems.push(format!("conditional edge from unknown node `{from}`"));
            }
            for target in b.path_map.iter().flat_map(|m| m.values()) {
                if !known(target) {
                    problems.push(format!(
                        "conditional edge from `{from}` maps to unknown node `{target}`"
                    ));
                }
            }
        }
        for (name, spec) in &self.nodes {
            for d in &spec.destinations {
                if !known(d) {
                    problems.push(format!("node `{name}` declares unknown destination `{d}`"));
                }
            }
        }
        for set in [&self.interrupt_before, &self.interrupt_after] {
            if let NodeSet::Some(v) = set {
                for n in v.iter().filter(|n| !self.nodes.contains_key(n.as_str())) {
                    problems.push(format!("interrupt names unknown node `{n}`"));
                }
            }
        }
        let has_start =
            self.edges.iter().any(|(a, _)| a == START) || self.branches.iter().any(|(a, _)| a == START);
        if !has_start {
            problems.push("no edge from START: add `add_edge(START, <first node>)`".into());
        }
        if problems.is_empty() {
            problems.extend(self.reachability_problems());
        }
        if !problems.is_empty() {
            return Err(Error::InvalidGraph(problems.join("; ")));
        }
        Ok(CompiledGraph::from_inner(self.into_inner()))
    }

    /// Unreachable nodes and nodes with no way out.
    fn reachability_problems(&self) -> Vec<String> {
        let dynamic_from: BTreeSet<&str> = self
            .branches
            .iter()
            .filter(|(_, b)| b.path_map.is_none())
            .map(|(a, _)| a.as_str())
            .collect();
        let mut out_edges: HashMap<&str, Vec<&str>> = HashMap::new();
        for (a, b) in &self.edges {
            out_edges.entry(a).or_default().push(b);
        }
        for (from, to) in &self.joins {
            for a in from {
                out_edges.entry(a).or_default().push(to);
            }
        }
        for (a, b) in &self.branches {
            for t in b.path_map.iter().flat_map(|m| m.values()) {
                out_edges.entry(a).or_default().push(t);
            }
        }
        for (name, spec) in &self.nodes {
            for d in &spec.destinations {
                out_edges.entry(name).or_default().push(d);
            }
        }
        let mut problems = Vec::new();
        for name in self.nodes.keys() {
            let has_exit = out_edges.contains_key(name.as_str()) || dynamic_from.contains(name.as_str());
            if !has_exit {
                problems.push(format!(
                    "node `{name}` has no way out: add an edge (to END if it should finish), a conditional edge, or declare its Command destinations"
                ));
            }
        }
        // With a router that can return any node, every node may be reachable.
        let mut seen: BTreeSet<&str> = BTreeSet::new();
        let mut queue: VecDeque<&str> = VecDeque::from([START]);
        let mut any_dynamic = false;
        while let Some(n) = queue.pop_front() {
            if !seen.insert(n) {
                continue;
            }
            if dynamic_from.contains(n) {
                any_dynamic = true;
            }
            for t in out_edges.get(n).into_iter().flatten() {
                queue.push_back(t);
            }
        }
        if !any_dynamic {
            for name in self.nodes.keys() {
                if !seen.contains(name.as_str()) {
                    problems.push(format!("node `{name}` cannot be reached from START"));
                }
            }
        }
        problems
    }

    fn into_inner(self) -> GraphInner<S> {
        let mut edges_out: HashMap<String, Vec<String>> = HashMap::new();
        for (a, b) in &self.edges {
            if b != END {
                let v = edges_out.entry(a.clone()).or_default();
                if !v.contains(b) {
                    v.push(b.clone());
                }
            }
        }
        let joins: Vec<Join> = self
            .joins
            .iter()
            .map(|(from, to)| Join {
                channel: format!("join:{}:{}", from.join("+"), to),
                sources: from.iter().cloned().collect(),
                target: to.clone(),
            })
            .collect();
        let mut branches: HashMap<String, Vec<Branch<S>>> = HashMap::new();
        for (a, b) in self.branches {
            branches.entry(a).or_default().push(b);
        }
        let mut nodes = self.nodes;
        for spec in nodes.values_mut() {
            self.defaults.apply(spec);
        }
        GraphInner::new(
            self.name,
            self.shape,
            nodes,
            edges_out,
            joins,
            branches,
            self.checkpointer,
            self.store,
            self.interrupt_before,
            self.interrupt_after,
            self.edges,
        )
    }
}

/// The source(s) of [`StateGraph::add_edge`]: one node name, or several (a join).
pub trait EdgeSources {
    /// The source names.
    fn into_sources(self) -> Vec<String>;
}

impl EdgeSources for &str {
    fn into_sources(self) -> Vec<String> {
        vec![self.to_owned()]
    }
}
impl EdgeSources for String {
    fn into_sources(self) -> Vec<String> {
        vec![self]
    }
}
impl EdgeSources for &String {
    fn into_sources(self) -> Vec<String> {
        vec![self.clone()]
    }
}
impl<T: Into<String>, const N: usize> EdgeSources for [T; N] {
    fn into_sources(self) -> Vec<String> {
        self.into_iter().map(Into::into).collect()
    }
}
impl<T: Into<String>> EdgeSources for Vec<T> {
    fn into_sources(self) -> Vec<String> {
        self.into_iter().map(Into::into).collect()
    }
}
impl<T: Into<String> + Clone> EdgeSources for &[T] {
    fn into_sources(self) -> Vec<String> {
        self.iter().cloned().map(Into::into).collect()
    }
}
