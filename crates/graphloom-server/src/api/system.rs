//! `/ok`, `/info`, `/metrics`.

use crate::service::system;
use crate::state::AppRef;
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
        "graphs": system::graph_ids(&state),
        "models": state.models,
        "flags": { "assistants": true, "crons": true, "langsmith": false },
    }))
}

#[utoipa::path(get, path = "/metrics", tag = "system", summary = "Prometheus metrics (OpenMetrics text)",
    responses((status = 200, content_type = "application/openmetrics-text", body = String)))]
pub(crate) async fn metrics(State(state): State<AppRef>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        system::metrics_text(&state).await,
    )
}
