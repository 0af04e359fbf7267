//! `/threads`: CRUD, search, copy, prune, state and history.

use super::assistants::sort_order;
use super::auth::Owner;
use super::extract::Body;
use super::respond::page_response;
use crate::api::error::{ApiError, ApiResult, ErrorBody};
use crate::db::ThreadQuery;
use crate::models::{Thread, ThreadStatus};
use crate::service::threads::{self, NewThread, SeedUpdate};
use crate::state::AppRef;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Map, Value};

/// A thread's `ttl` as the request gives it (minutes, or `{"strategy": "delete", "ttl":
/// minutes}`), in its stored form, within the bounds.
fn ttl_value(v: Option<Value>) -> ApiResult<Option<Value>> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => {
            super::bounds::thread_ttl(&Value::Number(n.clone()))?;
            Ok(Some(json!({"strategy": "delete", "ttl": n})))
        }
        Some(Value::Object(o)) if o.get("ttl").is_some_and(Value::is_number) => {
            super::bounds::thread_ttl(o.get("ttl").unwrap_or(&Value::Null))?;
            match o.get("strategy") {
                None | Some(Value::Null) => {}
                Some(Value::String(s)) if crate::db::TtlStrategy::parse(s).is_some() => {}
                Some(other) => {
                    return Err(ApiError::invalid(format!(
                        "ttl strategy must be \"delete\" or \"keep_latest\", not {other}"
                    )))
                }
            }
            Ok(Some(Value::Object(o)))
        }
        Some(other) => Err(ApiError::invalid(format!(
            "ttl must be minutes or {{\"strategy\": \"delete\" | \"keep_latest\", \"ttl\": minutes}}, not {other}"
        ))),
    }
}

/// `POST /threads`.
#[derive(Deserialize, Default, utoipa::ToSchema)]
pub(crate) struct CreateBody {
    /// Its id (default: a new UUID).
    thread_id: Option<String>,
    /// Free metadata (`graph_id` names the graph of `supersteps`).
    #[serde(default)]
    metadata: Option<Map<String, Value>>,
    /// `do_nothing`: when the id exists, answer that thread instead of 409.
    if_exists: Option<String>,
    /// Time to live: minutes, or `{"strategy": "delete", "ttl": minutes}`.
    ttl: Option<Value>,
    /// State updates to start from, a superstep each.
    #[serde(default)]
    supersteps: Option<Vec<SuperstepBody>>,
}

/// One superstep of [`CreateBody::supersteps`].
#[derive(Deserialize, Default, utoipa::ToSchema)]
pub(crate) struct SuperstepBody {
    /// Its updates.
    #[serde(default)]
    updates: Vec<SuperstepUpdate>,
}

/// One update of a [`SuperstepBody`].
#[derive(Deserialize, Default, utoipa::ToSchema)]
pub(crate) struct SuperstepUpdate {
    /// The values written.
    #[serde(default)]
    values: Option<Value>,
    /// The node that writes them.
    #[serde(default)]
    as_node: Option<String>,
}

#[utoipa::path(post, path = "/threads", tag = "threads", summary = "Create a thread",
    request_body = CreateBody,
    responses((status = 200, body = Thread), (status = 409, description = "The id exists", body = ErrorBody)))]
pub(crate) async fn create(
    State(state): State<AppRef>,
    Owner(owner): Owner,
    Body(b): Body<CreateBody>,
) -> ApiResult<Json<Thread>> {
    let supersteps = b
        .supersteps
        .unwrap_or_default()
        .into_iter()
        .map(|step| {
            step.updates
                .into_iter()
                .map(|u| SeedUpdate {
                    values: u.values.filter(|v| !v.is_null()),
                    as_node: u.as_node,
                })
                .collect()
        })
        .collect();
    let new = NewThread {
        thread_id: b.thread_id,
        metadata: b.metadata.unwrap_or_default(),
        ttl: ttl_value(b.ttl)?,
        if_exists_do_nothing: b.if_exists.as_deref() == Some("do_nothing"),
        supersteps,
    };
    Ok(Json(threads::create(&state, &owner, new).await?))
}

#[utoipa::path(get, path = "/threads/{thread_id}", tag = "threads", summary = "Get a thread",
    params(("thread_id" = String, Path, description = "Thread id")), responses((status = 200, body = Thread)))]
