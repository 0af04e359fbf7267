//! `/threads`: CRUD, search, copy, prune, state and history.

use super::assistants::{page, sort_order};
use super::{AppRef, Owner};
use crate::db::{ThreadOutcome, ThreadQuery};
use crate::error::{parse_body, ApiError, ApiResult, ErrorBody};
use crate::hosted::HostedGraph;
use crate::models::{now_rfc3339, Thread, ThreadStatus};
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::sync::Arc;

pub(crate) async fn load(state: &AppRef, owner: &str, id: &str) -> ApiResult<Thread> {
    state
        .db
        .get_thread(owner, id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("thread {id}")))
}

/// A new thread row.
pub(crate) fn new_thread(id: String, metadata: Map<String, Value>, ttl: Option<Value>) -> Thread {
    let now = now_rfc3339();
    Thread {
        thread_id: id,
        created_at: now.clone(),
        updated_at: now.clone(),
        state_updated_at: now,
        metadata,
        config: json!({}),
        status: ThreadStatus::Idle,
        values: json!({}),
        interrupts: json!({}),
        error: None,
        ttl,
    }
}

/// The graph a thread runs (set on its metadata by its first run).
fn graph_of(state: &AppRef, t: &Thread) -> Option<Arc<dyn HostedGraph>> {
    let id = t.metadata.get("graph_id").and_then(Value::as_str)?;
    state.graphs.get(id).cloned()
}

fn ttl_value(v: Option<Value>) -> ApiResult<Option<Value>> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => {
            super::bounds::thread_ttl(&Value::Number(n.clone()))?;
            Ok(Some(json!({"strategy": "delete", "ttl": n})))
        }
        Some(Value::Object(o)) if o.get("ttl").is_some_and(Value::is_number) => {
            super::bounds::thread_ttl(o.get("ttl").unwrap_or(&Value::Null))?;
            Ok(Some(Value::Object(o)))
        }
        Some(other) => Err(ApiError::invalid(format!(
            "ttl must be minutes or {{\"strategy\": \"delete\", \"ttl\": minutes}}, not {other}"
        ))),
    }
}

/// `POST /threads`.
#[derive(Deserialize, Default, utoipa::ToSchema)]
pub(crate) struct CreateBody {
    thread_id: Option<String>,
    #[serde(default)]
    metadata: Option<Map<String, Value>>,
    if_exists: Option<String>,
    ttl: Option<Value>,
    #[serde(default)]
    supersteps: Option<Vec<Value>>,
}

#[utoipa::path(post, path = "/threads", tag = "threads", summary = "Create a thread",
    request_body = CreateBody,
    responses((status = 200, body = Thread), (status = 409, description = "The id exists", body = ErrorBody)))]
pub(crate) async fn create(
    State(state): State<AppRef>,
    Extension(Owner(owner)): Extension<Owner>,
    body: Bytes,
) -> ApiResult<Json<Thread>> {
    let b: CreateBody = parse_body(&body)?;
    let id = match b.thread_id {
        Some(id) if !id.is_empty() => id,
        _ => uuid::Uuid::now_v7().to_string(),
    };
    let t = new_thread(id.clone(), b.metadata.unwrap_or_default(), ttl_value(b.ttl)?);
    let t = match state.db.create_thread(&owner, &t).await {
        Ok(t) => t,
        Err(crate::db::DbError::Conflict(what)) => {
            // Thread ids are global: another owner's thread is "not found" here as on
            // every other route, never "already exists".
            let mine = load(&state, &owner, &id).await?;
            if b.if_exists.as_deref() == Some("do_nothing") {
                return Ok(Json(mine));
            }
            return Err(crate::db::DbError::Conflict(what).into());
        }
        Err(e) => return Err(e.into()),
    };
    if let Some(steps) = b.supersteps.filter(|s| !s.is_empty()) {
        let graph = graph_of(&state, &t).ok_or_else(|| {
            ApiError::invalid("supersteps need metadata.graph_id naming a registered graph")
        })?;
        for step in steps {
            let updates = step
                .get("updates")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            for u in updates {
                let values = u.get("values").filter(|v| !v.is_null()).cloned();
                let as_node = u.get("as_node").and_then(Value::as_str);
                graph.update_state(&id, None, values, as_node).await?;
            }
        }
        refresh(&state, &graph, &id).await?;
        return Ok(Json(load(&state, &owner, &id).await?));
    }
    Ok(Json(t))
}

/// Copy the latest state into the thread row after a state change outside a run.
async fn refresh(state: &AppRef, graph: &Arc<dyn HostedGraph>, id: &str) -> ApiResult<()> {
    let snap = graph.get_state(id, None).await?;
    let mut interrupts = Map::new();
    let mut any = false;
    if let Some(tasks) = snap
        .as_ref()
        .and_then(|s| s.get("tasks"))
        .and_then(Value::as_array)
    {
        for t in tasks {
            if let (Some(tid), Some(list)) = (t.get("id").and_then(Value::as_str), t.get("interrupts")) {
                if list.as_array().is_some_and(|l| !l.is_empty()) {
                    interrupts.insert(tid.to_owned(), list.clone());
                    any = true;
                }
            }
        }
    }
    let outcome = ThreadOutcome {
        status: if any {
            ThreadStatus::Interrupted
        } else {
            ThreadStatus::Idle
        },
        values: snap.and_then(|s| s.get("values").cloned()),
        interrupts: Value::Object(interrupts),
        error: None,
    };
    state.db.set_thread_outcome(id, &outcome).await?;
    Ok(())
}

