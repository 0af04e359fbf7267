//! A layered (Sugiyama-style) top-down layout: cycles broken by the boxes' order (an edge to
//! an earlier box points back up), ranks by longest path, long edges split into dummy points, crossings reduced
//! by barycenter sweeps, x positions balanced between the layers above and below.
//!
//! Small graphs (tens of nodes) are what it is for: every step is at most quadratic.

use std::collections::VecDeque;

/// Vertical space between layers.
const RANK_SEP: f64 = 48.0;
/// Horizontal space between boxes of one layer.
const NODE_SEP: f64 = 28.0;
/// Width of the point a long edge passes through on a layer it crosses.
const DUMMY_W: f64 = 12.0;
/// Space around the drawing.
const MARGIN: f64 = 16.0;

/// What to lay out: box sizes, edges between boxes (by index).
pub(crate) struct LayoutInput {
    /// `(width, height)` of each box.
    pub sizes: Vec<(f64, f64)>,
    /// `(source, target)`; an edge to a box of a lower index than its source's points up.
    pub edges: Vec<(usize, usize)>,
    /// Laid out first (the entry): the initial order of each layer is breadth first from here.
    pub entry: Option<usize>,
    /// Forced below everything else (the exit).
    pub exit: Option<usize>,
}

/// Where everything went. Coordinates are of box centres; the drawing spans
/// `0..width` by `0..height`, margins included.
pub(crate) struct Layout {
    /// Box centres.
    pub pos: Vec<(f64, f64)>,
    /// Each edge's points, from its source's border to its target's border (a self-loop
    /// has none: the renderer draws it beside its box).
    pub paths: Vec<Vec<(f64, f64)>>,
    /// Whether the edge points up (it closes a cycle).
    pub back: Vec<bool>,
    /// Total width.
    pub width: f64,
    /// Total height.
    pub height: f64,
}

/// A point of the layered graph: a box, or a dummy a long edge passes through.
struct Vertex {
    w: f64,
    h: f64,
    rank: usize,
    x: f64,
}

pub(crate) fn layout(input: &LayoutInput) -> Layout {
    let n = input.sizes.len();
    if n == 0 {
        return Layout {
            pos: Vec::new(),
            paths: Vec::new(),
            back: Vec::new(),
            width: 2.0 * MARGIN,
            height: 2.0 * MARGIN,
        };
    }
    let back = back_edges(&input.edges);
    let rank = ranks(n, &input.edges, &back, input.exit);
    let mut verts: Vec<Vertex> = input
        .sizes
        .iter()
        .zip(&rank)
        .map(|(&(w, h), &r)| Vertex {
            w,
            h,
            rank: r,
            x: 0.0,
        })
        .collect();
    // Each edge as a chain of vertices, from top to bottom.
    let mut chains: Vec<Vec<usize>> = Vec::with_capacity(input.edges.len());
    for (i, &(s, t)) in input.edges.iter().enumerate() {
        if s == t {
            chains.push(Vec::new());
            continue;
        }
        let (top, bottom) = if back[i] { (t, s) } else { (s, t) };
        let mut chain = vec![top];
        for r in rank[top] + 1..rank[bottom] {
            verts.push(Vertex {
                w: DUMMY_W,
                h: 0.0,
                rank: r,
                x: 0.0,
            });
            chain.push(verts.len() - 1);
        }
        chain.push(bottom);
        chains.push(chain);
    }
    let layers = order_layers(&verts, &chains, input.entry);
    let (ys, heights) = layer_ys(&verts, &layers);
    place_x(&mut verts, &layers, &chains);
    let min_left = verts
        .iter()
        .map(|v| v.x - v.w / 2.0)
        .fold(f64::INFINITY, f64::min);
    let shift = MARGIN - min_left;
    for v in &mut verts {
        v.x += shift;
    }
    let width = verts.iter().map(|v| v.x + v.w / 2.0).fold(0.0, f64::max) + MARGIN;
    let height = ys.last().zip(heights.last()).map_or(0.0, |(y, h)| y + h / 2.0) + MARGIN;
    let pos: Vec<(f64, f64)> = (0..n).map(|i| (verts[i].x, ys[verts[i].rank])).collect();
    let paths = edge_paths(input, &verts, &chains, &back, &pos, &ys);
    Layout {
        pos,
        paths,
        back,
        width,
        height,
    }
}

/// Edges that point back in the boxes' order (the order they were declared in: an
/// author writes a pipeline top down), so that turning them around leaves no cycle.
fn back_edges(edges: &[(usize, usize)]) -> Vec<bool> {
    edges.iter().map(|&(s, t)| s != t && t < s).collect()
}

