//! The thread-centric protocol over HTTP: `POST /threads/{id}/commands` (a command in,
//! its answer out, errors as error frames with status 200), `POST
//! /threads/{id}/stream/events` (the thread's events as SSE, filtered, from its whole
//! history or after `since`), and `GET /threads/{id}/stream` (the thread's current and
//! next runs in the run-centric format). The WebSocket on `GET
//! /threads/{id}/stream/events` is in `thread_ws.rs`.

use super::auth::Owner;
use super::thread_commands::dispatch;
use crate::api::error::{ApiError, ApiResult, ErrorBody};
use crate::protocol::translate::Methods;
use crate::protocol::{error_frame, success_frame, Command, Filter};
use crate::service::thread_stream::follow::{follow_thread, Item, Start};
use crate::service::thread_stream::join::{join_thread, parse_last_event_id, JoinItem};
use crate::state::AppRef;
use crate::wire;
use axum::body::{Body, Bytes};
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use futures::StreamExt;
use serde_json::Value;
use std::convert::Infallible;

/// A protocol command, as the OpenAPI document describes it (the handler parses the body
/// itself, to answer the protocol's error frames).
#[allow(dead_code)]
#[derive(utoipa::ToSchema)]
pub(crate) struct CommandRequest {
    /// The client's id of the command, echoed in the answer.
    id: u64,
    /// `run.start`, `input.respond`, `input.inject`, `agent.getTree`, `state.get`,
    /// `state.listCheckpoints`, `state.fork`, ...
    method: String,
    /// The command's parameters.
    #[schema(value_type = Object)]
    params: Option<Value>,
}

/// What `POST /threads/{id}/stream/events` reads, as the OpenAPI document describes it.
#[allow(dead_code)]
#[derive(utoipa::ToSchema)]
pub(crate) struct StreamEventsRequest {
    /// The channels to receive (`values`, `updates`, `messages`, `tools`, `custom`,
    /// `custom:<name>`, `lifecycle`, `input`, `checkpoints`, `tasks`).
    channels: Vec<String>,
    /// Only events of these namespaces (and below them, to `depth`).
    namespaces: Option<Vec<Vec<String>>>,
    /// How deep below the namespaces events are sent.
    depth: Option<u32>,
    /// Replay the events after this sequence number (default: the whole history).
    since: Option<u64>,
}

#[utoipa::path(post, path = "/threads/{thread_id}/commands", tag = "thread-protocol",
    summary = "Send a protocol command to a thread",
    description = "A command of the thread-centric streaming protocol (`run.start`, `input.respond`, `input.inject`, `agent.getTree`, `state.get`, `state.listCheckpoints`, `state.fork`): `{\"id\", \"method\", \"params\"}`. The answer is `{\"type\": \"success\", \"id\", \"result\", \"meta\"}` or an error frame `{\"type\": \"error\", \"id\", \"error\", \"message\"}`, both with status 200; a body that is not a command answers 400 with an error frame. `run.start` creates the thread when it does not exist.",
    params(("thread_id" = String, Path, description = "Thread id (the client may make it)")),
    request_body = CommandRequest,
    responses((status = 200, description = "The command's answer or error frame", body = Object), (status = 400, description = "Not a command", body = Object)))]
pub(crate) async fn command(
    State(state): State<AppRef>,
    Owner(owner): Owner,
    Path(thread_id): Path<String>,
    body: Bytes,
) -> Response {
    let cmd = match Command::parse(&body) {
        Ok(c) => c,
        Err(bad) => return (StatusCode::BAD_REQUEST, Json(bad.response())).into_response(),
    };
    let frame = match dispatch(&state, &owner, &thread_id, &cmd).await {
        Ok(result) => success_frame(cmd.id, result, 0),
        Err(e) => error_frame(Some(cmd.id), &e, None),
    };
    Json(frame).into_response()
}

/// The body of `POST /threads/{id}/stream/events`: a filter, and where to start.
fn stream_request(v: &Value) -> ApiResult<(Filter, Option<u64>)> {
    let filter = Filter::parse(v).map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, e.message))?;
    let since =
        match v.get("since") {
            None | Some(Value::Null) => None,
            Some(s) => Some(s.as_u64().ok_or_else(|| {
                ApiError::new(StatusCode::BAD_REQUEST, "since must be a non-negative integer")
            })?),
        };
    Ok((filter, since))
}

