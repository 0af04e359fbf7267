//! Runs: background, streamed (SSE), waited; stateless; join; cancel; list.

use super::assistants::resolve;
use super::run_output::{settled_body, sse_response, wait_outcome, wait_response, StreamFrom};
use super::threads::{load, new_thread};
use super::{AppRef, Owner};
use crate::db::NewRun;
use crate::error::{parse_body, ApiError, ApiResult, ErrorBody};
use crate::models::{now_rfc3339, CancelAction, ClaimedRun, MultitaskStrategy, Run, RunStatus, Thread};
use crate::wire;
use crate::worker;
use axum::body::{Body, Bytes};
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::time::Duration;

/// A run request (every run-creating route).
#[derive(Deserialize, Default, utoipa::ToSchema)]
#[serde(default)]
pub(crate) struct RunBody {
    /// The assistant to run: an assistant id, or a graph id for its system assistant.
    #[schema(required)]
    assistant_id: Option<String>,
    /// Input: a partial update of the graph's state (its input schema).
    input: Option<Value>,
    /// Instead of input: `{"update", "resume", "goto"}`.
    command: Option<Value>,
    /// Metadata of the run (copied to its checkpoints).
    metadata: Option<Map<String, Value>>,
    /// Run configuration (`recursion_limit`, `configurable`, ...), merged over the
    /// assistant's.
    config: Option<Value>,
    /// Context handed to nodes, merged over the assistant's.
    context: Option<Value>,
    /// Start from this checkpoint (`{"checkpoint_id": ...}`): a fork.
    checkpoint: Option<Value>,
    /// Start from this checkpoint id: a fork.
    checkpoint_id: Option<String>,
    /// Pause before these nodes (a list of names, or `"*"`).
    interrupt_before: Option<Value>,
    /// Pause after these nodes (a list of names, or `"*"`).
    interrupt_after: Option<Value>,
    /// Stream modes: one or a list of `values`, `updates`, `messages`, `messages-tuple`,
    /// `custom`, `events`, `debug`, `tasks`, `checkpoints` (default `values`).
    stream_mode: Option<Value>,
    /// Include subgraph events.
    stream_subgraphs: Option<bool>,
    /// Keep the run's events for replay (`Last-Event-ID`) after it ends.
    stream_resumable: Option<bool>,
    /// When the thread already has an active run: `reject`, `interrupt`, `rollback` or
    /// `enqueue` (the default).
    multitask_strategy: Option<String>,
    /// When the thread does not exist: `reject` (404, the default) or `create`.
    if_not_exists: Option<String>,
    /// Start the run this many seconds from now (at most one year).
    #[schema(minimum = 0, maximum = 31_536_000)]
    after_seconds: Option<f64>,
    /// `sync`, `async` or `exit`: when checkpoints become durable.
    durability: Option<String>,
    /// When a streaming client disconnects: `continue` (the default) or `cancel`.
    on_disconnect: Option<String>,
    /// For stateless runs: `delete` the temporary thread (the default) or `keep` it.
    on_completion: Option<String>,
    /// Accepted and stored; not called yet.
    webhook: Option<String>,
    /// Accepted and stored.
    feedback_keys: Option<Value>,
}

/// A run as clients see it (without the internal owner field).
pub(crate) fn public(mut run: Run) -> Run {
    if let Some(kw) = run.kwargs.as_object_mut() {
        kw.remove("owner");
    }
    run
}

fn merge(base: &Value, over: &Value) -> Value {
    match (base, over) {
        (Value::Object(a), Value::Object(b)) => {
            let mut out = a.clone();
            for (k, v) in b {
                let merged = match out.get(k) {
                    Some(old) => merge(old, v),
                    None => v.clone(),
                };
                out.insert(k.clone(), merged);
            }
            Value::Object(out)
        }
        (_, Value::Null) => base.clone(),
        _ => over.clone(),
    }
}

fn stream_modes(v: Option<&Value>) -> ApiResult<Vec<String>> {
    let modes = match v {
        None | Some(Value::Null) => vec!["values".to_owned()],
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(a)) => a
            .iter()
            .map(|m| {
                m.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| ApiError::invalid("stream_mode must be a string or a list of strings"))
            })
            .collect::<ApiResult<_>>()?,
        Some(_) => {
            return Err(ApiError::invalid(
                "stream_mode must be a string or a list of strings",
            ))
        }
    };
    wire::parse_stream_modes(&modes).map_err(|e| ApiError::invalid(format!("stream_mode: {e}")))?;
    Ok(modes)
}

