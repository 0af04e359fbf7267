//! Mermaid drawing of a compiled graph.

use crate::graph::spec::GraphInner;
use crate::state::State;
use crate::types::{END, START};
use std::collections::BTreeSet;
use std::fmt::Write as _;

fn id(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Mermaid `graph TD` text: solid arrows for edges and joins, dotted for conditional edges
/// and declared `Command` destinations; START and END as round nodes.
pub(crate) fn draw<S: State>(g: &GraphInner<S>) -> String {
    let mut out = String::from("---\nconfig:\n  flowchart:\n    curve: linear\n---\ngraph TD;\n");
    let _ = writeln!(out, "\t{}([<p>{START}</p>]):::first", id(START));
    for n in &g.node_names {
        let _ = writeln!(out, "\t{}({n})", id(n));
    }
    let _ = writeln!(out, "\t{}([<p>{END}</p>]):::last", id(END));
    let mut lines = BTreeSet::new();
    for (a, b) in &g.declared_edges {
        lines.insert(format!("\t{} --> {};", id(a), id(b)));
    }
    for j in &g.joins {
        for s in &j.sources {
            lines.insert(format!("\t{} --> {};", id(s), id(&j.target)));
        }
    }
    for (src, branches) in &g.branches {
        for b in branches {
            match &b.path_map {
                Some(map) => {
                    for (key, target) in map {
                        if key == target {
                            lines.insert(format!("\t{} -.-> {};", id(src), id(target)));
                        } else {
                            lines.insert(format!("\t{} -. &nbsp;{key}&nbsp; .-> {};", id(src), id(target)));
                        }
                    }
                }
                None => {
                    for target in g.node_names.iter().map(String::as_str).chain([END]) {
                        lines.insert(format!("\t{} -.-> {};", id(src), id(target)));
                    }
                }
            }
        }
    }
    for (name, spec) in &g.nodes {
        for d in &spec.destinations {
            lines.insert(format!("\t{} -.-> {};", id(name), id(d)));
        }
    }
    for l in lines {
        out.push_str(&l);
        out.push('\n');
    }
    out.push_str("\tclassDef default fill:#f2f0ff,line-height:1.2\n");
    out.push_str("\tclassDef first fill-opacity:0\n");
    out.push_str("\tclassDef last fill:#bfb6fc\n");
    out
}
