//! SVG output of a [`Drawing`]: boxes, dotted conditional edges with arrowheads, labels,
//! subgraphs as boxes (collapsed) or as framed clusters holding their own layout
//! (expanded). Every box carries `data-node` (its path: `child|node` inside subgraph
//! `child`) so a page can highlight it, and colours are attributes, so the document looks
//! the same in a browser and in a rasteriser.

use super::layout::{layout, LayoutInput};
use super::{DrawNodeKind, Drawing};
use std::collections::{BTreeSet, HashMap};
use std::fmt::Write as _;

/// How to draw.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SvgOptions {
    /// Draw every subgraph expanded.
    pub expand_all: bool,
    /// Draw these subgraphs expanded, by path (`child`, `child|grandchild`; see
    /// [`Drawing::subgraph_paths`]).
    pub expand: BTreeSet<String>,
}

impl SvgOptions {
    /// Subgraphs collapsed.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Draw every subgraph expanded.
    #[must_use]
    pub fn expand_all(mut self) -> Self {
        self.expand_all = true;
        self
    }

    /// Draw the subgraph at `path` expanded.
    #[must_use]
    pub fn expand(mut self, path: impl Into<String>) -> Self {
        self.expand.insert(path.into());
        self
    }

    fn expands(&self, path: &str) -> bool {
        self.expand_all || self.expand.contains(path)
    }
}

const FONT_SIZE: f64 = 13.0;
const BOX_H: f64 = 34.0;
const PAD_X: f64 = 14.0;
const CLUSTER_PAD: f64 = 12.0;
const CLUSTER_TITLE: f64 = 26.0;
const FONT: &str = "DejaVu Sans, Liberation Sans, Helvetica, Arial, sans-serif";

const NODE_FILL: &str = "#f2f0ff";
const NODE_STROKE: &str = "#7c6fd6";
const END_FILL: &str = "#bfb6fc";
const EDGE: &str = "#5b5b6b";
const LABEL: &str = "#1f1d2b";

/// Width of `text` in pixels at [`FONT_SIZE`], estimated per character (no font needed).
fn text_width(text: &str) -> f64 {
    let em: f64 = text
        .chars()
        .map(|c| match c {
            'i' | 'l' | 'j' | '.' | ',' | ':' | ';' | '\'' | '|' | '!' | 'I' => 0.32,
            'f' | 't' | 'r' | ' ' => 0.42,
            'm' | 'w' | 'M' | 'W' => 0.92,
            '_' => 0.52,
            c if c.is_ascii_uppercase() => 0.72,
            c if c.is_ascii_digit() => 0.64,
            c if c.is_ascii() => 0.6,
            _ => 1.0,
        })
        .sum();
    em * FONT_SIZE
}

/// Escape text for SVG content and attribute values.
pub(crate) fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

fn f(x: f64) -> String {
    let r = (x * 10.0).round() / 10.0;
    if r == r.trunc() {
        format!("{}", r as i64)
    } else {
        format!("{r:.1}")
    }
}

/// A laid-out graph: its size and its elements, with the origin at its top left.
struct Block {
    w: f64,
    h: f64,
    body: String,
}

pub(super) fn render(d: &Drawing, options: &SvgOptions) -> String {
    let b = block(d, "", options);
    let mut out = String::new();
    let _ = write!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" class="gl-graph" data-graph="{name}" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="{FONT}" font-size="{FONT_SIZE}" role="img" aria-label="graph {name}">"#,
        name = esc(&d.name),
        w = f(b.w),
        h = f(b.h),
    );
    let _ = write!(
        out,
        r##"<defs><marker id="gl-arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="{EDGE}"/></marker></defs><rect class="gl-bg" x="0" y="0" width="{w}" height="{h}" fill="#ffffff"/>"##,
        w = f(b.w),
        h = f(b.h),
    );
    out.push_str(&b.body);
    out.push_str("</svg>");
    out
}