fn one_of<'a>(field: &str, v: Option<&'a str>, allowed: &[&str]) -> ApiResult<Option<&'a str>> {
    match v {
        Some(s) if !allowed.contains(&s) => Err(ApiError::invalid(format!(
            "{field} must be one of {}, not {s:?}",
            allowed.join(", ")
        ))),
        other => Ok(other),
    }
}

/// Validate a run request and put it in the queue.
pub(crate) async fn enqueue(
    state: &AppRef,
    owner: &str,
    thread_id: Option<String>,
    b: RunBody,
) -> ApiResult<(Run, bool)> {
    let (run, resumable, _) = enqueue_as(state, owner, thread_id, b, false).await?;
    Ok((run, resumable))
}

/// [`enqueue`]; `read`: also a reader of the run's events, taken before the run can start
/// (a run that ends unread drops its events at once).
async fn enqueue_as(
    state: &AppRef,
    owner: &str,
    thread_id: Option<String>,
    b: RunBody,
    read: bool,
) -> ApiResult<(Run, bool, Option<crate::broker::Reader>)> {
    let Some(assistant_id) = b.assistant_id.as_deref() else {
        return Err(ApiError::invalid("assistant_id is required"));
    };
    let assistant = resolve(state, owner, assistant_id).await?;
    let graph_id = assistant.graph_id.clone();
    if !state.graphs.contains_key(&graph_id) {
        return Err(ApiError::not_found(format!("graph {graph_id}")));
    }
    let modes = stream_modes(b.stream_mode.as_ref())?;
    let strategy = match one_of(
        "multitask_strategy",
        b.multitask_strategy.as_deref(),
        &["reject", "interrupt", "rollback", "enqueue"],
    )? {
        Some("reject") => MultitaskStrategy::Reject,
        Some("interrupt") => MultitaskStrategy::Interrupt,
        Some("rollback") => MultitaskStrategy::Rollback,
        _ => MultitaskStrategy::Enqueue,
    };
    let if_not_exists = one_of("if_not_exists", b.if_not_exists.as_deref(), &["reject", "create"])?;
    one_of("durability", b.durability.as_deref(), &["sync", "async", "exit"])?;
    let on_completion = one_of("on_completion", b.on_completion.as_deref(), &["delete", "keep"])?;
    one_of(
        "on_disconnect",
        b.on_disconnect.as_deref(),
        &["cancel", "continue"],
    )?;
    if b.input.as_ref().is_some_and(|v| !v.is_null()) && b.command.as_ref().is_some_and(|v| !v.is_null()) {
        return Err(ApiError::invalid("give either input or command, not both"));
    }
    if let Some(cmd) = b.command.as_ref().filter(|c| !c.is_null()) {
        if !cmd.is_object() {
            return Err(ApiError::invalid(
                "command must be an object {update, resume, goto}",
            ));
        }
    }
    let delay = super::bounds::after_seconds(b.after_seconds)?;
    let config = merge(&assistant.config, b.config.as_ref().unwrap_or(&Value::Null));
    // The assistant's config with the run's over it: what the worker reads.
    super::bounds::run_config(Some(&config))?;
    if let (Some(input), Some(validator)) = (
        b.input.as_ref().filter(|v| !v.is_null()),
        state.validators.get(&graph_id),
    ) {
        if let Some(err) = validator.iter_errors(input).next() {
            let path = err.instance_path().to_string();
            let at = if path.is_empty() {
                "input".to_owned()
            } else {
                format!("input{path}")
            };
            return Err(ApiError::invalid(format!("{at}: {err}")));
        }
    }
    // What the schema lets through, the run must be able to decode: check it here too.
    if let (Some(input), Some(g)) = (
        b.input.as_ref().filter(|v| !v.is_null()),
        state.graphs.get(&graph_id),
    ) {
        g.check_input(input)
            .map_err(|e| ApiError::invalid(format!("input: {e}")))?;
    }
    let metadata = b.metadata.clone().unwrap_or_default();
    let stateless = thread_id.is_none();
    let mut graph_meta = Map::new();
    graph_meta.insert("graph_id".into(), json!(graph_id));
    graph_meta.insert("assistant_id".into(), json!(assistant.assistant_id));
    let thread: Thread = match &thread_id {
        None => {
            let t = new_thread(uuid::Uuid::now_v7().to_string(), graph_meta.clone(), None);
            state.db.create_thread(owner, &t).await?
        }
        Some(id) => match state.db.get_thread(owner, id).await? {
            Some(t) => t,
            None if if_not_exists == Some("create") => {
                let t = new_thread(id.clone(), graph_meta.clone(), None);
                match state.db.create_thread(owner, &t).await {
                    Ok(t) => t,
                    Err(crate::db::DbError::Conflict(_)) => load(state, owner, id).await?,
                    Err(e) => return Err(e.into()),
                }
            }
            None => return Err(ApiError::not_found(format!("thread {id}"))),
        },
    };
    // The thread remembers the graph and assistant of its latest run (in the run's own
    // transaction).
    let thread_metadata = (thread.metadata.get("graph_id") != graph_meta.get("graph_id")
        || thread.metadata.get("assistant_id") != graph_meta.get("assistant_id"))
    .then_some(graph_meta);
    let context = merge(&assistant.context, b.context.as_ref().unwrap_or(&Value::Null));
    let checkpoint_id = b.checkpoint_id.clone().or_else(|| {
        b.checkpoint
            .as_ref()
            .and_then(|c| c.get("checkpoint_id"))
            .and_then(Value::as_str)
            .map(str::to_owned)
    });
    let resumable = b.stream_resumable.unwrap_or(false);
    let kwargs = json!({
        "input": b.input,
        "command": b.command,
        "config": config,
        "context": context,
        "metadata": metadata,
        "stream_mode": modes,
        "stream_subgraphs": b.stream_subgraphs.unwrap_or(false),
        "stream_resumable": resumable,
        "interrupt_before": b.interrupt_before,
        "interrupt_after": b.interrupt_after,
        "checkpoint_id": checkpoint_id,
        "durability": b.durability,
        "on_disconnect": b.on_disconnect.clone().unwrap_or_else(|| "continue".into()),
        "webhook": b.webhook,
        "feedback_keys": b.feedback_keys,
        "graph_id": graph_id,
        "assistant_id": assistant.assistant_id,
        "temporary": stateless && on_completion != Some("keep"),
        "owner": owner,
    });
    let now = now_rfc3339();
    let run = Run {
        run_id: uuid::Uuid::now_v7().to_string(),
        thread_id: thread.thread_id.clone(),
        assistant_id: assistant.assistant_id.clone(),
        created_at: now.clone(),
        updated_at: now,
        status: RunStatus::Pending,
        metadata,
        kwargs,
        multitask_strategy: strategy,
    };
    let cancel_active = match strategy {
        MultitaskStrategy::Interrupt => Some(CancelAction::Interrupt),
        MultitaskStrategy::Rollback => Some(CancelAction::Rollback),
        _ => None,
    };
    let mut new = NewRun {
        run,
        owner: owner.to_owned(),
        delay,
        reject_if_busy: strategy == MultitaskStrategy::Reject,
        cancel_active,
        thread_metadata,
        claim: None,
    };
    // A free worker slot here: claim the run in the transaction that creates it and start
    // it at once (no separate claim, no hand-off through the queue).
    let slot = worker::free_slot(state);
    if slot.is_some() {
        new.claim = Some((state.worker_id.clone(), state.config.lease));
    }
    state.broker.open(&new.run.run_id);
    let reader = if read {
        state.broker.reader(&new.run.run_id)
    } else {
        None
    };
    let run = state.db.create_run(&new).await?;
    if let Some(action) = cancel_active {
        state.cancel_local_thread(&run.thread_id, action);
    }
    let run = match (slot, run.status) {
        (Some(slot), RunStatus::Running) => {
            let claimed = ClaimedRun {
                run: run.clone(),
                attempt: 1,
            };
            let kwargs = crate::run::RunKwargs::of(&claimed.run.kwargs);
            worker::spawn_claimed(state, claimed, kwargs, slot);
            // As the reference server answers: the run as queued.
            Run {
                status: RunStatus::Pending,
                ..run
            }
        }
        _ => {
            state.wake.notify_one();
            run
        }
    };
    Ok((public(run), resumable, reader))
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
    params(("thread_id" = String, Path, description = "Thread id")), request_body = RunBody,
    responses((status = 200, body = Run), (status = 409, description = "The thread is busy and the strategy is `reject`", body = ErrorBody)))]