/// Longest-path ranks over the edges with back edges turned around; the exit below all.
fn ranks(n: usize, edges: &[(usize, usize)], back: &[bool], exit: Option<usize>) -> Vec<usize> {
    let mut indeg = vec![0usize; n];
    let mut succ: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, &(s, t)) in edges.iter().enumerate() {
        if s == t {
            continue;
        }
        let (a, b) = if back[i] { (t, s) } else { (s, t) };
        succ[a].push(b);
        indeg[b] += 1;
    }
    let mut rank = vec![0usize; n];
    let mut queue: VecDeque<usize> = (0..n).filter(|&v| indeg[v] == 0).collect();
    while let Some(v) = queue.pop_front() {
        for &w in &succ[v] {
            rank[w] = rank[w].max(rank[v] + 1);
            indeg[w] -= 1;
            if indeg[w] == 0 {
                queue.push_back(w);
            }
        }
    }
    if let Some(x) = exit {
        let below = (0..n).filter(|&v| v != x).map(|v| rank[v] + 1).max().unwrap_or(0);
        rank[x] = rank[x].max(below);
    }
    rank
}

/// Vertices by layer, ordered to reduce crossings.
fn order_layers(verts: &[Vertex], chains: &[Vec<usize>], entry: Option<usize>) -> Vec<Vec<usize>> {
    let depth = verts.iter().map(|v| v.rank).max().unwrap_or(0) + 1;
    // Neighbours in the layer above and below.
    let mut up: Vec<Vec<usize>> = vec![Vec::new(); verts.len()];
    let mut down: Vec<Vec<usize>> = vec![Vec::new(); verts.len()];
    for c in chains {
        for w in c.windows(2) {
            down[w[0]].push(w[1]);
            up[w[1]].push(w[0]);
        }
    }
    // Initial order: breadth-first from the entry along forward edges, then the rest.
    let mut seen = vec![false; verts.len()];
    let mut order: Vec<usize> = Vec::with_capacity(verts.len());
    let mut queue: VecDeque<usize> = entry.into_iter().collect();
    loop {
        while let Some(v) = queue.pop_front() {
            if seen[v] {
                continue;
            }
            seen[v] = true;
            order.push(v);
            for &w in &down[v] {
                if !seen[w] {
                    queue.push_back(w);
                }
            }
        }
        match (0..verts.len()).find(|&v| !seen[v]) {
            Some(v) => queue.push_back(v),
            None => break,
        }
    }
    let mut layers: Vec<Vec<usize>> = vec![Vec::new(); depth];
    for v in order {
        layers[verts[v].rank].push(v);
    }
    let mut best = layers.clone();
    let mut best_crossings = crossings(&layers, &down, verts.len());
    for sweep in 0..16 {
        if sweep % 2 == 0 {
            for r in 1..depth {
                reorder(&mut layers, r, r - 1, &up, verts.len());
            }
        } else {
            for r in (0..depth.saturating_sub(1)).rev() {
                reorder(&mut layers, r, r + 1, &down, verts.len());
            }
        }
        let c = crossings(&layers, &down, verts.len());
        if c < best_crossings {
            best_crossings = c;
            best = layers.clone();
        }
        if best_crossings == 0 {
            break;
        }
    }
    best
}

/// Sort layer `r` by the mean position of each vertex's neighbours in layer `fixed`.
fn reorder(layers: &mut [Vec<usize>], r: usize, fixed: usize, nbrs: &[Vec<usize>], n: usize) {
    let mut pos = vec![0.0f64; n];
    for (i, &v) in layers[fixed].iter().enumerate() {
        pos[v] = i as f64;
    }
    let mut keyed: Vec<(f64, usize, usize)> = layers[r]
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            let ns = &nbrs[v];
            let key = if ns.is_empty() {
                i as f64
            } else {
                ns.iter().map(|&w| pos[w]).sum::<f64>() / ns.len() as f64
            };
            (key, i, v)
        })
        .collect();
    keyed.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    layers[r] = keyed.into_iter().map(|(_, _, v)| v).collect();
}

/// Edge crossings between adjacent layers.
fn crossings(layers: &[Vec<usize>], down: &[Vec<usize>], n: usize) -> usize {
    let mut pos = vec![0usize; n];
    for layer in layers {
        for (i, &v) in layer.iter().enumerate() {
            pos[v] = i;
        }
    }
    let mut total = 0;
    for layer in layers {
        let segs: Vec<(usize, usize)> = layer
            .iter()
            .flat_map(|&v| down[v].iter().map(move |&w| (v, w)))
            .map(|(v, w)| (pos[v], pos[w]))
            .collect();
        for (i, a) in segs.iter().enumerate() {
            for b in &segs[i + 1..] {
                if (a.0 < b.0 && a.1 > b.1) || (a.0 > b.0 && a.1 < b.1) {
                    total += 1;
                }
            }
        }
    }
    total
}

