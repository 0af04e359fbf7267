//! The overview: runs by status, run and node latency percentiles, tokens and cost by
//! model, all read from the server's own metrics (what `/metrics` serves).

use super::fragment;
use super::metrics_text::{parse, quantile, select, Sample};
use crate::api::auth::Owner;
use crate::state::AppRef;
use axum::extract::State;
use axum::response::Response;
use maud::{html, Markup};
use std::collections::BTreeMap;

fn ms(v: Option<f64>) -> String {
    v.map_or("—".to_owned(), |s| format!("{:.1}", s * 1000.0))
}

fn percentiles(samples: &[Sample], base: &str, filter: &[(&str, &str)]) -> Markup {
    html! {
        td { (ms(quantile(samples, base, filter, 0.5))) }
        td { (ms(quantile(samples, base, filter, 0.9))) }
        td { (ms(quantile(samples, base, filter, 0.99))) }
    }
}

/// `GET /ui/frag/overview`.
pub(crate) async fn page(State(state): State<AppRef>, _owner: Owner) -> Response {
    let text = crate::service::system::metrics_text(&state).await;
    let s = parse(&text);
    let value =
        |name: &str, filter: &[(&str, &str)]| -> f64 { select(&s, name, filter).map(|x| x.value).sum() };
    let statuses = ["pending", "running", "success", "error", "timeout", "interrupted"];
    let runs = value("graphloom_run_duration_seconds_count", &[]);
    let mut nodes: Vec<(String, String)> = select(&s, "graphloom_node_duration_seconds_count", &[])
        .filter_map(|x| Some((x.labels.get("graph")?.clone(), x.labels.get("node")?.clone())))
        .collect();
    nodes.sort();
    nodes.dedup();
    let mut models: BTreeMap<String, (f64, f64, f64)> = BTreeMap::new();
    for x in select(&s, "graphloom_model_tokens_by_model_total", &[]) {
        let (Some(m), Some(k)) = (x.labels.get("model"), x.labels.get("kind")) else {
            continue;
        };
        let e = models.entry(m.clone()).or_default();
        if k == "input" {
            e.0 += x.value;
        } else {
            e.1 += x.value;
        }
    }
    for x in select(&s, "graphloom_model_cost_by_model_usd_total", &[]) {
        if let Some(m) = x.labels.get("model") {
            models.entry(m.clone()).or_default().2 += x.value;
        }
    }
    fragment(html! {
        h1 { "Overview" }
        p.muted { "From this server's metrics (" a href="/metrics" { "/metrics" } "): runs in the database by status; latencies of the runs and nodes this process executed since it started." }
        div.columns {
            section.card.overview-runs {
                h2 { "Runs by status" }
                table.runs-by-status {
                    tbody {
                        @for st in statuses {
                            tr data-status=(st) { td { (super::html::badge(st)) } td.num { (value("graphloom_runs", &[("status", st)])) } }
                        }
                        tr { td { "queue depth" } td.num { (value("graphloom_queue_depth", &[])) } }
                    }
                }
            }
            section.card.overview-latency {
                h2 { "Run latency (ms)" }
                table {
                    thead { tr { th { "runs" } th { "p50" } th { "p90" } th { "p99" } } }
                    tbody { tr { td.num { (runs) } (percentiles(&s, "graphloom_run_duration_seconds", &[])) } }
                }
            }
        }
        section.card.overview-nodes {
            h2 { "Node latency (ms)" }
            @if nodes.is_empty() { p.muted { "No node has run in this process yet." } } @else {
                table {
                    thead { tr { th { "graph" } th { "node" } th { "runs" } th { "p50" } th { "p90" } th { "p99" } } }
                    tbody {
                        @for (g, n) in &nodes {
                            @let f = [("graph", g.as_str()), ("node", n.as_str())];
                            tr { td { (g) } td { (n) } td.num { (value("graphloom_node_duration_seconds_count", &f)) } (percentiles(&s, "graphloom_node_duration_seconds", &f)) }
                        }
                    }
                }
            }
        }
        section.card.overview-models {
            h2 { "Tokens and cost by model" }
            @if models.is_empty() { p.muted { "No model tokens counted yet." } } @else {
                table.models {
                    thead { tr { th { "model" } th { "input tokens" } th { "output tokens" } th { "cost (USD)" } } }
                    tbody {
                        @for (m, (i, o, c)) in &models {
                            tr data-model=(m) { td { (m) } td.num { (i) } td.num { (o) } td.num { (format!("{c:.6}")) } }
                        }
                    }
                }
            }
        }
    })
}