pub(crate) async fn create_bg(
    State(state): State<AppRef>,
    Extension(Owner(owner)): Extension<Owner>,
    Path(thread_id): Path<String>,
    body: Bytes,
) -> ApiResult<Json<Run>> {
    let (run, _) = enqueue(&state, &owner, Some(thread_id), parse_body(&body)?).await?;
    Ok(Json(run))
}

#[utoipa::path(post, path = "/runs", tag = "stateless-runs", summary = "Create a stateless background run",
    request_body = RunBody, responses((status = 200, body = Run)))]
pub(crate) async fn stateless_bg(
    State(state): State<AppRef>,
    Extension(Owner(owner)): Extension<Owner>,
    body: Bytes,
) -> ApiResult<Json<Run>> {
    let (run, _) = enqueue(&state, &owner, None, parse_body(&body)?).await?;
    Ok(Json(run))
}

#[utoipa::path(post, path = "/runs/batch", tag = "stateless-runs", summary = "Create several stateless background runs",
    request_body = Vec<RunBody>, responses((status = 200, body = Vec<Run>)))]
pub(crate) async fn batch(
    State(state): State<AppRef>,
    Extension(Owner(owner)): Extension<Owner>,
    body: Bytes,
) -> ApiResult<Json<Vec<Run>>> {
    let bodies: Vec<RunBody> = parse_body(&body)?;
    let mut out = Vec::with_capacity(bodies.len());
    for b in bodies {
        out.push(enqueue(&state, &owner, None, b).await?.0);
    }
    Ok(Json(out))
}

