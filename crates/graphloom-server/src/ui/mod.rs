//! The console at `/ui`: server-rendered HTML (maud, escaped by default) and a little plain
//! JavaScript, everything embedded in the binary.
//!
//! Every page is one shell (`/ui`, `/ui/graphs`, `/ui/threads`, `/ui/threads/{id}`,
//! `/ui/runs/{thread}/{run}`, `/ui/overview`) that holds no data: its script asks for the
//! API key once (kept in the browser session, `sessionStorage`), then loads the page's
//! fragment from `/ui/frag/...` with the key in `x-api-key`, behind the same gate as the
//! API. Fragments read through the services, as the owner of the key, so another owner's
//! thread is a 404 page. What the console does (start, resume, fork, cancel) and what it
//! follows live (a run's events over SSE) goes through the run-centric API itself, like
//! any client.
//!
//! Pages are sent with a Content-Security-Policy that allows only the console's own
//! script and style: a value from a state that escaped the templates still could not run.

mod access;
mod graphs;
mod html;
mod json;
mod metrics_text;
mod overview;
mod run;
mod thread;
mod threads;

use crate::api::error::ApiError;
use crate::state::AppRef;
use axum::extract::Query;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use std::collections::HashMap;
use std::sync::Arc;

const SCRIPT: &str = include_str!("static/console.js");
const STYLE: &str = include_str!("static/console.css");

/// Only the console's own files; inline SVG needs no more.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; \
                   connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

/// The console's routes: the shell and its files (public: they hold no data) and the
/// fragments (behind the API key).
pub(crate) fn routes(state: &AppRef) -> Router<AppRef> {
    let frags = Router::new()
        .route("/ui/frag/graphs", get(graphs::page))
        .route("/ui/frag/graphs/{graph_id}/svg", get(graphs::svg_fragment))
        .route("/ui/frag/graphs/live", get(graphs::live))
        .route("/ui/frag/threads", get(threads::page))
        .route("/ui/frag/threads/{thread_id}", get(thread::page))
        .route(
            "/ui/frag/threads/{thread_id}/state/{checkpoint_id}",
            get(thread::full_state),
        )
        .route("/ui/frag/runs/{thread_id}/{run_id}", get(run::page))
        .route("/ui/frag/usage", get(run::usage))
        .route("/ui/frag/overview", get(overview::page))
        .route("/ui/frag/{*rest}", get(not_found))
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(state),
            crate::api::gate::gate,
        ));
    Router::new()
        .route("/ui", get(shell))
        .route("/ui/", get(shell))
        .route("/ui/static/console.js", get(script))
        .route("/ui/static/console.css", get(style))
        .route("/ui/{*rest}", get(shell))
        .merge(frags)
}

async fn shell() -> Response {
    let page = html::shell();
    (
        [
            (header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP)),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
            (
                header::X_CONTENT_TYPE_OPTIONS,
                HeaderValue::from_static("nosniff"),
            ),
        ],
        Html(page.into_string()),
    )
        .into_response()
}

fn asset(body: &'static str, mime: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, HeaderValue::from_static(mime)),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
            (
                header::X_CONTENT_TYPE_OPTIONS,
                HeaderValue::from_static("nosniff"),
            ),
        ],
        body,
    )
        .into_response()
}

async fn script() -> Response {
    asset(SCRIPT, "text/javascript; charset=utf-8")
}

async fn style() -> Response {
    asset(STYLE, "text/css; charset=utf-8")
}

async fn not_found() -> Response {
    error_page(ApiError::not_found("page"))
}

/// A fragment: HTML for the shell to insert.
pub(crate) fn fragment(markup: maud::Markup) -> Response {
    (
        [(header::CACHE_CONTROL, HeaderValue::from_static("no-store"))],
        Html(markup.into_string()),
    )
        .into_response()
}

/// An error as a fragment with its status: a 404 page, or the message of a 4xx (the
/// detail of a 5xx stays in the log).
pub(crate) fn error_page(e: impl Into<ApiError>) -> Response {
    let e: ApiError = e.into();
    let (title, text) = match e.status {
        StatusCode::NOT_FOUND => (
            "404 — not found",
            "Nothing here: it does not exist, or it is not yours.".to_owned(),
        ),
        s if s.is_client_error() => ("That did not work", e.detail.clone()),
        _ => ("Internal error", "internal error".to_owned()),
    };
    let markup = maud::html! {
        section.card.error-page data-status=(e.status.as_u16()) {
            h1 { (title) }
            p { (text) }
            p { a href="/ui/threads" data-nav { "Threads" } " · " a href="/ui/graphs" data-nav { "Graphs" } }
        }
    };
    (
        e.status,
        [(header::CACHE_CONTROL, HeaderValue::from_static("no-store"))],
        Html(markup.into_string()),
    )
        .into_response()
}

/// A fragment's query string.
pub(crate) type Q = Query<HashMap<String, String>>;
