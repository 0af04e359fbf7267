//! [`GraphView`]: a graph's nodes and edges as LangGraph's `get_graph()` gives them, and
//! its JSON as `get_graph().to_json()` writes it (what `GET /assistants/{id}/graph`
//! answers). With [`XRay`], subgraph nodes are replaced by their own graph's nodes,
//! `<node>:<child>`, as `get_graph(xray=..)` does.

use super::{DrawNodeKind, Drawing};
use serde_json::{json, Map, Value};
use std::collections::BTreeSet;

/// How deep [`CompiledGraph::get_graph`](crate::CompiledGraph::get_graph) expands
/// subgraphs: LangGraph's `xray` (`False`, `True`, or a depth).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum XRay {
    /// Subgraphs stay one node each (`xray=False`).
    #[default]
    Off,
    /// Every level expanded (`xray=True`).
    All,
    /// This many levels expanded (`xray=n`; 0 is [`XRay::Off`]).
    Depth(usize),
}

impl XRay {
    fn depth(self) -> usize {
        match self {
            XRay::Off => 0,
            XRay::All => usize::MAX,
            XRay::Depth(n) => n,
        }
    }
}

impl From<bool> for XRay {
    fn from(on: bool) -> Self {
        if on {
            XRay::All
        } else {
            XRay::Off
        }
    }
}

impl From<usize> for XRay {
    fn from(depth: usize) -> Self {
        XRay::Depth(depth)
    }
}

/// What a node of a [`GraphView`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ViewNodeKind {
    /// The graph's entry, `__start__`.
    Start,
    /// The graph's exit, `__end__` (a subgraph's, `child:__end__`, when an expanded
    /// subgraph keeps it: several edges end there).
    End,
    /// A node that runs a function.
    Node,
    /// A node that runs a subgraph (not expanded).
    Subgraph,
}

/// A node of a [`GraphView`].
#[derive(Debug, Clone, PartialEq)]
pub struct ViewNode {
    /// Its id: the node's name, `<subgraph>:<name>` inside an expanded subgraph.
    pub id: String,
    /// Its name as LangGraph's JSON gives it (`data.name`): the id.
    pub name: String,
    /// What it is.
    pub kind: ViewNodeKind,
    /// LangGraph's node metadata: `{"__interrupt": "before" | "after" | "before,after"}`
    /// for a node the graph was compiled to interrupt at. `None` when empty.
    pub metadata: Option<Map<String, Value>>,
}

/// An edge of a [`GraphView`].
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ViewEdge {
    /// Where it starts.
    pub source: String,
    /// Where it ends.
    pub target: String,
    /// A conditional edge: a router's destination or a declared `Command` destination.
    pub conditional: bool,
    /// Its label: the path-map key that leads there (LangGraph's `data`).
    pub data: Option<String>,
}

/// A graph's nodes and edges as LangGraph's `get_graph()` gives them: START first, the
/// nodes in the order they were added, END; an expanded subgraph's nodes after them.
///
/// ```
/// use graphloom_core::{State, StateGraph, END, START};
/// use serde_json::json;
///
/// #[derive(State, Clone, Default, Debug)]
/// struct S { ok: bool }
///
/// let g = StateGraph::<S>::new()
///     .add_node("write", |_s, _rt| async { Ok(SUpdate::new()) })
///     .add_edge(START, "write")
///     .add_conditional_edges_map("write", |s: &S| if s.ok { "done" } else { "again" }, [("done", END), ("again", "write")])
///     .compile()
///     .unwrap();
/// let view = g.get_graph(false);
/// let ids: Vec<&str> = view.nodes.iter().map(|n| n.id.as_str()).collect();
/// assert_eq!(ids, ["__start__", "write", "__end__"]);
/// let json = view.to_json();
/// assert!(json["edges"].as_array().unwrap().contains(
///     &json!({"source": "write", "target": "__end__", "data": "done", "conditional": true})
/// ));
/// assert_eq!(json["nodes"][2], json!({"id": "__end__"}));
/// ```
#[derive(Debug, Clone, PartialEq, Default)]
pub struct GraphView {
    /// The nodes.
    pub nodes: Vec<ViewNode>,
    /// The edges.
    pub edges: Vec<ViewEdge>,
}

/// The `data.id` of a node in the JSON (LangGraph writes the runnable's class path).
const NODE_ID: [&str; 3] = ["graphloom", "graph", "Node"];
/// The `data.id` of a subgraph node.
const SUBGRAPH_ID: [&str; 3] = ["graphloom", "graph", "CompiledGraph"];

impl GraphView {
    /// The view of `drawing`, its subgraphs expanded as `xray` says.
    #[must_use]
    pub fn from_drawing(drawing: &Drawing, xray: impl Into<XRay>) -> Self {
        view(drawing, xray.into().depth())
    }

