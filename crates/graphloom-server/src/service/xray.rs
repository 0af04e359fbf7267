//! The `xray` drawing of a graph (`GET /assistants/{id}/graph?xray=true`, what LangGraph
//! Studio asks for): every subgraph node replaced by its graph's nodes, `<node>:<child>`,
//! to a depth. Edges into a subgraph node go to its first nodes, edges out of it leave
//! from its last ones (those that reach its end); the subgraph's own start and end go.
//!
//! A subgraph's structure comes from its Mermaid text (the drawing graphloom-core makes
//! of every graph), read back here.

use crate::host::HostedGraph;
use serde_json::{json, Value};
use std::collections::BTreeMap;

const START: &str = "__start__";
const END: &str = "__end__";

/// A drawing: node names (in order) and edges `(source, target, conditional)`.
#[derive(Debug, Default, PartialEq)]
struct Drawing {
    nodes: Vec<String>,
    edges: Vec<(String, String, bool)>,
}

/// Read a graph back from its Mermaid text (nodes `\tid(name)`, edges `a --> b;`,
/// `a -.-> b;`, `a -. label .-> b;`).
fn parse_mermaid(text: &str) -> Drawing {
    let mut ids = BTreeMap::new();
    let mut d = Drawing::default();
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

/// Replace each subgraph node of `d` (those in `children`, by namespace below `ns`) by
/// its nodes, `depth` levels down.
fn expand(d: Drawing, ns: &str, children: &BTreeMap<String, String>, depth: usize, prefix: &str) -> Drawing {
    if depth == 0 {
        return d;
    }
    let mut out = Drawing::default();
    let mut firsts: BTreeMap<String, Vec<(String, bool)>> = BTreeMap::new();
    let mut lasts: BTreeMap<String, Vec<(String, bool)>> = BTreeMap::new();
    for node in &d.nodes {
        let key = if ns.is_empty() {
            node.clone()
        } else {
            format!("{ns}|{node}")
        };
        let full = format!("{prefix}{node}");
        match children.get(&key).filter(|_| node != START && node != END) {
            Some(mermaid) => {
                let inner = expand(parse_mermaid(mermaid), &key, children, depth - 1, "");
                let inner_prefix = format!("{full}:");
                for n in inner.nodes.iter().filter(|n| *n != START && *n != END) {
                    out.nodes.push(format!("{inner_prefix}{n}"));
                }
                for (a, b, c) in &inner.edges {
                    match (a.as_str(), b.as_str()) {
                        (START, END) => {}
                        (START, _) => firsts
                            .entry(full.clone())
                            .or_default()
                            .push((format!("{inner_prefix}{b}"), *c)),
                        (_, END) => lasts
                            .entry(full.clone())
                            .or_default()
                            .push((format!("{inner_prefix}{a}"), *c)),
                        _ => out
                            .edges
                            .push((format!("{inner_prefix}{a}"), format!("{inner_prefix}{b}"), *c)),
                    }
                }
            }
            None => out.nodes.push(full),
        }
    }
    for (a, b, c) in d.edges {
        let (a, b) = (format!("{prefix}{a}"), format!("{prefix}{b}"));
        let sources = lasts.get(&a).cloned().unwrap_or_else(|| vec![(a.clone(), false)]);
        let targets = firsts
            .get(&b)
            .cloned()
            .unwrap_or_else(|| vec![(b.clone(), false)]);
        for (s, c1) in &sources {
            for (t, c2) in &targets {
                out.edges.push((s.clone(), t.clone(), c || *c1 || *c2));
            }
        }
    }
    out.edges.sort();
    out.edges.dedup();
    out
}

/// The drawing data of `g` with its subgraphs expanded `depth` levels (`None`: all).
pub(crate) fn drawing(g: &dyn HostedGraph, depth: Option<usize>) -> Value {
    let base = g.drawing();
    let nodes: Vec<String> = base["nodes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|n| n["id"].as_str().map(str::to_owned))
        .collect();
    let edges = base["edges"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| {
            Some((
                e["source"].as_str()?.to_owned(),
                e["target"].as_str()?.to_owned(),
                e["conditional"].as_bool().unwrap_or(false),
            ))
        })
        .collect();
    let children: BTreeMap<String, String> = g.subgraph_mermaids().into_iter().collect();
    let d = expand(
        Drawing { nodes, edges },
        "",
        &children,
        depth.unwrap_or(usize::MAX),
        "",
    );
    let nodes: Vec<Value> = d
        .nodes
        .iter()
        .map(|n| {
            if n == START || n == END {
                json!({"id": n, "type": "schema", "data": n})
            } else {
                let name = n.rsplit(':').next().unwrap_or(n);
                json!({"id": n, "type": "runnable", "data": {"id": ["graphloom", "graph", "Node"], "name": name}})
            }
        })
        .collect();
    let edges: Vec<Value> = d
        .edges
        .iter()
        .map(|(s, t, c)| json!({"source": s, "target": t, "conditional": c}))
        .collect();
    json!({"nodes": nodes, "edges": edges})
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
    fn a_subgraph_node_becomes_its_nodes() {
        let parent = Drawing {
            nodes: vec![
                "__start__".into(),
                "team".into(),
                "after".into(),
                "__end__".into(),
            ],
            edges: vec![
                ("__start__".into(), "team".into(), false),
                ("team".into(), "after".into(), false),
                ("after".into(), "__end__".into(), false),
            ],
        };
        let children = BTreeMap::from([("team".to_owned(), CHILD.to_owned())]);
        let d = expand(parent, "", &children, usize::MAX, "");
        assert_eq!(
            d.nodes,
            ["__start__", "team:plan", "team:act", "after", "__end__"]
        );
        assert!(d.edges.contains(&("__start__".into(), "team:plan".into(), false)));
        assert!(d.edges.contains(&("team:act".into(), "after".into(), false)));
        assert!(d.edges.contains(&("team:plan".into(), "after".into(), true)));
        assert!(d.edges.contains(&("team:plan".into(), "team:act".into(), true)));
    }
}
