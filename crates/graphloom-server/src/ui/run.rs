//! A live run: its graph with the running nodes lit, the tokens as they stream, tool calls
//! and results, node timings, tokens and cost. The page is a frame; its script follows the
//! run's event stream (`GET /threads/{thread_id}/runs/{run_id}/stream`) and fills it.

use super::access::Viewer;
use super::html::{badge, short, time};
use super::{error_page, fragment};
use crate::api::auth::Owner;
use crate::auth::{Action, Resource};
use crate::service::runs;
use crate::state::AppRef;
use axum::extract::{Path, State};
use axum::response::Response;
use graphloom_core::draw::SvgOptions;
use maud::html;

/// `GET /ui/frag/runs/{thread_id}/{run_id}`.
pub(crate) async fn page(
    State(state): State<AppRef>,
    viewer: Viewer,
    Path((thread_id, run_id)): Path<(String, String)>,
) -> Response {
    let owner = viewer.owner();
    if let Err(e) = viewer
        .may(&state, Resource::Runs, Action::Read, &thread_id, Some(&run_id))
        .await
    {
        return error_page(e);
    }
    let run = match runs::find(&state, owner, &thread_id, &run_id).await {
        Ok(r) => r,
        Err(e) => return error_page(e),
    };
    let graph_id = match crate::service::assistants::resolve(&state, owner, &run.assistant_id).await {
        Ok(a) => a.graph_id,
        Err(_) => String::new(),
    };
    let svg = super::graphs::svg(&state, &graph_id, &SvgOptions::new().expand_all());
    fragment(html! {
        div.live data-live-run=(run_id) data-thread=(thread_id) data-graph=(graph_id) data-status=(run.status.as_str()) {
            h1 { "Run " (short(&run_id)) " " span.run-status { (badge(run.status.as_str())) } }
            p.muted {
                "graph " b { (graph_id) } " · thread " a href={ "/ui/threads/" (thread_id) } data-nav { (short(&thread_id)) }
                " · created " (time(&run.created_at))
            }
            div.columns {
                section.card.live-graph {
                    h2 { "Graph" }
                    @if let Some(svg) = svg { div.svg-wrap.fit { (svg) } }
                }
                section.card.live-output {
                    h2 { "Output" }
                    pre #tokens.tokens aria-live="polite" {}
                    p.muted.counters { span #token-count { "0" } " tokens · " span #event-count { "0" } " events" }
                }
            }
            div.columns {
                section.card {
                    h2 { "Tool calls" }
                    ol #tools.tools {}
                }
                section.card {
                    h2 { "Nodes" }
                    table.timings {
                        thead { tr { th { "node" } th { "step" } th { "ms" } th { "status" } } }
                        tbody #timings {}
                    }
                    h2 { "Tokens and cost" }
                    div #usage { p.muted { "No model call yet." } }
                }
            }
            p #run-end.muted {}
        }
    })
}

/// `GET /ui/frag/usage?m=<model>:<input>:<output>&m=...`: tokens by model, priced with the
/// server's price list (the live page sends what the run's messages reported).
pub(crate) async fn usage(
    State(state): State<AppRef>,
    _owner: Owner,
    raw: axum::extract::RawQuery,
) -> Response {
    let mut rows: Vec<(String, u64, u64, Option<f64>)> = Vec::new();
    let query = raw.0.unwrap_or_default();
    for pair in query.split('&') {
        let Some(v) = pair.strip_prefix("m=") else {
            continue;
        };
        let v = percent_encoding::percent_decode_str(v)
            .decode_utf8_lossy()
            .into_owned();
        let mut parts = v.rsplitn(3, ':');
        let (Some(out), Some(inp), Some(model)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        let (Ok(i), Ok(o)) = (inp.parse::<u64>(), out.parse::<u64>()) else {
            continue;
        };
        let cost = state.config.prices.cost(model, &graphloom_llm::Usage::new(i, o));
        rows.push((model.to_owned(), i, o, cost));
        if rows.len() >= 100 {
            break;
        }
    }
    // None when no model is priced (an empty f64 sum is -0.0, which reads as a refund).
    let total = rows.iter().filter_map(|r| r.3).reduce(|a, b| a + b);
    fragment(html! {
        table.usage {
            thead { tr { th { "model" } th { "input" } th { "output" } th { "cost (USD)" } } }
            tbody {
                @for (m, i, o, c) in &rows {
                    tr { td { (m) } td { (i) } td { (o) } td { (c.map_or("unpriced".to_owned(), |c| format!("{c:.6}"))) } }
                }
            }
            tfoot { tr { th { "total" } th { (rows.iter().map(|r| r.1).sum::<u64>()) } th { (rows.iter().map(|r| r.2).sum::<u64>()) } th { (total.map_or("unpriced".to_owned(), |t| format!("{t:.6}"))) } } }
        }
    })
}