async fn stream_common(
    state: AppRef,
    owner: String,
    thread_id: Option<String>,
    body: Bytes,
) -> ApiResult<Response> {
    let b: RunBody = parse_body(&body)?;
    let cancel = b.on_disconnect.as_deref() == Some("cancel");
    let stateless = thread_id.is_none();
    let (run, resumable, reader) = enqueue_as(&state, &owner, thread_id, b, true).await?;
    let headers = location_headers(&run, stateless, "/stream");
    let from = StreamFrom {
        cursor: 0,
        with_ids: resumable,
        reader,
    };
    Ok(sse_response(state, owner, run, from, cancel, headers))
}

#[utoipa::path(post, path = "/threads/{thread_id}/runs/stream", tag = "thread-runs", summary = "Create a run and stream its events",
    params(("thread_id" = String, Path, description = "Thread id")), request_body = RunBody, responses((status = 200, description = "Server-sent events: `metadata`, then the requested modes, then `error` on failure", content_type = "text/event-stream", body = String), (status = 409, description = "The thread is busy and the strategy is `reject`", body = ErrorBody)))]
pub(crate) async fn create_stream(
    State(state): State<AppRef>,
    Extension(Owner(owner)): Extension<Owner>,
    Path(thread_id): Path<String>,
    body: Bytes,
) -> ApiResult<Response> {
    stream_common(state, owner, Some(thread_id), body).await
}

#[utoipa::path(post, path = "/runs/stream", tag = "stateless-runs", summary = "Create a stateless run and stream its events",
    request_body = RunBody, responses((status = 200, description = "Server-sent events: `metadata`, then the requested modes, then `error` on failure", content_type = "text/event-stream", body = String)))]
pub(crate) async fn stateless_stream(
    State(state): State<AppRef>,
    Extension(Owner(owner)): Extension<Owner>,
    body: Bytes,
) -> ApiResult<Response> {
    stream_common(state, owner, None, body).await
}

async fn wait_common(
    state: AppRef,
    owner: String,
    thread_id: Option<String>,
    body: Bytes,
) -> ApiResult<Response> {
    let stateless = thread_id.is_none();
    let (run, _) = enqueue(&state, &owner, thread_id, parse_body(&body)?).await?;
    let headers = location_headers(&run, stateless, "/join");
    Ok(wait_response(state, owner, run, headers).await)
}

#[utoipa::path(post, path = "/threads/{thread_id}/runs/wait", tag = "thread-runs", summary = "Create a run and wait for its output",
    params(("thread_id" = String, Path, description = "Thread id")), request_body = RunBody, responses((status = 200, description = "The final values; `__interrupt__` added when the run paused; `{\"__error__\": {error, message}}` when it failed", body = Object), (status = 409, description = "The thread is busy and the strategy is `reject`", body = ErrorBody)))]
