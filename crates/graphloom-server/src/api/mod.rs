//! The HTTP routes.

mod assistants;
mod bounds;
mod openapi;
mod run_output;
mod runs;
mod store;
mod system;
mod threads;

use crate::app::AppState;
use crate::error::ApiError;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use std::sync::Arc;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::cors::{AllowOrigin, Any, CorsLayer};
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::trace::TraceLayer;

pub(crate) type AppRef = Arc<AppState>;

/// The principal a request acts for (`""` with auth off).
#[derive(Clone, Debug)]
pub(crate) struct Owner(pub String);

pub(crate) fn router(state: AppRef) -> Router {
    let api = Router::new()
        .route("/assistants", post(assistants::create))
        .route("/assistants/search", post(assistants::search))
        .route("/assistants/count", post(assistants::count))
        .route(
            "/assistants/{id}",
            get(assistants::get_one)
                .patch(assistants::patch)
                .delete(assistants::delete),
        )
        .route("/assistants/{id}/graph", get(assistants::graph))
        .route("/assistants/{id}/schemas", get(assistants::schemas))
        .route("/assistants/{id}/subgraphs", get(assistants::subgraphs))
        .route("/assistants/{id}/subgraphs/{ns}", get(assistants::subgraphs))
        .route("/assistants/{id}/versions", post(assistants::versions))
        .route("/assistants/{id}/latest", post(assistants::latest))
        .route("/threads", post(threads::create))
        .route("/threads/search", post(threads::search))
        .route("/threads/count", post(threads::count))
        .route("/threads/prune", post(threads::prune))
        .route(
            "/threads/{id}",
            get(threads::get_one)
                .patch(threads::patch)
                .delete(threads::delete),
        )
        .route("/threads/{id}/copy", post(threads::copy))
        .route(
            "/threads/{id}/state",
            get(threads::get_state).post(threads::update_state),
        )
        .route("/threads/{id}/state/checkpoint", post(threads::state_at_body))
        .route("/threads/{id}/state/{checkpoint_id}", get(threads::state_at))
        .route(
            "/threads/{id}/history",
            get(threads::history_get).post(threads::history_post),
        )
        .route("/threads/{id}/runs", post(runs::create_bg).get(runs::list))
        .route("/threads/{id}/runs/stream", post(runs::create_stream))
        .route("/threads/{id}/runs/wait", post(runs::create_wait))
        .route(
            "/threads/{id}/runs/{run_id}",
            get(runs::get_one).delete(runs::delete),
        )
        .route("/threads/{id}/runs/{run_id}/join", get(runs::join))
        .route("/threads/{id}/runs/{run_id}/stream", get(runs::join_stream))
        .route("/threads/{id}/runs/{run_id}/cancel", post(runs::cancel))
        .route("/runs", post(runs::stateless_bg))
        .route("/runs/stream", post(runs::stateless_stream))
        .route("/runs/wait", post(runs::stateless_wait))
        .route("/runs/batch", post(runs::batch))
        .route("/runs/cancel", post(runs::cancel_many))
        .route(
            "/store/items",
            get(store::get_item)
                .put(store::put_item)
                .delete(store::delete_item),
        )
        .route("/store/items/search", post(store::search))
        .route("/store/namespaces", post(store::namespaces))
        .layer(axum::middleware::from_fn_with_state(Arc::clone(&state), auth));
    let open = Router::new()
        .route("/ok", get(system::ok))
        .route("/info", get(system::info))
        .route("/metrics", get(system::metrics))
        .route("/openapi.json", get(openapi::document));
    let mut app = api
        .merge(open)
        .fallback(|| async { ApiError::new(StatusCode::NOT_FOUND, "no such route") })
        // A handler that panics answers a JSON 500 instead of dropping the connection.
        .layer(CatchPanicLayer::custom(|panic: Box<dyn std::any::Any + Send>| {
            ApiError::panicked(panic.as_ref()).into_response()
        }))
        .layer(RequestBodyLimitLayer::new(state.config.body_limit))
        .layer(axum::middleware::from_fn(json_errors))
        .layer(axum::middleware::from_fn(request_scope))
        .layer(PropagateRequestIdLayer::x_request_id())
        .layer(TraceLayer::new_for_http())
        .layer(SetRequestIdLayer::x_request_id(MakeRequestUuid));
    if !state.config.cors_origins.is_empty() {
        let origins = &state.config.cors_origins;
        let allow = if origins.iter().any(|o| o == "*") {
            AllowOrigin::any()
        } else {
            AllowOrigin::list(origins.iter().filter_map(|o| HeaderValue::from_str(o).ok()))
        };
        app = app.layer(
            CorsLayer::new()
                .allow_origin(allow)
                .allow_methods(Any)
                .allow_headers(Any)
                .expose_headers(Any),
        );
    }
    app.with_state(state)
}