pub(crate) async fn get_one(
    State(state): State<AppRef>,
    Owner(owner): Owner,
    Path(id): Path<String>,
) -> ApiResult<Json<Thread>> {
    Ok(Json(threads::load(&state, &owner, &id).await?))
}

/// `PATCH /threads/{thread_id}`.
#[derive(Deserialize, Default, utoipa::ToSchema)]
pub(crate) struct PatchBody {
    /// Metadata merged into the thread's.
    #[serde(default)]
    metadata: Option<Map<String, Value>>,
    /// Time to live: minutes, or `{"strategy": "delete", "ttl": minutes}`.
    ttl: Option<Value>,
}

#[utoipa::path(patch, path = "/threads/{thread_id}", tag = "threads", summary = "Update a thread's metadata or ttl",
    params(("thread_id" = String, Path, description = "Thread id")), request_body = PatchBody,
    responses((status = 200, body = Thread), (status = 204, description = "With `Prefer: return=minimal`")))]
pub(crate) async fn patch(
    State(state): State<AppRef>,
    Owner(owner): Owner,
    Path(id): Path<String>,
    headers: HeaderMap,
    Body(b): Body<PatchBody>,
) -> ApiResult<Response> {
    let ttl = ttl_value(b.ttl)?;
    let t = threads::patch(&state, &owner, &id, b.metadata.as_ref(), ttl).await?;
    // `Prefer: return=minimal` (the SDK's `return_minimal=True`): no body.
    let minimal = headers
        .get_all("prefer")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.split([',', ';']).any(|p| p.trim() == "return=minimal"));
    if minimal {
        return Ok(axum::http::StatusCode::NO_CONTENT.into_response());
    }
    Ok(Json(t).into_response())
}

#[utoipa::path(delete, path = "/threads/{thread_id}", tag = "threads", summary = "Delete a thread and its checkpoints",
    params(("thread_id" = String, Path, description = "Thread id")), responses((status = 200, description = "Deleted", body = Object)))]
pub(crate) async fn delete(
    State(state): State<AppRef>,
    Owner(owner): Owner,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    threads::delete(&state, &owner, &id).await?;
    Ok(Json(json!({})))
}

/// `POST /threads/search` and `/threads/count`.
#[derive(Deserialize, Default, utoipa::ToSchema)]
pub(crate) struct SearchBody {
    ids: Option<Vec<String>>,
    #[serde(default)]
    metadata: Option<Map<String, Value>>,
    #[serde(default)]
    values: Option<Map<String, Value>>,
    status: Option<String>,
    limit: Option<i64>,
    offset: Option<i64>,
    sort_by: Option<String>,
    sort_order: Option<String>,
    #[serde(default)]
    select: Option<Vec<String>>,
}

fn query(b: SearchBody) -> ApiResult<ThreadQuery> {
    let (limit, offset) = crate::service::page(b.limit, b.offset)?;
    let status = match b.status.as_deref() {
        None => None,
        Some(s) => Some(
            ThreadStatus::parse(s)
                .ok_or_else(|| ApiError::invalid(format!("unknown thread status {s:?}")))?,
        ),
    };
    if let Some(s) = &b.sort_by {
        if !["thread_id", "status", "created_at", "updated_at"].contains(&s.as_str()) {
            return Err(ApiError::invalid(format!("cannot sort threads by {s:?}")));
        }
    }
    Ok(ThreadQuery {
        ids: b.ids,
        metadata: b.metadata.unwrap_or_default(),
        values: b.values.unwrap_or_default(),
        status,
        limit,
        offset,
        sort_by: b.sort_by,
        sort_order: sort_order(b.sort_order.as_deref())?,
    })
}

#[utoipa::path(post, path = "/threads/search", tag = "threads", summary = "Search threads",
    request_body = SearchBody,
    responses((status = 200, body = Vec<Thread>, headers(("x-pagination-total" = i64), ("x-pagination-next" = i64)))))]
pub(crate) async fn search(
    State(state): State<AppRef>,
    Owner(owner): Owner,
    Body(mut b): Body<SearchBody>,
) -> ApiResult<Response> {
    let select = b.select.take().unwrap_or_default();
    let q = query(b)?;
    let (list, total) = threads::search(&state, &owner, &q).await?;
    page_response(&list, total, q.offset, &select)
}

#[utoipa::path(post, path = "/threads/count", tag = "threads", summary = "Count threads",
    request_body = SearchBody, responses((status = 200, body = i64)))]
