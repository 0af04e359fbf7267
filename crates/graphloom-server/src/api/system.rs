//! `/ok`, `/info`, `/metrics`.

use super::AppRef;
use crate::metrics::StatusLabel;
use crate::models::RunStatus;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::Json;
use serde_json::{json, Value};

#[utoipa::path(get, path = "/ok", tag = "system", summary = "Health check", security(()),
    responses((status = 200, description = "`{ok: true}`", body = Object)))]
pub(crate) async fn ok() -> Json<Value> {
    Json(json!({ "ok": true }))
}

#[utoipa::path(get, path = "/info", tag = "system", summary = "Server information and feature flags",
    responses((status = 200, body = Object)))]
pub(crate) async fn info(State(state): State<AppRef>) -> Json<Value> {
    Json(json!({
        "version": env!("CARGO_PKG_VERSION"),
        "server": "graphloom",
        "graphs": state.graphs.keys().collect::<Vec<_>>(),
        "flags": { "assistants": true, "crons": false, "langsmith": false },
    }))
}

#[utoipa::path(get, path = "/metrics", tag = "system", summary = "Prometheus metrics (OpenMetrics text)",
    responses((status = 200, content_type = "application/openmetrics-text", body = String)))]
pub(crate) async fn metrics(State(state): State<AppRef>) -> impl IntoResponse {
    if let Ok(depth) = state.db.queue_depth().await {
        state.metrics.queue_depth.set(depth);
    }
    if let Ok(counts) = state.db.runs_by_status().await {
        for s in [
            RunStatus::Pending,
            RunStatus::Running,
            RunStatus::Error,
            RunStatus::Success,
            RunStatus::Timeout,
            RunStatus::Interrupted,
        ] {
            let n = counts.iter().find(|(st, _)| *st == s).map_or(0, |(_, n)| *n);
            state
                .metrics
                .runs_current
                .get_or_create(&StatusLabel {
                    status: s.as_str().into(),
                })
                .set(n);
        }
    }
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        state.metrics.render(),
    )
}
