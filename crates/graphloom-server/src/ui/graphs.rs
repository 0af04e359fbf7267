//! The graphs page: each served graph drawn as SVG (subgraphs expand on click), with a
//! form that starts a run of it.

use super::{error_page, fragment, Q};
use crate::api::auth::Owner;
use crate::error::ApiError;
use crate::state::AppRef;
use axum::extract::{Path, State};
use axum::response::Response;
use graphloom_core::draw::{DrawNodeKind, SvgOptions};
use maud::{html, Markup, PreEscaped};

/// Subgraph paths to draw expanded, from `expand=a,b|c`.
fn options(q: &Q) -> SvgOptions {
    let mut o = SvgOptions::new();
    if let Some(list) = q.get("expand") {
        for p in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            o = o.expand(p);
        }
    }
    o
}

/// A graph's SVG: trusted markup, every name in it escaped by the renderer.
pub(crate) fn svg(state: &AppRef, graph_id: &str, options: &SvgOptions) -> Option<Markup> {
    let g = state.graphs.get(graph_id)?;
    let mut drawing = g.draw();
    drawing.name = graph_id.to_owned();
    Some(PreEscaped(drawing.to_svg(options)))
}

/// `GET /ui/frag/graphs`.
pub(crate) async fn page(State(state): State<AppRef>, _owner: Owner, q: Q) -> Response {
    let options = options(&q);
    let cards: Vec<Markup> = state
        .graphs
        .iter()
        .map(|(id, g)| {
            let drawing = g.draw();
            let nodes = drawing.nodes.iter().filter(|n| n.kind == DrawNodeKind::Node).count();
            let subgraphs = drawing.subgraph_paths();
            let sample = state
                .samples
                .get(id)
                .map(|v| serde_json::to_string_pretty(v).unwrap_or_default())
                .unwrap_or_else(|| "{}".to_owned());
            html! {
                section.card.graph data-graph=(id) id={ "graph-" (id) } {
                    h2 { (id) }
                    p.muted {
                        @if let Some(m) = state.models.get(id) { span.badge.model title="the model this graph answers with" { "model: " (m) } " · " }
                        (nodes) " nodes"
                        @if !subgraphs.is_empty() { " · subgraphs: " (subgraphs.join(", ")) " (click one to expand it)" }
                        " · " a href={ "/ui/threads?graph=" (id) } data-nav { "threads" }
                    }
                    div.svg-wrap data-graph-svg=(id) { (svg(&state, id, &options).unwrap_or_default()) }
                    details.start-run {
                        summary { "Start a run" }
                        form.start-run data-graph=(id) {
                            label { "Input (JSON)" textarea name="input" rows="10" spellcheck="false" { (sample) } }
                            button type="submit" { "Start run" }
                            span.form-error.error {}
                        }
                    }
                }
            }
        })
        .collect();
    fragment(html! {
        h1 { "Graphs" }
        @if cards.is_empty() { p.muted { "This server hosts no graph." } }
        @for c in cards { (c) }
    })
}

/// `GET /ui/frag/graphs/{graph_id}/svg?expand=..`: one drawing, for expanding subgraphs.
pub(crate) async fn svg_fragment(
    State(state): State<AppRef>,
    _owner: Owner,
    Path(graph_id): Path<String>,
    q: Q,
) -> Response {
    match svg(&state, &graph_id, &options(&q)) {
        Some(m) => fragment(m),
        None => error_page(&ApiError::not_found(format!("graph {graph_id}"))),
    }
}