pub(crate) async fn count(
    State(state): State<AppRef>,
    Owner(owner): Owner,
    Body(mut b): Body<SearchBody>,
) -> ApiResult<Json<i64>> {
    b.limit = Some(1);
    b.offset = Some(0);
    let q = query(b)?;
    Ok(Json(threads::search(&state, &owner, &q).await?.1))
}

#[utoipa::path(post, path = "/threads/{thread_id}/copy", tag = "threads", summary = "Copy a thread with its checkpoints",
    params(("thread_id" = String, Path, description = "Thread id")), responses((status = 200, body = Thread)))]
pub(crate) async fn copy(
    State(state): State<AppRef>,
    Owner(owner): Owner,
    Path(id): Path<String>,
) -> ApiResult<Json<Thread>> {
    Ok(Json(threads::copy(&state, &owner, &id).await?))
}

#[utoipa::path(get, path = "/threads/{thread_id}/storage", tag = "threads", summary = "What the thread's checkpoints take in storage",
    params(("thread_id" = String, Path, description = "Thread id")),
    responses((status = 200, description = "`{thread_id, total_bytes, checkpoints: {count, bytes}, channel_values: {count, bytes, by_channel: {<channel>: {versions, bytes}}}, pending_writes: {count, bytes}}`", body = Object)))]
pub(crate) async fn storage(
    State(state): State<AppRef>,
    Owner(owner): Owner,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    Ok(Json(threads::storage(&state, &owner, &id).await?))
}

/// `POST /threads/prune`.
#[derive(Deserialize, utoipa::ToSchema)]
pub(crate) struct PruneBody {
    thread_ids: Vec<String>,
    strategy: Option<String>,
}

#[utoipa::path(post, path = "/threads/prune", tag = "threads", summary = "Delete threads",
    request_body = PruneBody, responses((status = 200, description = "`{pruned_count}`", body = Object)))]
pub(crate) async fn prune(
    State(state): State<AppRef>,
    Owner(owner): Owner,
    Body(b): Body<PruneBody>,
) -> ApiResult<Json<Value>> {
    match b.strategy.as_deref() {
        None | Some("delete") => {}
        Some(s) => {
            return Err(ApiError::invalid(format!(
                "prune strategy {s:?} is not supported; use \"delete\""
            )))
        }
    }
    let pruned = threads::prune(&state, &owner, &b.thread_ids).await?;
    Ok(Json(json!({ "pruned_count": pruned })))
}

#[utoipa::path(get, path = "/threads/{thread_id}/state", tag = "threads", summary = "The thread's latest state",
    params(("thread_id" = String, Path, description = "Thread id")), responses((status = 200, description = "A `ThreadState`: values, next, tasks, checkpoint, metadata, interrupts", body = Object)))]
pub(crate) async fn get_state(
    State(state): State<AppRef>,
    Owner(owner): Owner,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    Ok(Json(threads::state_at(&state, &owner, &id, None).await?))
}

#[utoipa::path(get, path = "/threads/{thread_id}/state/{checkpoint_id}", tag = "threads", summary = "The thread's state at a checkpoint",
    params(("thread_id" = String, Path, description = "Thread id"), ("checkpoint_id" = String, Path, description = "Checkpoint id")),
    responses((status = 200, description = "A `ThreadState`", body = Object)))]
pub(crate) async fn state_at(
    State(state): State<AppRef>,
    Owner(owner): Owner,
    Path((id, checkpoint_id)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    Ok(Json(
        threads::state_at(&state, &owner, &id, Some(&checkpoint_id)).await?,
    ))
}

/// A checkpoint id given as text or as `{"checkpoint_id": ...}` (or a config with
/// `configurable.checkpoint_id`).
fn checkpoint_id_of(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::String(s) => Some(s.clone()),
        Value::Object(o) => o
            .get("checkpoint_id")
            .or_else(|| o.get("configurable").and_then(|c| c.get("checkpoint_id")))
            .and_then(Value::as_str)
            .map(str::to_owned),
        _ => None,
    }
}

/// `POST /threads/{thread_id}/state/checkpoint`.
#[derive(Deserialize, Default, utoipa::ToSchema)]
#[serde(default)]
pub(crate) struct StateAtBody {
    /// The checkpoint: its id, `{"checkpoint_id": ...}`, or a config with
    /// `configurable.checkpoint_id`.
    checkpoint: Option<Value>,
}