fn event_stream_headers(res: &mut Response) {
    let h = res.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
}

#[utoipa::path(post, path = "/threads/{thread_id}/stream/events", tag = "thread-protocol",
    summary = "Read a thread's protocol events (SSE)",
    description = "Body: `{\"channels\": [..], \"namespaces\"?: [[..]], \"depth\"?: n, \"since\"?: seq}`. Channels: `values`, `updates`, `messages`, `tools`, `custom` (and `custom:<name>`), `lifecycle`, `input`, `checkpoints`, `tasks`. The stream replays the thread's whole history (its replayable runs; with `since`, the events after that sequence number), then follows its runs for as long as it is read. A `GET` with a WebSocket upgrade on the same path speaks the protocol over one socket.",
    params(("thread_id" = String, Path, description = "Thread id")),
    request_body = StreamEventsRequest,
    responses((status = 200, description = "Server-sent events: one protocol event each (`event: <method>`, `id: <seq>`)", content_type = "text/event-stream", body = String), (status = 400, description = "A bad filter", body = ErrorBody), (status = 422, description = "A body that is not JSON", body = ErrorBody)))]
pub(crate) async fn events(
    State(state): State<AppRef>,
    Owner(owner): Owner,
    Path(thread_id): Path<String>,
    super::extract::Body(body): super::extract::Body<Value>,
) -> ApiResult<Response> {
    let (filter, since) = stream_request(&body)?;
    // The stream's channels are fixed: the events of no channel it reads are not made.
    let builds = Methods::of(&filter);
    let items = follow_thread(state, owner, thread_id, Start::History { since }, builds);
    let bytes = items.filter_map(move |item| {
        let out = match item {
            Item::Events(evs) => {
                let text: String = evs
                    .iter()
                    .filter(|e| filter.matches(e))
                    .map(|e| e.sse_frame())
                    .collect();
                (!text.is_empty()).then(|| Bytes::from(text))
            }
            Item::KeepAlive => Some(Bytes::from_static(wire::HEARTBEAT.as_bytes())),
            Item::RunStarted => None,
        };
        std::future::ready(out.map(Ok::<_, Infallible>))
    });
    let mut res = Response::new(Body::from_stream(bytes));
    event_stream_headers(&mut res);
    Ok(res)
}

#[utoipa::path(get, path = "/threads/{thread_id}/stream", tag = "threads",
    summary = "Join a thread's current and next runs (SSE)",
    description = "The events of the thread's active run (none: its next run) and of every run after it, each run's as its own stream gives them, then `metadata` `{\"status\": \"run_done\", \"run_id\"}`. Ids are `<run id>:<n>`; reconnect with `Last-Event-ID` to go on after one (replayable runs).",
    params(("thread_id" = String, Path, description = "Thread id"), ("stream_mode" = Option<Vec<String>>, Query, description = "Only these modes (repeat the parameter)"), ("last-event-id" = Option<String>, Header, description = "Go on after this event")),
    responses((status = 200, description = "Server-sent events", content_type = "text/event-stream", body = String)))]
pub(crate) async fn join(
    State(state): State<AppRef>,
    Owner(owner): Owner,
    Path(thread_id): Path<String>,
    Query(pairs): Query<Vec<(String, String)>>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    crate::service::threads::load(&state, &owner, &thread_id).await?;
    let modes: Vec<String> = pairs
        .into_iter()
        .filter(|(k, _)| k == "stream_mode")
        .map(|(_, v)| v)
        .collect();
    if let Some(bad) = modes
        .iter()
        .find(|m| wire::parse_stream_modes(std::slice::from_ref(m)).is_err())
    {
        return Err(ApiError::invalid(format!("unknown stream mode {bad:?}")));
    }
    let after = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(parse_last_event_id);
    let modes = (!modes.is_empty()).then_some(modes);
    let items = join_thread(state, owner, thread_id, modes, after);
    let bytes = items.map(|item| {
        Ok::<_, Infallible>(match item {
            JoinItem::Event { id, event, data } => Bytes::from(wire::sse_frame(&event, &data, id.as_deref())),
            JoinItem::KeepAlive => Bytes::from_static(wire::HEARTBEAT.as_bytes()),
        })
    });
    let mut res = Response::new(Body::from_stream(bytes));
    event_stream_headers(&mut res);
    Ok(res)
}
