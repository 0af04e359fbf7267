//! Runs: background, streamed (SSE), waited; stateless; join; cancel; list.

use super::auth::Owner;
use super::extract::{RunBodies, RunBody};
use super::respond::select_fields;
use super::run_output::{sse_response, wait_response};
use crate::api::error::{ApiError, ApiResult, ErrorBody};
use crate::models::{CancelAction, Run, RunStatus};
use crate::run::{OnDisconnect, RunRequest};
use crate::service;
use crate::service::runs::events::{self, Follow, Joined};
use crate::service::runs::{self, CancelTargets, Enqueued, Hold, Submit, ThreadRead};
use crate::state::AppRef;
use crate::wire;
use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::Value;

/// Queue the run of request `b` for `owner`, on `thread_id` (`None`: stateless).
async fn enqueue(
    state: &AppRef,
    owner: &str,
    thread_id: Option<String>,
    b: RunBody,
    hold: Hold,
) -> ApiResult<Enqueued> {
    let submit = Submit {
        owner: owner.to_owned(),
        thread_id,
        request: b.request,
        delay: b.delay,
        hold,
        read: ThreadRead::Unread,
    };
    Ok(runs::enqueue(state, submit).await?)
}

fn location_headers(run: &Run, stateless: bool, tail: &str) -> HeaderMap {
    let base = if stateless {
        format!("/runs/{}", run.run_id)
    } else {
        format!("/threads/{}/runs/{}", run.thread_id, run.run_id)
    };
    let mut h = HeaderMap::new();
    if let Ok(v) = HeaderValue::from_str(&format!("{base}{tail}")) {
        h.insert(header::LOCATION, v);
    }
    if let Ok(v) = HeaderValue::from_str(&format!("/threads/{}/runs/{}", run.thread_id, run.run_id)) {
        h.insert(header::CONTENT_LOCATION, v);
    }
    h
}

#[utoipa::path(post, path = "/threads/{thread_id}/runs", tag = "thread-runs", summary = "Create a background run",
    params(("thread_id" = String, Path, description = "Thread id")), request_body = RunRequest,
    responses((status = 200, body = Run), (status = 409, description = "The thread is busy and the strategy is `reject`", body = ErrorBody)))]
pub(crate) async fn create_bg(
    State(state): State<AppRef>,
    Owner(owner): Owner,
    Path(thread_id): Path<String>,
    b: RunBody,
) -> ApiResult<Json<Run>> {
    Ok(Json(
        enqueue(&state, &owner, Some(thread_id), b, Hold::Nothing)
            .await?
            .run,
    ))
}

#[utoipa::path(post, path = "/runs", tag = "stateless-runs", summary = "Create a stateless background run",
    request_body = RunRequest, responses((status = 200, body = Run)))]
pub(crate) async fn stateless_bg(
    State(state): State<AppRef>,
    Owner(owner): Owner,
    b: RunBody,
) -> ApiResult<Json<Run>> {
    Ok(Json(enqueue(&state, &owner, None, b, Hold::Nothing).await?.run))
}

#[utoipa::path(post, path = "/runs/batch", tag = "stateless-runs", summary = "Create several stateless background runs",
    request_body = Vec<RunRequest>, responses((status = 200, body = Vec<Run>)))]
pub(crate) async fn batch(
    State(state): State<AppRef>,
    Owner(owner): Owner,
    RunBodies(bodies): RunBodies,
) -> ApiResult<Json<Vec<Run>>> {
    let mut out = Vec::with_capacity(bodies.len());
    for b in bodies {
        out.push(enqueue(&state, &owner, None, b, Hold::Nothing).await?.run);
    }
    Ok(Json(out))
}

async fn stream_common(
    state: AppRef,
    owner: String,
    thread_id: Option<String>,
    b: RunBody,
) -> ApiResult<Response> {
    let cancel_on_disconnect = b.request.on_disconnect == Some(OnDisconnect::Cancel);
    let stateless = thread_id.is_none();
    let Enqueued {
        run,
        resumable,
        reader,
    } = enqueue(&state, &owner, thread_id, b, Hold::Events).await?;
    let headers = location_headers(&run, stateless, "/stream");
    let from = Follow {
        cursor: 0,
        resumable,
        reader,
        cancel_on_disconnect,
    };
    Ok(sse_response(state, owner, run, from, headers))
}