/// Resolve the caller from `x-api-key` or `Authorization: Bearer`; 401 when keys are
/// configured and none matches.
async fn auth(State(state): State<AppRef>, mut req: Request, next: Next) -> Response {
    let keys = &state.config.api_keys;
    let owner = if keys.is_empty() {
        String::new()
    } else {
        let h = req.headers();
        let presented = h
            .get("x-api-key")
            .and_then(|v| v.to_str().ok())
            .or_else(|| {
                h.get("authorization")
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.strip_prefix("Bearer "))
            })
            .map(str::trim);
        match presented.and_then(|k| keys.get(k)) {
            Some(owner) => owner.clone(),
            None => {
                return ApiError::new(StatusCode::UNAUTHORIZED, "missing or unknown API key").into_response()
            }
        }
    };
    req.extensions_mut().insert(Owner(owner));
    next.run(req).await
}

/// Handle the request under its `x-request-id` (set by the layer outside), so that errors
/// and panics below log it and 5xx bodies carry it.
async fn request_scope(req: Request, next: Next) -> Response {
    let id = req
        .headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    crate::error::with_request_id(id, next.run(req)).await
}

/// Plain-text errors produced below the handlers (body too large, bad path, wrong method)
/// become `{"detail": ...}` like every other error.
async fn json_errors(req: Request, next: Next) -> Response {
    let res = next.run(req).await;
    let status = res.status();
    let is_json = res
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json") || v.starts_with("text/event-stream"));
    if (status.is_client_error() || status.is_server_error()) && !is_json {
        let body = axum::body::to_bytes(res.into_body(), 64 * 1024)
            .await
            .unwrap_or_default();
        let text = String::from_utf8_lossy(&body).trim().to_owned();
        let detail = if text.is_empty() {
            status.canonical_reason().unwrap_or("error").to_owned()
        } else {
            text
        };
        return ApiError::new(status, detail).into_response();
    }
    res
}

/// A search page: the items (with only the `select`ed fields, when given) and the
/// `X-Pagination-Total` / `X-Pagination-Next` headers the clients read.
pub(crate) fn page_response<T: serde::Serialize>(
    list: &[T],
    total: i64,
    offset: i64,
    select: &[String],
) -> crate::error::ApiResult<Response> {
    let mut headers = axum::http::HeaderMap::new();
    headers.insert("x-pagination-total", total.into());
    let next = offset.saturating_add(i64::try_from(list.len()).unwrap_or(0));
    if next < total {
        headers.insert("x-pagination-next", next.into());
    }
    Ok((headers, axum::Json(select_fields(list, select)?)).into_response())
}

/// Serialize `items`, keeping only the `select`ed fields of each (all when `select` is
/// empty), as the reference server does for search and list endpoints.
pub(crate) fn select_fields<T: serde::Serialize>(
    items: &[T],
    select: &[String],
) -> Result<serde_json::Value, ApiError> {
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        let mut v = serde_json::to_value(item).map_err(|e| ApiError::internal(e.to_string()))?;
        if let (Some(obj), false) = (v.as_object_mut(), select.is_empty()) {
            obj.retain(|k, _| select.iter().any(|s| s == k));
        }
        out.push(v);
    }
    Ok(serde_json::Value::Array(out))
}
