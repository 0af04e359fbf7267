//! [`GraphInner`]: the compiled, immutable form of a graph, as the executor runs it and the
//! drawing reads it. It knows nothing of how a run proceeds; the executor (`pregel`) and the
//! public API ([`CompiledGraph`](super::CompiledGraph)) both build on it.

use super::node::{Branch, NodeSpec};
use crate::checkpoint::DynCheckpointer;
use crate::state::State;
use crate::store::DynStore;
use crate::types::{NodeOutput, NodeSet};
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use tokio::time::Instant;

/// A join edge: `target` runs once all `sources` have run.
pub(crate) struct Join {
    pub channel: String,
    pub sources: BTreeSet<String>,
    pub target: String,
}

type CacheMap<S> = HashMap<(String, String), (NodeOutput<S>, Option<Instant>)>;

/// The immutable compiled form of a graph.
pub(crate) struct GraphInner<S: State> {
    pub name: String,
    pub shape: S,
    pub nodes: HashMap<String, NodeSpec<S>>,
    /// Node names, sorted (task order).
    pub node_names: Vec<String>,
    pub edges_out: HashMap<String, Vec<String>>,
    pub joins: Vec<Join>,
    pub joins_by_source: HashMap<String, Vec<usize>>,
    pub branches: HashMap<String, Vec<Branch<S>>>,
    /// Deferred nodes, sorted (see [`StateGraph::defer`](super::StateGraph::defer)).
    pub deferred: Vec<String>,
    /// Trigger channels of each node.
    pub node_triggers: HashMap<String, Vec<String>>,
    branch_channels: HashMap<String, String>,
    pub checkpointer: Option<Arc<dyn DynCheckpointer>>,
    pub store: Option<Arc<dyn DynStore>>,
    pub interrupt_before: NodeSet,
    pub interrupt_after: NodeSet,
    /// Static edges as declared (for drawing).
    pub declared_edges: Vec<(String, String)>,
    cache: Mutex<CacheMap<S>>,
    /// The input's own step runs the edges out of START, so its checkpoint (step `-1`,
    /// source `input`) already names the first nodes, and no checkpoint shows a
    /// `__start__` task: the functional API's numbering (set by `Entrypoint::compile`).
    pub input_runs_start: bool,
}

impl<S: State> GraphInner<S> {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        name: String,
        shape: S,
        nodes: std::collections::BTreeMap<String, NodeSpec<S>>,
        edges_out: HashMap<String, Vec<String>>,
        joins: Vec<Join>,
        branches: HashMap<String, Vec<Branch<S>>>,
        checkpointer: Option<Arc<dyn DynCheckpointer>>,
        store: Option<Arc<dyn DynStore>>,
        interrupt_before: NodeSet,
        interrupt_after: NodeSet,
        declared_edges: Vec<(String, String)>,
    ) -> Self {
        let node_names: Vec<String> = nodes.keys().cloned().collect();
        let deferred: Vec<String> = nodes
            .iter()
            .filter(|(_, spec)| spec.defer)
            .map(|(name, _)| name.clone())
            .collect();
        let branch_channels: HashMap<String, String> = node_names
            .iter()
            .map(|n| (n.clone(), format!("branch:to:{n}")))
            .collect();
        let mut node_triggers: HashMap<String, Vec<String>> = node_names
            .iter()
            .map(|n| (n.clone(), vec![format!("branch:to:{n}")]))
            .collect();
        let mut joins_by_source: HashMap<String, Vec<usize>> = HashMap::new();
        for (i, j) in joins.iter().enumerate() {
            node_triggers
                .entry(j.target.clone())
                .or_default()
                .push(j.channel.clone());
            for s in &j.sources {
                joins_by_source.entry(s.clone()).or_default().push(i);
            }
        }
        Self {
            name,
            shape,
            nodes: nodes.into_iter().collect(),
            node_names,
            deferred,
            edges_out,
            joins,
            joins_by_source,
            branches,
            node_triggers,
            branch_channels,
            checkpointer,
            store,
            interrupt_before,
            interrupt_after,
            declared_edges,
            cache: Mutex::new(HashMap::new()),
            input_runs_start: false,
        }
    }

    /// The trigger channel of `node`, if it exists.
    pub fn branch_channel(&self, node: &str) -> Option<&str> {
        self.branch_channels.get(node).map(String::as_str)
    }

    /// Whether join channel `ch` has heard from all its sources.
    pub fn join_complete(&self, ch: &str, arrived: Option<&BTreeSet<String>>) -> bool {
        let Some(arrived) = arrived else { return false };
        self.joins
            .iter()
            .find(|j| j.channel == ch)
            .is_some_and(|j| j.sources.iter().all(|s| arrived.contains(s)))
    }

    pub fn cache_get(&self, node: &str, key: &str) -> Option<NodeOutput<S>> {
        let mut cache = self
            .cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let k = (node.to_owned(), key.to_owned());
        match cache.get(&k) {
            Some((_, Some(exp))) if *exp <= Instant::now() => {
                cache.remove(&k);
                None
            }
            Some((out, _)) => Some(out.clone()),
            None => None,
        }
    }

    pub fn cache_put(&self, node: &str, key: &str, out: NodeOutput<S>, expires: Option<Instant>) {
        let mut cache = self
            .cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        cache.insert((node.to_owned(), key.to_owned()), (out, expires));
    }
}