#[utoipa::path(post, path = "/threads/{thread_id}/runs/stream", tag = "thread-runs", summary = "Create a run and stream its events",
    params(("thread_id" = String, Path, description = "Thread id")), request_body = RunRequest, responses((status = 200, description = "Server-sent events: `metadata`, then the requested modes, then `error` on failure", content_type = "text/event-stream", body = String), (status = 409, description = "The thread is busy and the strategy is `reject`", body = ErrorBody)))]
pub(crate) async fn create_stream(
    State(state): State<AppRef>,
    Owner(owner): Owner,
    Path(thread_id): Path<String>,
    b: RunBody,
) -> ApiResult<Response> {
    stream_common(state, owner, Some(thread_id), b).await
}

#[utoipa::path(post, path = "/runs/stream", tag = "stateless-runs", summary = "Create a stateless run and stream its events",
    request_body = RunRequest, responses((status = 200, description = "Server-sent events: `metadata`, then the requested modes, then `error` on failure", content_type = "text/event-stream", body = String)))]
pub(crate) async fn stateless_stream(
    State(state): State<AppRef>,
    Owner(owner): Owner,
    b: RunBody,
) -> ApiResult<Response> {
    stream_common(state, owner, None, b).await
}

async fn wait_common(
    state: AppRef,
    owner: String,
    thread_id: Option<String>,
    b: RunBody,
) -> ApiResult<Response> {
    let stateless = thread_id.is_none();
    // A waiter taken before the run can start keeps its outcome here until this answer
    // has it (a run nobody holds drops its log as it ends).
    let Enqueued { run, reader, .. } = enqueue(&state, &owner, thread_id, b, Hold::Outcome).await?;
    let headers = location_headers(&run, stateless, "/join");
    Ok(wait_response(state, owner, run, headers, reader).await)
}

#[utoipa::path(post, path = "/threads/{thread_id}/runs/wait", tag = "thread-runs", summary = "Create a run and wait for its output",
    params(("thread_id" = String, Path, description = "Thread id")), request_body = RunRequest, responses((status = 200, description = "The final values; `__interrupt__` added when the run paused; `{\"__error__\": {error, message}}` when it failed", body = Object), (status = 409, description = "The thread is busy and the strategy is `reject`", body = ErrorBody)))]
pub(crate) async fn create_wait(
    State(state): State<AppRef>,
    Owner(owner): Owner,
    Path(thread_id): Path<String>,
    b: RunBody,
) -> ApiResult<Response> {
    wait_common(state, owner, Some(thread_id), b).await
}

#[utoipa::path(post, path = "/runs/wait", tag = "stateless-runs", summary = "Create a stateless run and wait for its output",
    request_body = RunRequest, responses((status = 200, description = "The final values; `__interrupt__` added when the run paused; `{\"__error__\": {error, message}}` when it failed", body = Object)))]
pub(crate) async fn stateless_wait(
    State(state): State<AppRef>,
    Owner(owner): Owner,
    b: RunBody,
) -> ApiResult<Response> {
    wait_common(state, owner, None, b).await
}

/// Query of `GET /threads/{thread_id}/runs`.
#[derive(Deserialize, Default, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct ListParams {
    /// Page size (1..=1000, default 10).
    limit: Option<i64>,
    /// Runs to skip.
    offset: Option<i64>,
    /// Only runs with this status.
    status: Option<String>,
}

#[utoipa::path(get, path = "/threads/{thread_id}/runs", tag = "thread-runs", summary = "List a thread's runs, newest first",
    params(("thread_id" = String, Path, description = "Thread id"), ListParams, ("select" = Option<Vec<String>>, Query, description = "Fields to return (repeat the parameter)")),
    responses((status = 200, body = Vec<Run>)))]
