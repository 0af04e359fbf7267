//! The HTTP edge: the routes, and handlers that only translate HTTP. A handler extracts
//! its request (the [`auth::Owner`], path and query, a body parsed once by
//! [`extract`]), checks the numbers against [`bounds`], calls a [`crate::service`], and
//! builds the response.

mod a2a;
mod assistants;
pub(crate) mod auth;
mod bounds;
mod cors;
mod crons;
pub(crate) mod error;
mod extract;
pub(crate) mod gate;
mod mcp;
mod openapi;
mod respond;
mod run_output;
mod runs;
mod store;
mod system;
mod thread_commands;
mod thread_stream;
mod thread_ws;
mod threads;
mod whole_body;

use crate::api::error::ApiError;
use crate::state::AppRef;
use axum::extract::Request;
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Router;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::trace::TraceLayer;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// The server's own routes, before the interop endpoints, the user's routes and the
/// console join them.
pub(crate) struct Routes {
    /// The routes behind auth.
    pub secured: OpenApiRouter<AppRef>,
    /// The routes without auth (`/ok`, and the system routes when configured public).
    pub open: OpenApiRouter<AppRef>,
}

/// The server's own routes, each with its OpenAPI operation.
pub(crate) fn routes(state: &AppRef) -> Routes {
    // Every route is registered through `routes!`, which also adds its operation to the
    // OpenAPI document: the document is generated from the same handlers the router serves.
    // Handlers sharing a path are registered together.
    // What the server is and does: behind the key unless configured public (`/ok` never is).
    let public = state.config.public_system_routes;
    let about = || {
        OpenApiRouter::new()
            .routes(routes!(system::info))
            .routes(routes!(system::metrics))
            .routes(routes!(openapi::document))
    };
    let api = OpenApiRouter::with_openapi(openapi::base())
        .routes(routes!(assistants::create))
        .routes(routes!(assistants::search))
        .routes(routes!(assistants::count))
        .routes(routes!(
            assistants::get_one,
            assistants::patch,
            assistants::delete
        ))
        .routes(routes!(assistants::graph))
        .routes(routes!(assistants::schemas))
        .routes(routes!(assistants::subgraphs))
        .routes(routes!(assistants::subgraphs_at))
        .routes(routes!(assistants::versions))
        .routes(routes!(assistants::latest))
        .routes(routes!(threads::create))
        .routes(routes!(threads::search))
        .routes(routes!(threads::count))
        .routes(routes!(threads::prune))
        .routes(routes!(threads::get_one, threads::patch, threads::delete))
        .routes(routes!(threads::copy))
        .routes(routes!(threads::storage))
        .routes(routes!(threads::get_state, threads::update_state))
        .routes(routes!(threads::state_at_body))
        .routes(routes!(threads::state_at))
        .routes(routes!(threads::history_get, threads::history_post))
        .routes(routes!(runs::create_bg, runs::list))
        .routes(routes!(runs::create_stream))
        .routes(routes!(runs::create_wait))
        .routes(routes!(runs::get_one, runs::delete))
        .routes(routes!(runs::join))
        .routes(routes!(runs::join_stream))
        .routes(routes!(runs::cancel))
        .routes(routes!(runs::stateless_bg))
        .routes(routes!(runs::stateless_stream))
        .routes(routes!(runs::stateless_wait))
        .routes(routes!(runs::batch))
        .routes(routes!(runs::cancel_many))
        .routes(routes!(crons::create_for_thread))
        .routes(routes!(crons::create))
        .routes(routes!(crons::search))
        .routes(routes!(crons::count))
        .routes(routes!(crons::get_one, crons::update, crons::delete))
        .routes(routes!(thread_stream::command))
        .routes(routes!(thread_stream::events, thread_ws::socket))
        .routes(routes!(thread_stream::join))
        .routes(routes!(store::get_item, store::put_item, store::delete_item))
        .routes(routes!(store::search))
        .routes(routes!(store::namespaces))
        .merge(if public { OpenApiRouter::new() } else { about() });
    let open = OpenApiRouter::new().routes(routes!(system::ok)).merge(if public {
        about()
    } else {
        OpenApiRouter::new()
    });
    Routes { secured: api, open }
}

/// The server's whole router: `routes` (the server's own, the interop endpoints, the
/// user's and the console, assembled by [`crate::http`]) with the fallback, the OpenAPI
/// document of `doc` (its `secured` paths behind auth when auth is on) and the server's
/// layers: panics, whole bodies, JSON errors, request ids, traces, CORS. A request no route
/// matches goes to `fallback` when there is one, else gets a JSON 404.
pub(crate) fn finish(
    routes: Router<AppRef>,
    doc: &utoipa::openapi::OpenApi,
    secured: &[&str],
    state: AppRef,
    fallback: Option<Router>,
) -> Router {
    let _ = state
        .openapi
        .set(openapi::finish(doc, secured, state.auth.is_on()));
    let (body_limit, cors) = (state.config.body_limit, cors::layer(&state.config.cors_origins));
    let routes = match fallback {
        Some(other) => routes.fallback_service(other),
        None => routes.fallback(|| async { ApiError::new(StatusCode::NOT_FOUND, "no such route") }),
    }
    .with_state(state);
    // The layers wrap the routes once, as the one service of an outer router, rather than
    // each route (`Router::layer` on the routes): a connection then copies one layer stack
    // instead of one per route, and a request clones one stack and its route's handler.
    let mut app = Router::new()
        .fallback_service(routes)
        // A handler that panics answers a JSON 500 instead of dropping the connection.
        .layer(CatchPanicLayer::custom(|panic: Box<dyn std::any::Any + Send>| {
            ApiError::panicked(panic.as_ref()).into_response()
        }))
        // Bodies read whole (within the limit) before any handler, so no response leaves
        // unread bytes on a keep-alive connection.
        .layer(axum::middleware::from_fn_with_state(
            body_limit,
            whole_body::read_whole,
        ))
        // The limit is the server's (above), not the extractors' own default of 2 MB.
        .layer(axum::extract::DefaultBodyLimit::disable())
        .layer(axum::middleware::from_fn(json_errors))
        .layer(axum::middleware::from_fn(request_scope))
        .layer(PropagateRequestIdLayer::x_request_id())
        .layer(TraceLayer::new_for_http())
        .layer(SetRequestIdLayer::x_request_id(MakeRequestUuid));
    if let Some(cors) = cors {
        app = app.layer(cors);
    }
    app
}

/// The interop endpoints: `/mcp` (assistants as MCP tools) and `/a2a/{assistant_id}`
/// (assistants as A2A agents), with their agent cards.
pub(crate) fn interop(state: &AppRef) -> Router<AppRef> {
    mcp::routes(state).merge(a2a::routes())
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
        .is_some_and(|v| {
            v.starts_with("application/json")
                || v.starts_with("text/event-stream")
                || v.starts_with("text/html")
        });
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