pub(crate) async fn create_wait(
    State(state): State<AppRef>,
    Extension(Owner(owner)): Extension<Owner>,
    Path(thread_id): Path<String>,
    body: Bytes,
) -> ApiResult<Response> {
    wait_common(state, owner, Some(thread_id), body).await
}

#[utoipa::path(post, path = "/runs/wait", tag = "stateless-runs", summary = "Create a stateless run and wait for its output",
    request_body = RunBody, responses((status = 200, description = "The final values; `__interrupt__` added when the run paused; `{\"__error__\": {error, message}}` when it failed", body = Object)))]
pub(crate) async fn stateless_wait(
    State(state): State<AppRef>,
    Extension(Owner(owner)): Extension<Owner>,
    body: Bytes,
) -> ApiResult<Response> {
    wait_common(state, owner, None, body).await
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
    Extension(Owner(owner)): Extension<Owner>,
    Path(thread_id): Path<String>,
    Query(p): Query<ListParams>,
    Query(pairs): Query<Vec<(String, String)>>,
) -> ApiResult<Json<Value>> {
    load(&state, &owner, &thread_id).await?;
    let status = match p.status.as_deref() {
        None => None,
        Some(s) => {
            Some(RunStatus::parse(s).ok_or_else(|| ApiError::invalid(format!("unknown run status {s:?}")))?)
        }
    };
    let (limit, offset) = super::assistants::page(p.limit, p.offset)?;
    let runs = state
        .db
        .list_runs(&owner, &thread_id, status, limit, offset)
        .await?;
    // `select` repeats (`?select=run_id&select=status`).
    let select: Vec<String> = pairs
        .into_iter()
        .filter(|(k, _)| k == "select")
        .map(|(_, v)| v)
        .collect();
    let runs: Vec<Run> = runs.into_iter().map(public).collect();
    Ok(Json(super::select_fields(&runs, &select)?))
}

async fn find(state: &AppRef, owner: &str, thread_id: &str, run_id: &str) -> ApiResult<Run> {
    state
        .db
        .get_run(owner, Some(thread_id), run_id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("run {run_id}")))
}

#[utoipa::path(get, path = "/threads/{thread_id}/runs/{run_id}", tag = "thread-runs", summary = "Get a run",
    params(("thread_id" = String, Path, description = "Thread id"), ("run_id" = String, Path, description = "Run id")), responses((status = 200, body = Run)))]
pub(crate) async fn get_one(
    State(state): State<AppRef>,
    Extension(Owner(owner)): Extension<Owner>,
    Path((thread_id, run_id)): Path<(String, String)>,
) -> ApiResult<Json<Run>> {
    Ok(Json(public(find(&state, &owner, &thread_id, &run_id).await?)))
}

#[utoipa::path(delete, path = "/threads/{thread_id}/runs/{run_id}", tag = "thread-runs", summary = "Delete an ended run",
    params(("thread_id" = String, Path, description = "Thread id"), ("run_id" = String, Path, description = "Run id")), responses((status = 204, description = "Deleted"), (status = 409, description = "The run has not ended", body = ErrorBody)))]
pub(crate) async fn delete(
    State(state): State<AppRef>,
    Extension(Owner(owner)): Extension<Owner>,
    Path((thread_id, run_id)): Path<(String, String)>,
) -> ApiResult<Response> {
    let run = find(&state, &owner, &thread_id, &run_id).await?;
    if !run.status.is_final() {
        return Err(ApiError::conflict(format!(
            "run {run_id} is {}; cancel it before deleting it",
            run.status.as_str()
        )));
    }
    state.db.delete_run(&owner, &thread_id, &run_id).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

#[utoipa::path(get, path = "/threads/{thread_id}/runs/{run_id}/join", tag = "thread-runs", summary = "Wait for a run's output",
    params(("thread_id" = String, Path, description = "Thread id"), ("run_id" = String, Path, description = "Run id")), responses((status = 200, description = "The final values; `__interrupt__` added when the run paused; `{\"__error__\": {error, message}}` when it failed", body = Object)))]