pub(crate) async fn list(
    State(state): State<AppRef>,
    Owner(owner): Owner,
    Path(thread_id): Path<String>,
    Query(p): Query<ListParams>,
    Query(pairs): Query<Vec<(String, String)>>,
) -> ApiResult<Json<Value>> {
    let status = match p.status.as_deref() {
        None => None,
        Some(s) => {
            Some(RunStatus::parse(s).ok_or_else(|| ApiError::invalid(format!("unknown run status {s:?}")))?)
        }
    };
    let page = service::page(p.limit, p.offset)?;
    let list = runs::list(&state, &owner, &thread_id, status, page).await?;
    // `select` repeats (`?select=run_id&select=status`).
    let select: Vec<String> = pairs
        .into_iter()
        .filter(|(k, _)| k == "select")
        .map(|(_, v)| v)
        .collect();
    Ok(Json(select_fields(&list, &select)?))
}

#[utoipa::path(get, path = "/threads/{thread_id}/runs/{run_id}", tag = "thread-runs", summary = "Get a run",
    params(("thread_id" = String, Path, description = "Thread id"), ("run_id" = String, Path, description = "Run id")), responses((status = 200, body = Run)))]
pub(crate) async fn get_one(
    State(state): State<AppRef>,
    Owner(owner): Owner,
    Path((thread_id, run_id)): Path<(String, String)>,
) -> ApiResult<Json<Run>> {
    Ok(Json(runs::public(
        runs::find(&state, &owner, &thread_id, &run_id).await?,
    )))
}

#[utoipa::path(delete, path = "/threads/{thread_id}/runs/{run_id}", tag = "thread-runs", summary = "Delete an ended run",
    params(("thread_id" = String, Path, description = "Thread id"), ("run_id" = String, Path, description = "Run id")), responses((status = 204, description = "Deleted"), (status = 409, description = "The run has not ended", body = ErrorBody)))]
pub(crate) async fn delete(
    State(state): State<AppRef>,
    Owner(owner): Owner,
    Path((thread_id, run_id)): Path<(String, String)>,
) -> ApiResult<Response> {
    runs::delete(&state, &owner, &thread_id, &run_id).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

#[utoipa::path(get, path = "/threads/{thread_id}/runs/{run_id}/join", tag = "thread-runs", summary = "Wait for a run's output",
    params(("thread_id" = String, Path, description = "Thread id"), ("run_id" = String, Path, description = "Run id")), responses((status = 200, description = "The final values; `__interrupt__` added when the run paused; `{\"__error__\": {error, message}}` when it failed", body = Object)))]
pub(crate) async fn join(
    State(state): State<AppRef>,
    Owner(owner): Owner,
    Path((thread_id, run_id)): Path<(String, String)>,
) -> ApiResult<Response> {
    let run = runs::find(&state, &owner, &thread_id, &run_id).await?;
    if let Some(body) = runs::settled_now(&state, &owner, &run).await {
        return Ok(Json(body).into_response());
    }
    Ok(wait_response(state, owner, run, HeaderMap::new(), None).await)
}

/// Query of `GET /threads/{thread_id}/runs/{run_id}/stream`.
#[derive(Deserialize, Default, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct JoinParams {
    /// Cancel the run when this client disconnects.
    cancel_on_disconnect: Option<bool>,
}

#[utoipa::path(get, path = "/threads/{thread_id}/runs/{run_id}/stream", tag = "thread-runs", summary = "Join a run's event stream",
    params(("thread_id" = String, Path, description = "Thread id"), ("run_id" = String, Path, description = "Run id"), JoinParams, ("last-event-id" = Option<String>, Header, description = "Resume after this event (resumable runs)")),
    responses((status = 200, description = "Server-sent events: `metadata`, then the requested modes, then `error` on failure", content_type = "text/event-stream", body = String)))]
