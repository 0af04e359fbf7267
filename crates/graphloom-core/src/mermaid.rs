//! Mermaid drawing of a compiled graph, from the same [`Drawing`] the SVG renderer lays out.

use crate::draw::{DrawNodeKind, Drawing};
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
/// (to their declared destinations) and declared `Command` destinations, labelled with
/// their path-map key where it differs from the target, else their router's name; START and
/// END as round nodes.
pub(crate) fn draw(d: &Drawing) -> String {
    let mut out = String::from("---\nconfig:\n  flowchart:\n    curve: linear\n---\ngraph TD;\n");
    for n in &d.nodes {
        let _ = match n.kind {
            DrawNodeKind::Start => writeln!(out, "\t{}([<p>{}</p>]):::first", id(&n.id), n.id),
            DrawNodeKind::End => writeln!(out, "\t{}([<p>{}</p>]):::last", id(&n.id), n.id),
            _ => writeln!(out, "\t{}({})", id(&n.id), n.id),
        };
    }
    let mut lines = BTreeSet::new();
    for e in &d.edges {
        let line = match (&e.label, e.conditional) {
            (Some(key), true) => format!("\t{} -. &nbsp;{key}&nbsp; .-> {};", id(&e.source), id(&e.target)),
            (None, true) => format!("\t{} -.-> {};", id(&e.source), id(&e.target)),
            (_, false) => format!("\t{} --> {};", id(&e.source), id(&e.target)),
        };
        lines.insert(line);
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
