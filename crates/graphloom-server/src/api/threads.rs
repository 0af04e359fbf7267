//! `/threads`: CRUD, search, copy, prune, state and history.

use super::assistants::{page, sort_order};
use super::{AppRef, Owner};
use crate::db::{ThreadOutcome, ThreadQuery};
use crate::error::{parse_body, ApiError, ApiResult};
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

#[derive(Deserialize, Default)]
struct CreateBody {
    thread_id: Option<String>,
    #[serde(default)]
    metadata: Option<Map<String, Value>>,
    if_exists: Option<String>,
    ttl: Option<Value>,
    #[serde(default)]
    supersteps: Option<Vec<Value>>,
}

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
        Err(crate::db::DbError::Conflict(_)) if b.if_exists.as_deref() == Some("do_nothing") => {
            return Ok(Json(load(&state, &owner, &id).await?));
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

pub(crate) async fn get_one(
    State(state): State<AppRef>,
    Extension(Owner(owner)): Extension<Owner>,
    Path(id): Path<String>,
) -> ApiResult<Json<Thread>> {
    Ok(Json(load(&state, &owner, &id).await?))
}

#[derive(Deserialize, Default)]
struct PatchBody {
    #[serde(default)]
    metadata: Option<Map<String, Value>>,
    ttl: Option<Value>,
}

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

#[derive(Deserialize, Default)]
struct SearchBody {
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

#[derive(Deserialize)]
struct PruneBody {
    thread_ids: Vec<String>,
    strategy: Option<String>,
}

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

pub(crate) async fn get_state(
    State(state): State<AppRef>,
    Extension(Owner(owner)): Extension<Owner>,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    Ok(Json(state_of(&state, &owner, &id, None).await?))
}

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

pub(crate) async fn state_at_body(
    State(state): State<AppRef>,
    Extension(Owner(owner)): Extension<Owner>,
    Path(id): Path<String>,
    body: Bytes,
) -> ApiResult<Json<Value>> {
    let b: Value = parse_body(&body)?;
    let cp = checkpoint_id_of(b.get("checkpoint"));
    Ok(Json(state_of(&state, &owner, &id, cp.as_deref()).await?))
}

#[derive(Deserialize, Default)]
struct UpdateBody {
    values: Option<Value>,
    as_node: Option<String>,
    checkpoint: Option<Value>,
    checkpoint_id: Option<String>,
}

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

#[derive(Deserialize, Default)]
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

pub(crate) async fn history_get(
    State(state): State<AppRef>,
    Extension(Owner(owner)): Extension<Owner>,
    Path(id): Path<String>,
    Query(p): Query<HistoryParams>,
) -> ApiResult<Json<Vec<Value>>> {
    history(&state, &owner, &id, p.limit, p.before, Map::new()).await
}

pub(crate) async fn history_post(
    State(state): State<AppRef>,
    Extension(Owner(owner)): Extension<Owner>,
    Path(id): Path<String>,
    body: Bytes,
) -> ApiResult<Json<Vec<Value>>> {
    let b: Value = parse_body(&body)?;
    let limit = b
        .get("limit")
        .and_then(Value::as_u64)
        .and_then(|n| usize::try_from(n).ok());
    let before = checkpoint_id_of(b.get("before"));
    let metadata = b
        .get("metadata")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    history(&state, &owner, &id, limit, before, metadata).await
}