pub(crate) async fn join(
    State(state): State<AppRef>,
    Extension(Owner(owner)): Extension<Owner>,
    Path((thread_id, run_id)): Path<(String, String)>,
) -> ApiResult<Response> {
    let run = find(&state, &owner, &thread_id, &run_id).await?;
    if run.status.is_final() && !state.broker.knows(&run_id) {
        return Ok(Json(settled_body(&state, &owner, &run).await).into_response());
    }
    Ok(wait_response(state, owner, run, HeaderMap::new()).await)
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
    Extension(Owner(owner)): Extension<Owner>,
    Path((thread_id, run_id)): Path<(String, String)>,
    Query(p): Query<JoinParams>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let run = find(&state, &owner, &thread_id, &run_id).await?;
    let resumable = run
        .kwargs
        .get("stream_resumable")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let last = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    let cursor = match last {
        Some(id) => id.saturating_add(1),
        None if resumable => 0,
        None => state.broker.len(&run_id),
    };
    // Ended and not replayable: its final values (its events are gone once read).
    if run.status.is_final() && !resumable {
        let body = settled_body(&state, &owner, &run).await;
        let frame = wire::sse_frame("values", &body, None);
        let mut res = Response::new(Body::from(frame));
        res.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/event-stream"),
        );
        return Ok(res);
    }
    let from = StreamFrom {
        cursor,
        with_ids: resumable,
        reader: None,
    };
    Ok(sse_response(
        state,
        owner,
        run,
        from,
        p.cancel_on_disconnect.unwrap_or(false),
        HeaderMap::new(),
    ))
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

async fn cancel_one(
    state: &AppRef,
    owner: &str,
    thread_id: Option<&str>,
    run_id: &str,
    action: CancelAction,
) -> ApiResult<Run> {
    let run = state
        .db
        .cancel_run(owner, thread_id, run_id, action)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("run {run_id}")))?;
    state.cancel_local(run_id, action);
    Ok(run)
}

#[utoipa::path(post, path = "/threads/{thread_id}/runs/{run_id}/cancel", tag = "thread-runs", summary = "Cancel a run",
    params(("thread_id" = String, Path, description = "Thread id"), ("run_id" = String, Path, description = "Run id"), CancelParams),
    responses((status = 202, description = "Cancel requested"), (status = 204, description = "Cancelled (with `wait`)")))]
pub(crate) async fn cancel(
    State(state): State<AppRef>,
    Extension(Owner(owner)): Extension<Owner>,
    Path((thread_id, run_id)): Path<(String, String)>,
    Query(p): Query<CancelParams>,
) -> ApiResult<Response> {
    let action = match p.action.as_deref() {
        None => CancelAction::Interrupt,
        Some(a) => CancelAction::parse(a)
            .ok_or_else(|| ApiError::invalid(format!("action must be interrupt or rollback, not {a:?}")))?,
    };
    let run = cancel_one(&state, &owner, Some(&thread_id), &run_id, action).await?;
    if matches!(p.wait.as_deref(), Some("1" | "true")) {
        if !run.status.is_final() {
            let _ = tokio::time::timeout(Duration::from_secs(60), wait_outcome(&state, &owner, &run)).await;
        }
        return Ok(StatusCode::NO_CONTENT.into_response());
    }
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
    Extension(Owner(owner)): Extension<Owner>,
    body: Bytes,
) -> ApiResult<Response> {
    let b: CancelManyBody = parse_body(&body)?;
    let action = match b.action.as_deref() {
        None => CancelAction::Interrupt,
        Some(a) => {
            CancelAction::parse(a).ok_or_else(|| ApiError::invalid(format!("unknown action {a:?}")))?
        }
    };
    let mut targets: Vec<(Option<String>, String)> = Vec::new();
    if let Some(ids) = b.run_ids {
        targets.extend(ids.into_iter().map(|id| (b.thread_id.clone(), id)));
    } else if let Some(tid) = &b.thread_id {
        let wanted: Vec<RunStatus> = match b.status.as_deref() {
            Some("pending") => vec![RunStatus::Pending],
            Some("running") => vec![RunStatus::Running],
            None | Some("all") => vec![RunStatus::Pending, RunStatus::Running],
            Some(s) => return Err(ApiError::invalid(format!("unknown status {s:?}"))),
        };
        for st in wanted {
            for r in state.db.list_runs(&owner, tid, Some(st), 1000, 0).await? {
                targets.push((Some(tid.clone()), r.run_id));
            }
        }
    } else {
        return Err(ApiError::invalid(
            "give run_ids, or thread_id (with an optional status)",
        ));
    }
    for (tid, id) in targets {
        cancel_one(&state, &owner, tid.as_deref(), &id, action).await?;
    }
    Ok(StatusCode::NO_CONTENT.into_response())
}