    /// The JSON LangGraph's `get_graph().to_json()` writes: `{"nodes": [{"id", "type":
    /// "runnable", "data": {"id", "name"}, "metadata"?}], "edges": [{"source", "target",
    /// "data"?, "conditional"?}]}`; an exit node is `{"id"}` alone, and `conditional`
    /// appears only when true.
    #[must_use]
    pub fn to_json(&self) -> Value {
        let nodes: Vec<Value> = self
            .nodes
            .iter()
            .map(|n| {
                let mut o = Map::new();
                o.insert("id".into(), json!(n.id));
                let class = match n.kind {
                    ViewNodeKind::End => None,
                    ViewNodeKind::Subgraph => Some(SUBGRAPH_ID),
                    ViewNodeKind::Start | ViewNodeKind::Node => Some(NODE_ID),
                };
                if let Some(class) = class {
                    o.insert("type".into(), json!("runnable"));
                    o.insert("data".into(), json!({"id": class, "name": n.name}));
                }
                if let Some(m) = &n.metadata {
                    o.insert("metadata".into(), Value::Object(m.clone()));
                }
                Value::Object(o)
            })
            .collect();
        let edges: Vec<Value> = self
            .edges
            .iter()
            .map(|e| {
                let mut o = Map::new();
                o.insert("source".into(), json!(e.source));
                o.insert("target".into(), json!(e.target));
                if let Some(d) = &e.data {
                    o.insert("data".into(), json!(d));
                }
                if e.conditional {
                    o.insert("conditional".into(), json!(true));
                }
                Value::Object(o)
            })
            .collect();
        json!({"nodes": nodes, "edges": edges})
    }

    /// The single node no edge ends at, leaving out `exclude` and the edges from it.
    fn first_node(&self, exclude: Option<&str>) -> Option<usize> {
        let targets: BTreeSet<&str> = self
            .edges
            .iter()
            .filter(|e| Some(e.source.as_str()) != exclude)
            .map(|e| e.target.as_str())
            .collect();
        single(
            self.nodes
                .iter()
                .enumerate()
                .filter(|(_, n)| Some(n.id.as_str()) != exclude && !targets.contains(n.id.as_str())),
        )
    }

    /// The single node no edge starts at, leaving out `exclude` and the edges to it.
    fn last_node(&self, exclude: Option<&str>) -> Option<usize> {
        let sources: BTreeSet<&str> = self
            .edges
            .iter()
            .filter(|e| Some(e.target.as_str()) != exclude)
            .map(|e| e.source.as_str())
            .collect();
        single(
            self.nodes
                .iter()
                .enumerate()
                .filter(|(_, n)| Some(n.id.as_str()) != exclude && !sources.contains(n.id.as_str())),
        )
    }

    /// Drop the entry when one edge leaves it and another node would be first.
    fn trim_first_node(&mut self) {
        let Some(i) = self.first_node(None) else { return };
        let id = self.nodes[i].id.clone();
        let out = self.edges.iter().filter(|e| e.source == id).count();
        if out == 1 && self.first_node(Some(&id)).is_some() {
            self.remove_node(i);
        }
    }

    /// Drop the exit when one edge reaches it and another node would be last.
    fn trim_last_node(&mut self) {
        let Some(i) = self.last_node(None) else { return };
        let id = self.nodes[i].id.clone();
        let into = self.edges.iter().filter(|e| e.target == id).count();
        if into == 1 && self.last_node(Some(&id)).is_some() {
            self.remove_node(i);
        }
    }

    fn remove_node(&mut self, i: usize) {
        let id = self.nodes.remove(i).id;
        self.edges.retain(|e| e.source != id && e.target != id);
    }
}