/// The y of each layer's centre line, and each layer's height.
fn layer_ys(verts: &[Vertex], layers: &[Vec<usize>]) -> (Vec<f64>, Vec<f64>) {
    let heights: Vec<f64> = layers
        .iter()
        .map(|l| l.iter().map(|&v| verts[v].h).fold(0.0, f64::max))
        .collect();
    let mut ys = Vec::with_capacity(layers.len());
    let mut y = MARGIN;
    for h in &heights {
        ys.push(y + h / 2.0);
        y += h + RANK_SEP;
    }
    (ys, heights)
}

/// Minimum distance between the centres of neighbours `a` (left) and `b` in a layer.
fn gap(verts: &[Vertex], a: usize, b: usize) -> f64 {
    let sep = if verts[a].h == 0.0 || verts[b].h == 0.0 {
        NODE_SEP / 2.0
    } else {
        NODE_SEP
    };
    verts[a].w / 2.0 + verts[b].w / 2.0 + sep
}

/// x positions: packed, then pulled toward the neighbours above and below a few times,
/// keeping each layer's order and gaps.
fn place_x(verts: &mut [Vertex], layers: &[Vec<usize>], chains: &[Vec<usize>]) {
    let mut up: Vec<Vec<usize>> = vec![Vec::new(); verts.len()];
    let mut down: Vec<Vec<usize>> = vec![Vec::new(); verts.len()];
    for c in chains {
        for w in c.windows(2) {
            down[w[0]].push(w[1]);
            up[w[1]].push(w[0]);
        }
    }
    for layer in layers {
        let mut x = 0.0;
        for (i, &v) in layer.iter().enumerate() {
            if i > 0 {
                x += gap(verts, layer[i - 1], v);
            }
            verts[v].x = x;
        }
    }
    // Centre each layer on the widest one before pulling.
    let center = |verts: &[Vertex], layer: &[usize]| -> f64 {
        match (layer.first(), layer.last()) {
            (Some(&a), Some(&b)) => (verts[a].x + verts[b].x) / 2.0,
            _ => 0.0,
        }
    };
    for layer in layers {
        let c = center(verts, layer);
        for &v in layer {
            verts[v].x -= c;
        }
    }
    for round in 0..12 {
        let downward = round % 2 == 0;
        let seq: Vec<usize> = if downward {
            (0..layers.len()).collect()
        } else {
            (0..layers.len()).rev().collect()
        };
        for r in seq {
            let nbrs = if downward { &up } else { &down };
            let desired: Vec<f64> = layers[r]
                .iter()
                .map(|&v| {
                    let ns = &nbrs[v];
                    // Both sides pull a box with neighbours on both.
                    let other = if downward { &down[v] } else { &up[v] };
                    let all: Vec<usize> = if round >= 8 {
                        ns.iter().chain(other.iter()).copied().collect()
                    } else {
                        ns.clone()
                    };
                    if all.is_empty() {
                        verts[v].x
                    } else {
                        let mut xs: Vec<f64> = all.iter().map(|&w| verts[w].x).collect();
                        xs.sort_by(f64::total_cmp);
                        let m = xs.len() / 2;
                        if xs.len() % 2 == 1 {
                            xs[m]
                        } else {
                            (xs[m - 1] + xs[m]) / 2.0
                        }
                    }
                })
                .collect();
            let layer = &layers[r];
            let k = layer.len();
            // Left-packed and right-packed placements; their mean keeps order and gaps.
            let mut left = desired.clone();
            for i in 1..k {
                left[i] = left[i].max(left[i - 1] + gap(verts, layer[i - 1], layer[i]));
            }
            let mut right = desired.clone();
            for i in (0..k.saturating_sub(1)).rev() {
                right[i] = right[i].min(right[i + 1] - gap(verts, layer[i], layer[i + 1]));
            }
            for i in 0..k {
                verts[layer[i]].x = (left[i] + right[i]) / 2.0;
            }
        }
    }
}