fn child_path(prefix: &str, id: &str) -> String {
    if prefix.is_empty() {
        id.to_owned()
    } else {
        format!("{prefix}|{id}")
    }
}

fn label_of(id: &str, kind: DrawNodeKind) -> &str {
    match kind {
        DrawNodeKind::Start => "START",
        DrawNodeKind::End => "END",
        DrawNodeKind::Node => id,
    }
}

fn block(d: &Drawing, prefix: &str, options: &SvgOptions) -> Block {
    let index: HashMap<&str, usize> = d
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.id.as_str(), i))
        .collect();
    // Expanded subgraphs are laid out first: their size is their box's.
    let children: Vec<Option<Block>> = d
        .nodes
        .iter()
        .map(|n| {
            let path = child_path(prefix, &n.id);
            n.subgraph
                .as_ref()
                .filter(|_| options.expands(&path))
                .map(|sub| block(sub, &path, options))
        })
        .collect();
    let sizes: Vec<(f64, f64)> = d
        .nodes
        .iter()
        .zip(&children)
        .map(|(n, child)| match child {
            Some(c) => {
                let title = text_width(&n.id) + 2.0 * CLUSTER_PAD;
                (
                    (c.w + 2.0 * CLUSTER_PAD).max(title),
                    c.h + CLUSTER_TITLE + CLUSTER_PAD,
                )
            }
            None => {
                let extra = if n.subgraph.is_some() { 18.0 } else { 0.0 };
                let w = text_width(label_of(&n.id, n.kind)) + 2.0 * PAD_X + extra;
                (w.max(64.0), BOX_H)
            }
        })
        .collect();
    let edges: Vec<(usize, &super::DrawEdge)> = d
        .edges
        .iter()
        .enumerate()
        .filter(|(_, e)| index.contains_key(e.source.as_str()) && index.contains_key(e.target.as_str()))
        .collect();
    let input = LayoutInput {
        sizes: sizes.clone(),
        edges: edges
            .iter()
            .map(|(_, e)| (index[e.source.as_str()], index[e.target.as_str()]))
            .collect(),
        entry: index.get(crate::START).copied(),
        exit: index.get(crate::END).copied(),
    };
    let l = layout(&input);
    // Expanded subgraphs' frames first, then edges, then boxes: an edge passing a frame
    // stays visible all the way (one hidden under a frame seemed to leave from it).
    let mut frames = String::new();
    let mut body = String::new();
    // Edges below boxes.
    for (k, (_, e)) in edges.iter().enumerate() {
        let (s, t) = input.edges[k];
        let path = if s == t {
            let (x, y) = l.pos[s];
            let r = x + sizes[s].0 / 2.0;
            format!(
                "M{} {} C{} {} {} {} {} {}",
                f(r),
                f(y - 7.0),
                f(r + 34.0),
                f(y - 24.0),
                f(r + 34.0),
                f(y + 24.0),
                f(r + 1.0),
                f(y + 7.0)
            )
        } else {
            curve(&l.paths[k])
        };
        let dash = if e.conditional {
            r#" stroke-dasharray="5 4""#
        } else {
            ""
        };
        let class = match (e.conditional, l.back[k]) {
            (true, true) => "gl-edge gl-conditional gl-back",
            (true, false) => "gl-edge gl-conditional",
            (false, true) => "gl-edge gl-back",
            (false, false) => "gl-edge",
        };
        let _ = write!(
            body,
            r#"<path class="{class}" data-source="{src}" data-target="{dst}" d="{path}" fill="none" stroke="{EDGE}" stroke-width="1.4"{dash} marker-end="url(#gl-arrow)"/>"#,
            src = esc(&child_path(prefix, &e.source)),
            dst = esc(&child_path(prefix, &e.target)),
        );
    }
    // A router's name on several edges from one node is said once.
    let mut said = std::collections::BTreeSet::new();
    for (k, (_, e)) in edges.iter().enumerate() {
        let Some(label) = &e.label else { continue };
        if !said.insert((e.source.as_str(), label.as_str())) {
            continue;
        }
        let (x, y) = label_point(&l.paths[k], l.pos[input.edges[k].0]);
        let w = text_width(label) * 0.85 + 8.0;
        let _ = write!(
            body,
            r##"<g class="gl-edge-label"><rect x="{}" y="{}" width="{}" height="16" rx="3" fill="#ffffff" fill-opacity="0.9"/><text x="{}" y="{}" text-anchor="middle" font-size="11" fill="{LABEL}">{}</text></g>"##,
            f(x - w / 2.0),
            f(y - 8.0),
            f(w),
            f(x),
            f(y + 4.0),
            esc(label)
        );
    }
    for (i, n) in d.nodes.iter().enumerate() {
        let (cx, cy) = l.pos[i];
        let (w, h) = sizes[i];
        let (x, y) = (cx - w / 2.0, cy - h / 2.0);
        let path = esc(&child_path(prefix, &n.id));
        match (&children[i], n.kind) {
            (Some(c), _) => {
                let _ = write!(
                    frames,
                    r##"<g class="gl-node gl-subgraph gl-expanded" data-node="{path}" data-subgraph="{path}"><rect x="{}" y="{}" width="{}" height="{}" rx="8" fill="#fbfaff" stroke="{NODE_STROKE}" stroke-width="1.2" stroke-dasharray="2 3"/><text x="{}" y="{}" font-weight="bold" fill="{LABEL}">{}</text><g transform="translate({} {})">{}</g></g>"##,
                    f(x),
                    f(y),
                    f(w),
                    f(h),
                    f(x + CLUSTER_PAD),
                    f(y + 18.0),
                    esc(&n.id),
                    f(x + (w - c.w) / 2.0),
                    f(y + CLUSTER_TITLE),
                    c.body
                );
            }
            (None, DrawNodeKind::Start | DrawNodeKind::End) => {
                let (fill, class) = if n.kind == DrawNodeKind::Start {
                    ("#ffffff", "gl-node gl-start")
                } else {
                    (END_FILL, "gl-node gl-end")
                };
                let _ = write!(
                    body,
                    r#"<g class="{class}" data-node="{path}"><rect x="{}" y="{}" width="{}" height="{}" rx="{}" fill="{fill}" stroke="{NODE_STROKE}" stroke-width="1.2"/><text x="{}" y="{}" text-anchor="middle" fill="{LABEL}">{}</text></g>"#,
                    f(x),
                    f(y),
                    f(w),
                    f(h),
                    f(h / 2.0),
                    f(cx),
                    f(cy + FONT_SIZE * 0.35),
                    label_of(&n.id, n.kind)
                );
            }
            (None, _) => {
                let sub = n.subgraph.is_some();
                let class = if sub { "gl-node gl-subgraph" } else { "gl-node" };
                let data_sub = if sub {
                    format!(r#" data-subgraph="{path}""#)
                } else {
                    String::new()
                };
                let _ = write!(
                    body,
                    r#"<g class="{class}" data-node="{path}"{data_sub}><rect x="{}" y="{}" width="{}" height="{}" rx="6" fill="{NODE_FILL}" stroke="{NODE_STROKE}" stroke-width="1.2"/>"#,
                    f(x),
                    f(y),
                    f(w),
                    f(h)
                );
                if sub {
                    // A second frame and a plus: a graph inside, expandable.
                    let _ = write!(
                        body,
                        r#"<rect x="{}" y="{}" width="{}" height="{}" rx="4" fill="none" stroke="{NODE_STROKE}" stroke-width="0.8"/><text x="{}" y="{}" text-anchor="middle" font-weight="bold" fill="{NODE_STROKE}">+</text>"#,
                        f(x + 3.0),
                        f(y + 3.0),
                        f(w - 6.0),
                        f(h - 6.0),
                        f(x + w - 13.0),
                        f(cy + FONT_SIZE * 0.35)
                    );
                }
                let tx = if sub { cx - 8.0 } else { cx };
                let _ = write!(
                    body,
                    r#"<text x="{}" y="{}" text-anchor="middle" fill="{LABEL}">{}</text></g>"#,
                    f(tx),
                    f(cy + FONT_SIZE * 0.35),
                    esc(&n.id)
                );
            }
        }
    }
    frames.push_str(&body);
    Block {
        w: l.width,
        h: l.height,
        body: frames,
    }
}

