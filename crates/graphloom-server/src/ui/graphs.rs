//! The graphs page: each served graph drawn as SVG (subgraphs expand on click), with a
//! form that starts a run of it, and the owner's runs in flight (`/ui/frag/graphs/live`),
//! whose nodes the page lights as they run.

use super::access::Viewer;
use super::{error_page, fragment, Q};
use crate::api::auth::Owner;
use crate::api::error::ApiError;
use crate::models::{RunStatus, ThreadStatus};
use crate::service::{assistants, runs, threads};
use crate::state::AppRef;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::Json;
use graphloom_core::draw::{DrawNodeKind, SvgOptions};
use graphloom_server_db::ThreadQuery;
use maud::{html, Markup, PreEscaped};
use serde_json::{json, Value};

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
                    ul.live-runs hidden {}
                    details.start-run {
                        summary { "Start a run" }
                        form.start-run data-graph=(id) {
                            label { "Input (JSON)" textarea name="input" rows="10" spellcheck="false" { (sample) } }
                            label.inline { input type="checkbox" name="here"; " watch it here, on the graph" }
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
        None => error_page(ApiError::not_found(format!("graph {graph_id}"))),
    }
}

/// Busy threads looked at for runs in flight.
const LIVE_THREADS: i64 = 50;

/// `GET /ui/frag/graphs/live`: the owner's running runs, as JSON
/// `[{"graph", "thread", "run", "next"}]` (`next`: the nodes the thread's latest checkpoint
/// runs next, for a run whose stream carries no task events). The graphs page asks again
/// every second and follows each new run's event stream.
pub(crate) async fn live(State(state): State<AppRef>, viewer: Viewer) -> Response {
    let owner = viewer.owner();
    // The threads a custom Auth's filter lets the viewer search, as on the API.
    let metadata = match viewer.search_needle(&state, &serde_json::Map::new()).await {
        Ok(Some(needle)) => needle,
        Ok(None) => return Json(Vec::<Value>::new()).into_response(),
        Err(e) => return e.into_response(),
    };
    let query = ThreadQuery {
        metadata,
        status: Some(ThreadStatus::Busy),
        limit: LIVE_THREADS,
        sort_by: Some("updated_at".into()),
        ..ThreadQuery::default()
    };
    let busy = match threads::search(&state, owner, &query).await {
        Ok((list, _)) => list,
        Err(e) => return ApiError::from(e).into_response(),
    };
    let mut out = Vec::new();
    for t in busy {
        let Ok(running) = runs::list(&state, owner, &t.thread_id, Some(RunStatus::Running), (5, 0)).await
        else {
            continue;
        };
        if running.is_empty() {
            continue;
        }
        let next: Vec<Value> = threads::state_at(&state, owner, &t.thread_id, None)
            .await
            .ok()
            .and_then(|s| s.get("next").and_then(Value::as_array).cloned())
            .unwrap_or_default();
        for r in running {
            let graph = match assistants::resolve(&state, owner, &r.assistant_id).await {
                Ok(a) => a.graph_id,
                Err(_) => continue,
            };
            out.push(json!({"graph": graph, "thread": t.thread_id, "run": r.run_id, "next": next}));
        }
    }
    Json(out).into_response()
}