#[utoipa::path(get, path = "/threads/{thread_id}", tag = "threads", summary = "Get a thread",
    params(("thread_id" = String, Path, description = "Thread id")), responses((status = 200, body = Thread)))]
pub(crate) async fn get_one(
    State(state): State<AppRef>,
    Extension(Owner(owner)): Extension<Owner>,
    Path(id): Path<String>,
) -> ApiResult<Json<Thread>> {
    Ok(Json(load(&state, &owner, &id).await?))
}

/// `PATCH /threads/{thread_id}`.
#[derive(Deserialize, Default, utoipa::ToSchema)]
pub(crate) struct PatchBody {
    #[serde(default)]
    metadata: Option<Map<String, Value>>,
    ttl: Option<Value>,
}

#[utoipa::path(patch, path = "/threads/{thread_id}", tag = "threads", summary = "Update a thread's metadata or ttl",
    params(("thread_id" = String, Path, description = "Thread id")), request_body = PatchBody,
    responses((status = 200, body = Thread), (status = 204, description = "With `Prefer: return=minimal`")))]
pub(crate) async fn patch(
    State(state): State<AppRef>,
    Extension(Owner(owner)): Extension<Owner>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult<Response> {
    let b: PatchBody = parse_body(&body)?;
    let t = state
        .db
        .patch_thread(&owner, &id, b.metadata.as_ref(), ttl_value(b.ttl)?)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("thread {id}")))?;
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
    Extension(Owner(owner)): Extension<Owner>,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    load(&state, &owner, &id).await?;
    state.cancel_local_thread(&id, crate::models::CancelAction::Interrupt);
    state.db.delete_thread(&owner, &id).await?;
    state.checkpointer.delete_thread(&id).await?;
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
    let (limit, offset) = page(b.limit, b.offset)?;
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
    Extension(Owner(owner)): Extension<Owner>,
    body: Bytes,
) -> ApiResult<Response> {
    let mut b: SearchBody = parse_body(&body)?;
    let select = b.select.take().unwrap_or_default();
    let q = query(b)?;
    let (list, total) = state.db.search_threads(&owner, &q).await?;
    super::page_response(&list, total, q.offset, &select)
}

#[utoipa::path(post, path = "/threads/count", tag = "threads", summary = "Count threads",
    request_body = SearchBody, responses((status = 200, body = i64)))]
pub(crate) async fn count(
    State(state): State<AppRef>,
    Extension(Owner(owner)): Extension<Owner>,
    body: Bytes,
) -> ApiResult<Json<i64>> {
    let mut b: SearchBody = parse_body(&body)?;
    b.limit = Some(1);
    b.offset = Some(0);
    let q = query(b)?;
    Ok(Json(state.db.search_threads(&owner, &q).await?.1))
}

#[utoipa::path(post, path = "/threads/{thread_id}/copy", tag = "threads", summary = "Copy a thread with its checkpoints",
    params(("thread_id" = String, Path, description = "Thread id")), responses((status = 200, body = Thread)))]
pub(crate) async fn copy(
    State(state): State<AppRef>,
    Extension(Owner(owner)): Extension<Owner>,
    Path(id): Path<String>,
) -> ApiResult<Json<Thread>> {
    let src = load(&state, &owner, &id).await?;
    let new_id = uuid::Uuid::now_v7().to_string();
    let mut t = new_thread(new_id.clone(), src.metadata.clone(), src.ttl.clone());
    t.values = src.values.clone();
    t.status = match src.status {
        ThreadStatus::Busy => ThreadStatus::Idle,
        s => s,
    };
    t.interrupts = src.interrupts.clone();
    let t = state.db.create_thread(&owner, &t).await?;
    state.checkpointer.copy_thread(&id, &new_id).await?;
    Ok(Json(t))
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
    Extension(Owner(owner)): Extension<Owner>,
    body: Bytes,
) -> ApiResult<Json<Value>> {
    let b: PruneBody = parse_body(&body)?;
    match b.strategy.as_deref() {
        None | Some("delete") => {}
        Some(s) => {
            return Err(ApiError::invalid(format!(
                "prune strategy {s:?} is not supported; use \"delete\""
            )))
        }
    }
    let mut pruned = 0;
    for id in &b.thread_ids {
        if state.db.get_thread(&owner, id).await?.is_some() {
            state.cancel_local_thread(id, crate::models::CancelAction::Interrupt);
            state.db.delete_thread(&owner, id).await?;
            state.checkpointer.delete_thread(id).await?;
            pruned += 1;
        }
    }
    Ok(Json(json!({ "pruned_count": pruned })))
}

