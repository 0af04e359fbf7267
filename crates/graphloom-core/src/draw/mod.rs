//! Drawing a graph: [`Drawing`] is what a compiled graph looks like (its boxes, its edges
//! with the conditional ones marked, its subgraphs), [`Drawing::to_svg`] lays it out top
//! down and writes SVG. The same drawing feeds the Mermaid text, the server's
//! `/assistants/{id}/graph`, the console at `/ui` and `graphloom draw`.
//!
//! Conditional edges are drawn to the destinations their router declared
//! ([`StateGraph::add_conditional_edges_to`](crate::StateGraph::add_conditional_edges_to)
//! or a path map); a router that declared none may go anywhere, so it gets an edge to
//! every node and to END, as in LangGraph.
//!
//! ```
//! use graphloom_core::{draw::SvgOptions, State, StateGraph, END, START};
//!
//! #[derive(State, Clone, Default, Debug)]
//! struct Doc {
//!     ok: bool,
//! }
//! let g = StateGraph::<Doc>::new()
//!     .add_node("write", |_s, _rt| async { Ok(DocUpdate::new()) })
//!     .add_node("review", |_s, _rt| async { Ok(DocUpdate::new()) })
//!     .add_edge(START, "write")
//!     .add_edge("write", "review")
//!     .add_conditional_edges_to("review", |s: &Doc| if s.ok { END } else { "write" }, ["write", END])
//!     .compile()
//!     .unwrap();
//! let svg = g.drawing().to_svg(&SvgOptions::default());
//! assert!(svg.starts_with("<svg") && svg.contains(r#"data-node="review""#));
//! ```

mod layout;
mod svg;
mod view;

use std::collections::BTreeSet;
use std::sync::Arc;

pub use svg::SvgOptions;
pub use view::{GraphView, ViewEdge, ViewNode, ViewNodeKind, XRay};

/// What kind of box a node of a drawing is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum DrawNodeKind {
    /// The graph's entry (`__start__`).
    Start,
    /// The graph's exit (`__end__`).
    End,
    /// A node.
    Node,
}

/// A box of a drawing.
#[derive(Debug, Clone, PartialEq)]
pub struct DrawNode {
    /// The node's name (`__start__` and `__end__` for the entry and the exit).
    pub id: String,
    /// What it is.
    pub kind: DrawNodeKind,
    /// The node's own graph, when it is a subgraph.
    pub subgraph: Option<Arc<Drawing>>,
}

/// An edge of a drawing.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct DrawEdge {
    /// Where it starts.
    pub source: String,
    /// Where it ends.
    pub target: String,
    /// A conditional edge (drawn dotted): a router's destination or a declared `Command`
    /// destination.
    pub conditional: bool,
    /// What leads here: the path-map key when it differs from the target's name, else the
    /// router's name when it is a named function.
    pub label: Option<String>,
}

/// A graph as it is drawn: its boxes (entry first, exit last when an edge reaches it) and
/// edges (sorted, without duplicates).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Drawing {
    /// The graph's name.
    pub name: String,
    /// The boxes.
    pub nodes: Vec<DrawNode>,
    /// The edges.
    pub edges: Vec<DrawEdge>,
}

impl Drawing {
    /// A drawing of `nodes` (without START and END, which are added: START first, END
    /// last when an edge reaches it) and `edges`.
    #[must_use]
    pub fn new(
        name: impl Into<String>,
        nodes: Vec<DrawNode>,
        edges: impl IntoIterator<Item = DrawEdge>,
    ) -> Self {
        let edges: BTreeSet<DrawEdge> = edges.into_iter().collect();
        let mut all = vec![DrawNode {
            id: crate::START.to_owned(),
            kind: DrawNodeKind::Start,
            subgraph: None,
        }];
        all.extend(nodes);
        if edges.iter().any(|e| e.target == crate::END) {
            all.push(DrawNode {
                id: crate::END.to_owned(),
                kind: DrawNodeKind::End,
                subgraph: None,
            });
        }
        Self {
            name: name.into(),
            nodes: all,
            edges: edges.into_iter().collect(),
        }
    }

    /// The drawing as an SVG document (see [`SvgOptions`]).
    #[must_use]
    pub fn to_svg(&self, options: &SvgOptions) -> String {
        svg::render(self, options)
    }

    /// The subgraph boxes, by namespace path (`child`, `child|grandchild`), every level.
    #[must_use]
    pub fn subgraph_paths(&self) -> Vec<String> {
        fn walk(d: &Drawing, prefix: &str, out: &mut Vec<String>) {
            for n in &d.nodes {
                if let Some(sub) = &n.subgraph {
                    let path = if prefix.is_empty() {
                        n.id.clone()
                    } else {
                        format!("{prefix}|{}", n.id)
                    };
                    out.push(path.clone());
                    walk(sub, &path, out);
                }
            }
        }
        let mut out = Vec::new();
        walk(self, "", &mut out);
        out
    }
}