/// The index of the only item, if there is exactly one.
fn single<'a, T: 'a>(mut items: impl Iterator<Item = (usize, &'a T)>) -> Option<usize> {
    let (i, _) = items.next()?;
    items.next().is_none().then_some(i)
}

/// The view of `d`, subgraphs expanded `depth` levels down.
fn view(d: &Drawing, depth: usize) -> GraphView {
    let nodes = d
        .nodes
        .iter()
        .map(|n| ViewNode {
            id: n.id.clone(),
            name: n.id.clone(),
            kind: match n.kind {
                DrawNodeKind::Start => ViewNodeKind::Start,
                DrawNodeKind::End => ViewNodeKind::End,
                _ if n.subgraph.is_some() => ViewNodeKind::Subgraph,
                _ => ViewNodeKind::Node,
            },
            metadata: None,
        })
        .collect();
    // One edge per source, target and kind (the first path-map key's label).
    let mut seen = BTreeSet::new();
    let edges = d
        .edges
        .iter()
        .filter(|e| seen.insert((e.source.as_str(), e.target.as_str(), e.conditional)))
        .map(|e| ViewEdge {
            source: e.source.clone(),
            target: e.target.clone(),
            conditional: e.conditional,
            data: e.label.clone(),
        })
        .collect();
    let mut out = GraphView { nodes, edges };
    if depth == 0 {
        return out;
    }
    for node in &d.nodes {
        let Some(sub) = &node.subgraph else { continue };
        let mut inner = view(sub, depth - 1);
        inner.trim_first_node();
        inner.trim_last_node();
        if inner.nodes.is_empty() {
            continue;
        }
        // Edges into the subgraph node go to its first node, edges out of it leave from its
        // last; a subgraph without a single first and last node stays one node.
        let (Some(first), Some(last)) = (inner.first_node(None), inner.last_node(None)) else {
            continue;
        };
        let prefixed = |id: &str| format!("{}:{id}", node.id);
        let (first, last) = (prefixed(&inner.nodes[first].id), prefixed(&inner.nodes[last].id));
        for e in &mut out.edges {
            if e.source == node.id {
                e.source.clone_from(&last);
            }
            if e.target == node.id {
                e.target.clone_from(&first);
            }
        }
        out.nodes.retain(|n| n.id != node.id);
        out.nodes.extend(inner.nodes.into_iter().map(|mut n| {
            n.id = prefixed(&n.id);
            n.name.clone_from(&n.id);
            n
        }));
        out.edges.extend(inner.edges.into_iter().map(|mut e| {
            e.source = prefixed(&e.source);
            e.target = prefixed(&e.target);
            e
        }));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::draw::{DrawEdge, DrawNode};
    use std::sync::Arc;

    fn edge(a: &str, b: &str, conditional: bool) -> DrawEdge {
        DrawEdge {
            source: a.into(),
            target: b.into(),
            conditional,
            label: None,
        }
    }

    fn node(id: &str, sub: Option<Drawing>) -> DrawNode {
        DrawNode {
            id: id.into(),
            kind: DrawNodeKind::Node,
            subgraph: sub.map(Arc::new),
        }
    }

    /// `start -> plan -> act -> end`; with `two_ends`, `plan -.-> act | end` instead.
    fn child(two_ends: bool) -> Drawing {
        let edges = if two_ends {
            vec![
                edge("__start__", "plan", false),
                edge("plan", "act", true),
                edge("plan", "__end__", true),
                edge("act", "__end__", false),
            ]
        } else {
            vec![
                edge("__start__", "plan", false),
                edge("plan", "act", false),
                edge("act", "__end__", false),
            ]
        };
        Drawing::new("child", vec![node("plan", None), node("act", None)], edges)
    }

    fn parent(child: Drawing) -> Drawing {
        Drawing::new(
            "parent",
            vec![node("team", Some(child)), node("after", None)],
            [
                edge("__start__", "team", false),
                edge("team", "after", false),
                edge("after", "__end__", false),
            ],
        )
    }

    fn ids(v: &GraphView) -> Vec<&str> {
        v.nodes.iter().map(|n| n.id.as_str()).collect()
    }

    fn has(v: &GraphView, a: &str, b: &str, conditional: bool) -> bool {
        v.edges
            .iter()
            .any(|e| e.source == a && e.target == b && e.conditional == conditional)
    }

    #[test]
    fn an_exit_reached_twice_is_kept_as_langgraph_keeps_it() {
        let v = GraphView::from_drawing(&parent(child(true)), true);
        assert_eq!(
            ids(&v),
            [
                "__start__",
                "after",
                "__end__",
                "team:plan",
                "team:act",
                "team:__end__"
            ]
        );
        assert!(has(&v, "__start__", "team:plan", false));
        assert!(has(&v, "team:__end__", "after", false));
        assert!(has(&v, "team:plan", "team:__end__", true));
        assert!(has(&v, "team:act", "team:__end__", false));
        assert_eq!(v.nodes[5].kind, ViewNodeKind::End);
    }

    #[test]
    fn a_one_node_subgraph_becomes_that_node() {
        let one = Drawing::new(
            "one",
            vec![node("approve", None)],
            [
                edge("__start__", "approve", false),
                edge("approve", "__end__", false),
            ],
        );
        let v = GraphView::from_drawing(&parent(one), true);
        assert_eq!(ids(&v), ["__start__", "after", "__end__", "team:approve"]);
        assert!(has(&v, "__start__", "team:approve", false));
        assert!(has(&v, "team:approve", "after", false));
    }

    #[test]
    fn an_exit_reached_once_is_trimmed_and_off_keeps_the_subgraph_node() {
        let v = GraphView::from_drawing(&parent(child(false)), XRay::Depth(1));
        assert_eq!(
            ids(&v),
            ["__start__", "after", "__end__", "team:plan", "team:act"]
        );
        assert!(has(&v, "team:act", "after", false), "{v:?}");
        assert!(has(&v, "__start__", "team:plan", false), "{v:?}");
        let off = GraphView::from_drawing(&parent(child(false)), false);
        assert_eq!(ids(&off), ["__start__", "team", "after", "__end__"]);
        assert_eq!(off.nodes[1].kind, ViewNodeKind::Subgraph);
        assert_eq!(
            off.to_json()["nodes"][1]["data"],
            json!({"id": ["graphloom", "graph", "CompiledGraph"], "name": "team"})
        );
    }
}