/// Each edge's points: from its source's border, through its dummies, to its target's
/// border. Several edges at one side of a box leave from points spread along that side,
/// ordered by where they go, so edges between the same two boxes do not overlap.
fn edge_paths(
    input: &LayoutInput,
    verts: &[Vertex],
    chains: &[Vec<usize>],
    back: &[bool],
    pos: &[(f64, f64)],
    ys: &[f64],
) -> Vec<Vec<(f64, f64)>> {
    let n = pos.len();
    // Attachments per box side: (edge, the x of the point the edge goes to next).
    let mut bottom: Vec<Vec<(usize, f64)>> = vec![Vec::new(); n];
    let mut top: Vec<Vec<(usize, f64)>> = vec![Vec::new(); n];
    for (i, c) in chains.iter().enumerate() {
        if c.len() < 2 {
            continue;
        }
        let (first, second) = (c[0], c[1]);
        let (last, before) = (c[c.len() - 1], c[c.len() - 2]);
        bottom[first].push((i, verts[second].x));
        top[last].push((i, verts[before].x));
    }
    let mut bottom_x = vec![0.0f64; chains.len()];
    let mut top_x = vec![0.0f64; chains.len()];
    let spread = |side: &mut Vec<(usize, f64)>, out: &mut [f64], v: usize| {
        side.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
        let k = side.len();
        let span = (input.sizes[v].0 * 0.6).min(16.0 * k as f64);
        for (j, &(e, _)) in side.iter().enumerate() {
            let off = if k == 1 {
                0.0
            } else {
                -span / 2.0 + span * j as f64 / (k - 1) as f64
            };
            out[e] = pos[v].0 + off;
        }
    };
    for v in 0..n {
        spread(&mut bottom[v], &mut bottom_x, v);
        spread(&mut top[v], &mut top_x, v);
    }
    chains
        .iter()
        .enumerate()
        .map(|(i, c)| {
            if c.len() < 2 {
                return Vec::new();
            }
            let (first, last) = (c[0], c[c.len() - 1]);
            let mut pts = Vec::with_capacity(c.len());
            pts.push((bottom_x[i], pos[first].1 + input.sizes[first].1 / 2.0));
            for &d in &c[1..c.len() - 1] {
                pts.push((verts[d].x, ys[verts[d].rank]));
            }
            pts.push((top_x[i], pos[last].1 - input.sizes[last].1 / 2.0));
            if back[i] {
                pts.reverse();
            }
            pts
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn boxes(n: usize) -> Vec<(f64, f64)> {
        vec![(80.0, 30.0); n]
    }

    #[test]
    fn a_chain_goes_down() {
        let l = layout(&LayoutInput {
            sizes: boxes(3),
            edges: vec![(0, 1), (1, 2)],
            entry: Some(0),
            exit: Some(2),
        });
        assert!(l.pos[0].1 < l.pos[1].1 && l.pos[1].1 < l.pos[2].1);
        assert!((l.pos[0].0 - l.pos[2].0).abs() < 1e-6, "a chain is straight");
        assert!(l.back.iter().all(|b| !b));
    }

    #[test]
    fn a_loop_points_back_up_and_the_exit_is_last() {
        // 0 -> 1 -> 2 -> 1, 1 -> 3 (exit)
        let l = layout(&LayoutInput {
            sizes: boxes(4),
            edges: vec![(0, 1), (1, 2), (2, 1), (1, 3)],
            entry: Some(0),
            exit: Some(3),
        });
        assert_eq!(l.back, vec![false, false, true, false]);
        assert!(l.pos[3].1 > l.pos[2].1, "the exit is below every box");
        let up = &l.paths[2];
        assert!(
            up.first().unwrap().1 > up.last().unwrap().1,
            "the back edge goes up"
        );
        // The two edges between 1 and 2 do not share their end points.
        assert_ne!(l.paths[1].first(), l.paths[2].last());
    }

    #[test]
    fn boxes_of_a_layer_do_not_overlap() {
        let l = layout(&LayoutInput {
            sizes: boxes(6),
            edges: vec![(0, 1), (0, 2), (0, 3), (0, 4), (1, 5), (2, 5), (3, 5), (4, 5)],
            entry: Some(0),
            exit: Some(5),
        });
        let mut xs: Vec<f64> = (1..5).map(|i| l.pos[i].0).collect();
        xs.sort_by(f64::total_cmp);
        for w in xs.windows(2) {
            assert!(w[1] - w[0] >= 80.0 + NODE_SEP - 1e-6, "{xs:?}");
        }
        assert!(l
            .pos
            .iter()
            .all(|p| p.0 >= MARGIN + 40.0 - 1e-6 && p.0 <= l.width - MARGIN - 40.0 + 1e-6));
    }

    #[test]
    fn a_long_edge_bends_through_its_layers() {
        let l = layout(&LayoutInput {
            sizes: boxes(4),
            edges: vec![(0, 1), (1, 2), (2, 3), (0, 3)],
            entry: Some(0),
            exit: Some(3),
        });
        assert_eq!(l.paths[3].len(), 4, "two dummies on the layers of 1 and 2");
    }
}
