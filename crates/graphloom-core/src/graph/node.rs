//! Nodes and branches as the compiled graph keeps them.

use crate::runtime::Runtime;
use crate::state::State;
use crate::types::{CachePolicy, NodeError, NodeOutput, Packet, RetryPolicy, Routes};
use futures::future::BoxFuture;
use std::collections::BTreeMap;
use std::sync::Arc;

/// A node's future.
pub(crate) type NodeFuture<S> = BoxFuture<'static, Result<NodeOutput<S>, NodeError>>;

/// What a task hands its node.
pub(crate) enum NodeInput<S> {
    /// The state snapshot of the step (pull tasks, or a `Send` packet of the state type).
    State(Arc<S>),
    /// A `Send` packet for a packet node.
    Packet(Packet),
}

/// The callable of a node.
pub(crate) type NodeFn<S> = Arc<dyn Fn(NodeInput<S>, Runtime) -> NodeFuture<S> + Send + Sync>;

/// What input a node takes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum InputKind {
    /// The graph state.
    State,
    /// `Send` packets only.
    Packet,
    /// The state when an edge or a `goto` names it, its packet when a `Send` does.
    Either,
}

/// A node of a graph.
/// A subgraph node's compiled graph, as its parent lists it
/// ([`CompiledGraph::subgraphs`](crate::CompiledGraph::subgraphs)).
#[derive(Debug, Clone, PartialEq)]
pub struct SubgraphInfo {
    /// The child graph's name.
    pub name: String,
    /// The child's Mermaid drawing.
    pub mermaid: String,
    /// The child's drawing (boxes, edges, its own subgraphs).
    pub drawing: Arc<crate::draw::Drawing>,
    /// JSON Schema of the child's state (also what it takes and returns).
    pub state_schema: serde_json::Value,
    /// The child's own subgraph nodes, by node name.
    pub subgraphs: std::collections::BTreeMap<String, Arc<SubgraphInfo>>,
}

pub(crate) struct NodeSpec<S: State> {
    pub func: NodeFn<S>,
    pub input: InputKind,
    pub retry: Option<RetryPolicy>,
    pub timeout: Option<crate::timeout::TimeoutPolicy>,
    pub cache: Option<CachePolicy<S>>,
    /// Runs in the node's place once its retries are spent.
    pub error_handler: Option<NodeFn<S>>,
    /// The handler is the graph's default one (it streams under its own name).
    pub default_handler: bool,
    /// Declared `Command` destinations (for validation and drawing).
    pub destinations: Vec<String>,
    /// What the node's compiled graph is, when the node is a subgraph.
    pub subgraph: Option<Arc<SubgraphInfo>>,
    /// Deferred: its pull tasks wait until no other task is pending.
    pub defer: bool,
    /// Its place among the nodes in the order they were added (drawings follow it).
    pub order: usize,
}

impl<S: State> NodeSpec<S> {
    /// The name `node`'s error handler runs and streams its update under.
    pub fn handler_name(&self, node: &str) -> String {
        if self.default_handler {
            crate::node_failure::DEFAULT_HANDLER.to_owned()
        } else {
            crate::node_failure::handler_name(node)
        }
    }
}

impl<S: State> Clone for NodeSpec<S> {
    fn clone(&self) -> Self {
        Self {
            func: Arc::clone(&self.func),
            input: self.input,
            retry: self.retry.clone(),
            timeout: self.timeout,
            cache: self.cache.clone(),
            error_handler: self.error_handler.clone(),
            default_handler: self.default_handler,
            destinations: self.destinations.clone(),
            subgraph: self.subgraph.clone(),
            defer: self.defer,
            order: self.order,
        }
    }
}

/// The router of a conditional edge.
pub(crate) type RouterFn<S> = Arc<dyn Fn(&S) -> Routes + Send + Sync>;

/// A conditional edge.
pub(crate) struct Branch<S> {
    pub router: RouterFn<S>,
    /// Router keys to node names; `None` means the router returns node names.
    pub path_map: Option<BTreeMap<String, String>>,
    /// The router's name, when it is a named function (drawings label its edges with it).
    pub name: Option<String>,
}

/// The name of a router of type `F`: its last path segment when it is a named function
/// (`route_after_tool`), `None` for a closure.
pub(crate) fn router_name<F>() -> Option<String> {
    let full = std::any::type_name::<F>();
    if full.contains("{{closure}}") || full.contains('<') || full.contains('(') {
        return None;
    }
    full.rsplit("::")
        .next()
        .filter(|n| !n.is_empty())
        .map(str::to_owned)
}

impl<S> Clone for Branch<S> {
    fn clone(&self) -> Self {
        Self {
            router: Arc::clone(&self.router),
            path_map: self.path_map.clone(),
            name: self.name.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::router_name;

    fn route_after_review(_: &u8) -> &'static str {
        "end"
    }

    fn name_of<F: Fn(&u8) -> &'static str>(_: &F) -> Option<String> {
        router_name::<F>()
    }

    #[test]
    fn a_named_router_is_named_and_a_closure_is_not() {
        assert_eq!(
            name_of(&route_after_review).as_deref(),
            Some("route_after_review")
        );
        assert_eq!(name_of(&|_: &u8| "end"), None);
    }
}