pub(crate) async fn join_stream(
    State(state): State<AppRef>,
    Owner(owner): Owner,
    Path((thread_id, run_id)): Path<(String, String)>,
    Query(p): Query<JoinParams>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let run = runs::find(&state, &owner, &thread_id, &run_id).await?;
    let last = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    let cancel = p.cancel_on_disconnect.unwrap_or(false);
    match events::join(&state, &owner, &run, last, cancel).await {
        Joined::Settled(body) => {
            let frame = wire::sse_frame("values", &body, None);
            let mut res = Response::new(Body::from(frame));
            res.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/event-stream"),
            );
            Ok(res)
        }
        Joined::Follow(from) => Ok(sse_response(state, owner, run, from, HeaderMap::new())),
    }
}

/// Query of `POST /threads/{thread_id}/runs/{run_id}/cancel`.
#[derive(Deserialize, Default, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct CancelParams {
    /// `true` or `1`: answer once the run has stopped (204).
    wait: Option<String>,
    /// `interrupt` (the default: keep its checkpoints) or `rollback` (delete the run).
    action: Option<String>,
}

#[utoipa::path(post, path = "/threads/{thread_id}/runs/{run_id}/cancel", tag = "thread-runs", summary = "Cancel a run",
    params(("thread_id" = String, Path, description = "Thread id"), ("run_id" = String, Path, description = "Run id"), CancelParams),
    responses((status = 202, description = "Cancel requested"), (status = 204, description = "Cancelled (with `wait`)")))]
pub(crate) async fn cancel(
    State(state): State<AppRef>,
    Owner(owner): Owner,
    Path((thread_id, run_id)): Path<(String, String)>,
    Query(p): Query<CancelParams>,
) -> ApiResult<Response> {
    let action = match p.action.as_deref() {
        None => CancelAction::Interrupt,
        Some(a) => CancelAction::parse(a)
            .ok_or_else(|| ApiError::invalid(format!("action must be interrupt or rollback, not {a:?}")))?,
    };
    if matches!(p.wait.as_deref(), Some("1" | "true")) {
        runs::cancel_and_wait(&state, &owner, &thread_id, &run_id, action).await?;
        return Ok(StatusCode::NO_CONTENT.into_response());
    }
    runs::cancel(&state, &owner, Some(&thread_id), &run_id, action).await?;
    Ok(StatusCode::ACCEPTED.into_response())
}

/// `POST /runs/cancel`: `run_ids`, or `thread_id` with an optional `status`.
#[derive(Deserialize, Default, utoipa::ToSchema)]
#[serde(default)]
pub(crate) struct CancelManyBody {
    /// With `thread_id`: `pending`, `running` or `all` (the default).
    status: Option<String>,
    /// The thread whose runs to cancel (or of the `run_ids`).
    thread_id: Option<String>,
    /// The runs to cancel.
    run_ids: Option<Vec<String>>,
    /// `interrupt` (the default) or `rollback`.
    action: Option<String>,
}

#[utoipa::path(post, path = "/runs/cancel", tag = "stateless-runs", summary = "Cancel several runs",
    request_body = CancelManyBody, responses((status = 204, description = "Cancelled")))]
pub(crate) async fn cancel_many(
    State(state): State<AppRef>,
    Owner(owner): Owner,
    super::extract::Body(b): super::extract::Body<CancelManyBody>,
) -> ApiResult<Response> {
    let action = match b.action.as_deref() {
        None => CancelAction::Interrupt,
        Some(a) => {
            CancelAction::parse(a).ok_or_else(|| ApiError::invalid(format!("unknown action {a:?}")))?
        }
    };
    let targets = if let Some(run_ids) = b.run_ids {
        CancelTargets::Runs {
            thread_id: b.thread_id,
            run_ids,
        }
    } else if let Some(thread_id) = b.thread_id {
        let statuses = match b.status.as_deref() {
            Some("pending") => vec![RunStatus::Pending],
            Some("running") => vec![RunStatus::Running],
            None | Some("all") => vec![RunStatus::Pending, RunStatus::Running],
            Some(s) => return Err(ApiError::invalid(format!("unknown status {s:?}"))),
        };
        CancelTargets::Thread { thread_id, statuses }
    } else {
        return Err(ApiError::invalid(
            "give run_ids, or thread_id (with an optional status)",
        ));
    };
    runs::cancel_many(&state, &owner, targets, action).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}
