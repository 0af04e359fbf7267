//! The `xray` drawing of a graph (`GET /assistants/{id}/graph?xray=true`, what LangGraph
//! Studio asks for): every subgraph node replaced by its graph's nodes, `<node>:<child>`,
//! to a depth, as graphloom-core's [`GraphView`] expands them (LangGraph's
//! `get_graph(xray=..)`).
//!
//! A hosted graph that is not a compiled graph of this process (a Python graph) gives its
//! subgraphs as Mermaid text; they are read back here into drawings.

use crate::host::HostedGraph;
use graphloom_core::draw::{DrawEdge, DrawNode, DrawNodeKind, Drawing, GraphView, XRay};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;

const START: &str = "__start__";
const END: &str = "__end__";

/// A graph read back from Mermaid: node names (in order) and edges `(source, target,
/// conditional)`.
#[derive(Debug, Default, PartialEq)]
struct MermaidGraph {
    nodes: Vec<String>,
    edges: Vec<(String, String, bool)>,
}

impl MermaidGraph {
    /// As a drawing (START and END are added back by [`Drawing::new`]).
    fn into_drawing(self) -> Drawing {
        let nodes = self
            .nodes
            .into_iter()
            .filter(|n| n != START && n != END)
            .map(|id| DrawNode {
                id,
                kind: DrawNodeKind::Node,
                subgraph: None,
            })
            .collect();
        let edges = self
            .edges
            .into_iter()
            .map(|(source, target, conditional)| DrawEdge {
                source,
                target,
                conditional,
                label: None,
            });
        Drawing::new("subgraph", nodes, edges)
    }
}

/// Read a graph back from its Mermaid text (nodes `\tid(name)`, edges `a --> b;`,
/// `a -.-> b;`, `a -. label .-> b;`).
fn parse_mermaid(text: &str) -> MermaidGraph {
    let mut ids = BTreeMap::new();
    let mut d = MermaidGraph::default();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with("classDef") || line.starts_with("graph ") || !line.contains(['(', '-']) {
            continue;
        }
        if let Some(edge) = line.strip_suffix(';') {
            let parts = if let Some((a, b)) = edge.split_once(" --> ") {
                Some((a, b, false))
            } else if let Some((a, b)) = edge.split_once(" -.-> ") {
                Some((a, b, true))
            } else if let (Some((a, _)), Some((_, b))) = (edge.split_once(" -. "), edge.rsplit_once(" .-> "))
            {
                Some((a, b, true))
            } else {
                None
            };
            if let Some((a, b, c)) = parts {
                d.edges.push((a.trim().to_owned(), b.trim().to_owned(), c));
            }
            continue;
        }
        if let (Some(open), Some(close)) = (line.find('('), line.rfind(')')) {
            if open < close {
                let id = &line[..open];
                let inner = &line[open + 1..close];
                let name = inner
                    .trim_start_matches("[<p>")
                    .trim_end_matches("</p>]")
                    .to_owned();
                ids.insert(id.to_owned(), name.clone());
                d.nodes.push(name);
            }
        }
    }
    for e in &mut d.edges {
        if let Some(n) = ids.get(&e.0) {
            e.0 = n.clone();
        }
        if let Some(n) = ids.get(&e.1) {
            e.1 = n.clone();
        }
    }
    d
}

/// Give each subgraph node of `d` without a drawing of its own the one its Mermaid text
/// describes (`mermaids` by namespace, `parent|child`), every level.
fn attach(d: &mut Drawing, ns: &str, mermaids: &BTreeMap<String, String>) {
    for node in &mut d.nodes {
        let key = if ns.is_empty() {
            node.id.clone()
        } else {
            format!("{ns}|{}", node.id)
        };
        if node.subgraph.is_none() {
            if let Some(text) = mermaids.get(&key) {
                node.subgraph = Some(Arc::new(parse_mermaid(text).into_drawing()));
            }
        }
        if let Some(sub) = &mut node.subgraph {
            attach(Arc::make_mut(sub), &key, mermaids);
        }
    }
}

/// The drawing data of `g` with its subgraphs expanded `depth` levels (`None`: all).
pub(crate) fn drawing(g: &dyn HostedGraph, depth: Option<usize>) -> Value {
    let mut d = g.draw();
    let mermaids: BTreeMap<String, String> = g.subgraph_mermaids().into_iter().collect();
    attach(&mut d, "", &mermaids);
    let xray = depth.map_or(XRay::All, XRay::Depth);
    let mut out = GraphView::from_drawing(&d, xray).to_json();
    // Node metadata (the interrupts a graph was compiled with) from the plain drawing.
    let plain = g.drawing();
    let metadata: BTreeMap<&str, &Value> = plain["nodes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|n| Some((n["id"].as_str()?, n.get("metadata")?)))
        .collect();
    if let Some(nodes) = out["nodes"].as_array_mut() {
        for n in nodes {
            let m = n["id"]
                .as_str()
                .and_then(|id| metadata.get(id))
                .map(|m| (*m).clone());
            if let (Some(m), Value::Object(o)) = (m, n) {
                o.insert("metadata".into(), m);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHILD: &str = "---\nconfig:\n  flowchart:\n    curve: linear\n---\ngraph TD;\n\t__start__([<p>__start__</p>]):::first\n\tplan(plan)\n\tact(act)\n\t__end__([<p>__end__</p>]):::last\n\t__start__ --> plan;\n\tact --> __end__;\n\tplan -.-> act;\n\tplan -. &nbsp;done&nbsp; .-> __end__;\n\tclassDef default fill:#f2f0ff,line-height:1.2\n";

    #[test]
    fn mermaid_reads_back() {
        let d = parse_mermaid(CHILD);
        assert_eq!(d.nodes, ["__start__", "plan", "act", "__end__"]);
        assert!(d.edges.contains(&("plan".into(), "__end__".into(), true)));
        assert!(d.edges.contains(&("__start__".into(), "plan".into(), false)));
    }

    #[test]
    fn a_subgraph_from_mermaid_is_expanded_as_core_expands_one() {
        let mut parent = Drawing::new(
            "parent",
            ["team", "after"]
                .into_iter()
                .map(|id| DrawNode {
                    id: id.into(),
                    kind: DrawNodeKind::Node,
                    subgraph: None,
                })
                .collect(),
            [("__start__", "team"), ("team", "after"), ("after", "__end__")].map(|(a, b)| DrawEdge {
                source: a.into(),
                target: b.into(),
                conditional: false,
                label: None,
            }),
        );
        let mermaids = BTreeMap::from([("team".to_owned(), CHILD.to_owned())]);
        attach(&mut parent, "", &mermaids);
        let v = GraphView::from_drawing(&parent, XRay::All);
        let ids: Vec<&str> = v.nodes.iter().map(|n| n.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "__start__",
                "after",
                "__end__",
                "team:plan",
                "team:act",
                "team:__end__"
            ]
        );
        let has = |a: &str, b: &str| v.edges.iter().any(|e| e.source == a && e.target == b);
        assert!(
            has("__start__", "team:plan") && has("team:__end__", "after"),
            "{v:?}"
        );
    }
}