/// A smooth path through `pts`: each segment a cubic curve leaving and entering
/// vertically, so edges flow top-down (or bottom-up for back edges).
fn curve(pts: &[(f64, f64)]) -> String {
    let mut d = String::new();
    let Some(&(x0, y0)) = pts.first() else {
        return d;
    };
    let _ = write!(d, "M{} {}", f(x0), f(y0));
    for w in pts.windows(2) {
        let ((ax, ay), (bx, by)) = (w[0], w[1]);
        let dy = (by - ay) / 2.0;
        let _ = write!(
            d,
            " C{} {} {} {} {} {}",
            f(ax),
            f(ay + dy),
            f(bx),
            f(by - dy),
            f(bx),
            f(by)
        );
    }
    d
}

/// Where an edge's label goes: the middle of its path (a self-loop's: right of its box).
fn label_point(pts: &[(f64, f64)], owner: (f64, f64)) -> (f64, f64) {
    match pts.len() {
        0 => (owner.0 + 60.0, owner.1),
        1 => pts[0],
        n if n % 2 == 1 => pts[n / 2],
        n => {
            let (a, b) = (pts[n / 2 - 1], pts[n / 2]);
            ((a.0 + b.0) / 2.0, (a.1 + b.1) / 2.0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::draw::{DrawEdge, DrawNode};
    use std::sync::Arc;

    fn edge(s: &str, t: &str, conditional: bool) -> DrawEdge {
        DrawEdge {
            source: s.into(),
            target: t.into(),
            conditional,
            label: None,
        }
    }

    fn node(id: &str) -> DrawNode {
        DrawNode {
            id: id.into(),
            kind: DrawNodeKind::Node,
            subgraph: None,
        }
    }

    #[test]
    fn names_are_escaped() {
        let d = Drawing::new(
            "<g>",
            vec![node("a<b>&\"c\"")],
            [
                edge("__start__", "a<b>&\"c\"", false),
                edge("a<b>&\"c\"", "__end__", false),
            ],
        );
        let svg = d.to_svg(&SvgOptions::new());
        assert!(!svg.contains("a<b>"), "{svg}");
        assert!(svg.contains("a&lt;b&gt;&amp;&quot;c&quot;"), "{svg}");
        assert!(svg.contains(r#"data-graph="&lt;g&gt;""#));
    }

    #[test]
    fn conditional_edges_are_dotted_and_subgraphs_expand() {
        let child = Drawing::new(
            "child",
            vec![node("inner")],
            [edge("__start__", "inner", false), edge("inner", "__end__", false)],
        );
        let mut sub = node("team");
        sub.subgraph = Some(Arc::new(child));
        let d = Drawing::new(
            "parent",
            vec![node("a"), sub],
            [
                edge("__start__", "a", false),
                edge("a", "team", true),
                edge("a", "__end__", true),
                edge("team", "a", false),
            ],
        );
        let collapsed = d.to_svg(&SvgOptions::new());
        assert_eq!(collapsed.matches("gl-conditional").count(), 2);
        assert!(collapsed.contains(r#"data-subgraph="team""#));
        assert!(!collapsed.contains(r#"data-node="team|inner""#));
        let open = d.to_svg(&SvgOptions::new().expand("team"));
        assert!(open.contains(r#"data-node="team|inner""#), "{open}");
        assert!(open.contains("gl-expanded"));
        assert_eq!(d.to_svg(&SvgOptions::new().expand_all()), open);
    }
}