#[utoipa::path(post, path = "/threads/{thread_id}/state/checkpoint", tag = "threads", summary = "The thread's state at a checkpoint",
    params(("thread_id" = String, Path, description = "Thread id")), request_body = StateAtBody, responses((status = 200, description = "A `ThreadState`", body = Object)))]
pub(crate) async fn state_at_body(
    State(state): State<AppRef>,
    Owner(owner): Owner,
    Path(id): Path<String>,
    Body(b): Body<StateAtBody>,
) -> ApiResult<Json<Value>> {
    let cp = checkpoint_id_of(b.checkpoint.as_ref());
    Ok(Json(threads::state_at(&state, &owner, &id, cp.as_deref()).await?))
}

/// `POST /threads/{thread_id}/state`.
#[derive(Deserialize, Default, utoipa::ToSchema)]
pub(crate) struct UpdateBody {
    values: Option<Value>,
    as_node: Option<String>,
    checkpoint: Option<Value>,
    checkpoint_id: Option<String>,
}

#[utoipa::path(post, path = "/threads/{thread_id}/state", tag = "threads", summary = "Update the state as a node (a new checkpoint)",
    params(("thread_id" = String, Path, description = "Thread id")), request_body = UpdateBody,
    responses((status = 200, description = "`{checkpoint}`: the new checkpoint", body = Object), (status = 409, description = "The thread is busy", body = ErrorBody)))]
pub(crate) async fn update_state(
    State(state): State<AppRef>,
    Owner(owner): Owner,
    Path(id): Path<String>,
    Body(b): Body<UpdateBody>,
) -> ApiResult<Json<Value>> {
    let cp = b
        .checkpoint_id
        .or_else(|| checkpoint_id_of(b.checkpoint.as_ref()));
    let values = b.values.filter(|v| !v.is_null());
    let saved =
        threads::update_state(&state, &owner, &id, cp.as_deref(), values, b.as_node.as_deref()).await?;
    Ok(Json(json!({
        "checkpoint": {
            "thread_id": saved.thread_id,
            "checkpoint_ns": saved.checkpoint_ns,
            "checkpoint_id": saved.checkpoint_id,
            "checkpoint_map": null,
        }
    })))
}

/// Query of `GET /threads/{thread_id}/history`.
#[derive(Deserialize, Default, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct HistoryParams {
    limit: Option<usize>,
    before: Option<String>,
}

#[utoipa::path(get, path = "/threads/{thread_id}/history", tag = "threads", summary = "Checkpoint history, newest first",
    params(("thread_id" = String, Path, description = "Thread id"), HistoryParams), responses((status = 200, description = "`ThreadState`s", body = Vec<Object>)))]
pub(crate) async fn history_get(
    State(state): State<AppRef>,
    Owner(owner): Owner,
    Path(id): Path<String>,
    Query(p): Query<HistoryParams>,
) -> ApiResult<Json<Vec<Value>>> {
    let states = threads::history(&state, &owner, &id, p.limit, p.before, Map::new()).await?;
    Ok(Json(states))
}

/// `POST /threads/{thread_id}/history`.
#[derive(Deserialize, Default, utoipa::ToSchema)]
#[serde(default)]
pub(crate) struct HistoryBody {
    /// At most this many states (default 10, at most 1000).
    limit: Option<u64>,
    /// Only checkpoints before this one (an id or `{"checkpoint_id": ...}`).
    before: Option<Value>,
    /// Only checkpoints whose metadata holds these entries.
    metadata: Option<Map<String, Value>>,
    /// Accepted for the clients' sake; the history is of the thread's root graph.
    checkpoint: Option<Value>,
}

#[utoipa::path(post, path = "/threads/{thread_id}/history", tag = "threads", summary = "Checkpoint history with filters, newest first",
    params(("thread_id" = String, Path, description = "Thread id")), request_body = HistoryBody, responses((status = 200, description = "`ThreadState`s", body = Vec<Object>)))]
pub(crate) async fn history_post(
    State(state): State<AppRef>,
    Owner(owner): Owner,
    Path(id): Path<String>,
    Body(b): Body<HistoryBody>,
) -> ApiResult<Json<Vec<Value>>> {
    let limit = b.limit.and_then(|n| usize::try_from(n).ok());
    let before = checkpoint_id_of(b.before.as_ref());
    let metadata = b.metadata.unwrap_or_default();
    Ok(Json(
        threads::history(&state, &owner, &id, limit, before, metadata).await?,
    ))
}