fn empty_state() -> Value {
    json!({
        "values": {}, "next": [], "tasks": [], "checkpoint": null, "metadata": null,
        "created_at": null, "parent_checkpoint": null, "interrupts": [],
    })
}

async fn state_of(state: &AppRef, owner: &str, id: &str, checkpoint: Option<&str>) -> ApiResult<Value> {
    let t = load(state, owner, id).await?;
    let Some(graph) = graph_of(state, &t) else {
        return if checkpoint.is_some() {
            Err(ApiError::not_found(format!("checkpoint of thread {id}")))
        } else {
            Ok(empty_state())
        };
    };
    match graph.get_state(id, checkpoint).await? {
        Some(s) => Ok(s),
        None if checkpoint.is_some() => Err(ApiError::not_found(format!("checkpoint of thread {id}"))),
        None => Ok(empty_state()),
    }
}

#[utoipa::path(get, path = "/threads/{thread_id}/state", tag = "threads", summary = "The thread's latest state",
    params(("thread_id" = String, Path, description = "Thread id")), responses((status = 200, description = "A `ThreadState`: values, next, tasks, checkpoint, metadata, interrupts", body = Object)))]
pub(crate) async fn get_state(
    State(state): State<AppRef>,
    Extension(Owner(owner)): Extension<Owner>,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    Ok(Json(state_of(&state, &owner, &id, None).await?))
}

#[utoipa::path(get, path = "/threads/{thread_id}/state/{checkpoint_id}", tag = "threads", summary = "The thread's state at a checkpoint",
    params(("thread_id" = String, Path, description = "Thread id"), ("checkpoint_id" = String, Path, description = "Checkpoint id")),
    responses((status = 200, description = "A `ThreadState`", body = Object)))]
pub(crate) async fn state_at(
    State(state): State<AppRef>,
    Extension(Owner(owner)): Extension<Owner>,
    Path((id, checkpoint_id)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    Ok(Json(state_of(&state, &owner, &id, Some(&checkpoint_id)).await?))
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
    Extension(Owner(owner)): Extension<Owner>,
    Path(id): Path<String>,
    body: Bytes,
) -> ApiResult<Json<Value>> {
    let b: StateAtBody = parse_body(&body)?;
    let cp = checkpoint_id_of(b.checkpoint.as_ref());
    Ok(Json(state_of(&state, &owner, &id, cp.as_deref()).await?))
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
    Extension(Owner(owner)): Extension<Owner>,
    Path(id): Path<String>,
    body: Bytes,
) -> ApiResult<Json<Value>> {
    let b: UpdateBody = parse_body(&body)?;
    let t = load(&state, &owner, &id).await?;
    if t.status == ThreadStatus::Busy {
        return Err(ApiError::conflict(format!("thread {id} is busy with a run")));
    }
    let graph = graph_of(&state, &t).ok_or_else(|| {
        ApiError::invalid(format!(
            "thread {id} has no graph yet: run it once, or create it with metadata.graph_id"
        ))
    })?;
    let cp = b
        .checkpoint_id
        .or_else(|| checkpoint_id_of(b.checkpoint.as_ref()));
    let values = b.values.filter(|v| !v.is_null());
    let saved = graph
        .update_state(&id, cp.as_deref(), values, b.as_node.as_deref())
        .await?;
    refresh(&state, &graph, &id).await?;
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

async fn history(
    state: &AppRef,
    owner: &str,
    id: &str,
    limit: Option<usize>,
    before: Option<String>,
    metadata: Map<String, Value>,
) -> ApiResult<Json<Vec<Value>>> {
    let t = load(state, owner, id).await?;
    let Some(graph) = graph_of(state, &t) else {
        return Ok(Json(Vec::new()));
    };
    let limit = limit.unwrap_or(10).clamp(1, 1000);
    Ok(Json(graph.history(id, metadata, before, Some(limit)).await?))
}

#[utoipa::path(get, path = "/threads/{thread_id}/history", tag = "threads", summary = "Checkpoint history, newest first",
    params(("thread_id" = String, Path, description = "Thread id"), HistoryParams), responses((status = 200, description = "`ThreadState`s", body = Vec<Object>)))]
pub(crate) async fn history_get(
    State(state): State<AppRef>,
    Extension(Owner(owner)): Extension<Owner>,
    Path(id): Path<String>,
    Query(p): Query<HistoryParams>,
) -> ApiResult<Json<Vec<Value>>> {
    history(&state, &owner, &id, p.limit, p.before, Map::new()).await
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
    Extension(Owner(owner)): Extension<Owner>,
    Path(id): Path<String>,
    body: Bytes,
) -> ApiResult<Json<Vec<Value>>> {
    let b: HistoryBody = parse_body(&body)?;
    let limit = b.limit.and_then(|n| usize::try_from(n).ok());
    let before = checkpoint_id_of(b.before.as_ref());
    history(&state, &owner, &id, limit, before, b.metadata.unwrap_or_default()).await
}
