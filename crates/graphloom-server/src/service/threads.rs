//! Threads: one durable state each, per owner; its copy of the latest values, status and
//! interrupts; its checkpoints' state and history through its graph.

use crate::db::{DbError, ThreadOutcome, ThreadQuery};
use crate::error::{ServiceError, ServiceResult};
use crate::host::HostedGraph;
use crate::models::{now_rfc3339, CancelAction, Thread, ThreadStatus};
use crate::state::AppState;
use graphloom_core::checkpoint::CheckpointConfig;
use serde_json::{json, Map, Value};
use std::sync::Arc;

/// A thread of `owner` (another owner's is "not found").
pub(crate) async fn load(state: &AppState, owner: &str, id: &str) -> ServiceResult<Thread> {
    state
        .db
        .get_thread(owner, id)
        .await?
        .ok_or_else(|| ServiceError::not_found(format!("thread {id}")))
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
fn graph_of(state: &AppState, t: &Thread) -> Option<Arc<dyn HostedGraph>> {
    let id = t.metadata.get("graph_id").and_then(Value::as_str)?;
    state.graphs.get(id).cloned()
}

/// One update of a superstep a new thread starts with: `values` written as `as_node`.
pub(crate) struct SeedUpdate {
    pub values: Option<Value>,
    pub as_node: Option<String>,
}

/// A new thread, as the request gives it (checked at the edge).
pub(crate) struct NewThread {
    /// Its id; `None`: a new UUID.
    pub thread_id: Option<String>,
    pub metadata: Map<String, Value>,
    /// Time to live, in its stored form.
    pub ttl: Option<Value>,
    /// When the id exists: answer the existing thread instead of 409.
    pub if_exists_do_nothing: bool,
    /// Supersteps of updates to apply first (the thread's `metadata.graph_id` names the
    /// graph).
    pub supersteps: Vec<Vec<SeedUpdate>>,
}

/// Create a thread of `owner`.
pub(crate) async fn create(state: &AppState, owner: &str, new: NewThread) -> ServiceResult<Thread> {
    let id = match new.thread_id {
        Some(id) if !id.is_empty() => id,
        _ => uuid::Uuid::now_v7().to_string(),
    };
    let t = new_thread(id.clone(), new.metadata, new.ttl);
    let t = match state.db.create_thread(owner, &t).await {
        Ok(t) => t,
        Err(DbError::Conflict(what)) => {
            // Thread ids are global: another owner's thread is "not found" here as on
            // every other route, never "already exists".
            let mine = load(state, owner, &id).await?;
            if new.if_exists_do_nothing {
                return Ok(mine);
            }
            return Err(DbError::Conflict(what).into());
        }
        Err(e) => return Err(e.into()),
    };
    if new.supersteps.is_empty() {
        return Ok(t);
    }
    let graph = graph_of(state, &t).ok_or_else(|| {
        ServiceError::invalid("supersteps need metadata.graph_id naming a registered graph")
    })?;
    for step in new.supersteps {
        for u in step {
            graph
                .update_state(&id, None, u.values, u.as_node.as_deref())
                .await?;
        }
    }
    refresh(state, &graph, &id).await?;
    load(state, owner, &id).await
}

/// Copy the latest state into the thread row after a state change outside a run.
async fn refresh(state: &AppState, graph: &Arc<dyn HostedGraph>, id: &str) -> ServiceResult<()> {
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

/// Change a thread's metadata (merged) or ttl (in its stored form).
pub(crate) async fn patch(
    state: &AppState,
    owner: &str,
    id: &str,
    metadata: Option<&Map<String, Value>>,
    ttl: Option<Value>,
) -> ServiceResult<Thread> {
    state
        .db
        .patch_thread(owner, id, metadata, ttl)
        .await?
        .ok_or_else(|| ServiceError::not_found(format!("thread {id}")))
}

/// Delete a thread of `owner` with its runs (stopping those executing here) and
/// checkpoints.
pub(crate) async fn delete(state: &AppState, owner: &str, id: &str) -> ServiceResult<()> {
    load(state, owner, id).await?;
    remove(state, owner, id).await
}

async fn remove(state: &AppState, owner: &str, id: &str) -> ServiceResult<()> {
    state.cancel_local_thread(id, CancelAction::Interrupt);
    state.db.delete_thread(owner, id).await?;
    state.checkpointer.delete_thread(id).await?;
    Ok(())
}

/// Delete those of `ids` that are threads of `owner`; how many were.
pub(crate) async fn prune(state: &AppState, owner: &str, ids: &[String]) -> ServiceResult<usize> {
    let mut pruned = 0;
    for id in ids {
        if state.db.get_thread(owner, id).await?.is_some() {
            remove(state, owner, id).await?;
            pruned += 1;
        }
    }
    Ok(pruned)
}

/// A page of the owner's threads, and the total.
pub(crate) async fn search(
    state: &AppState,
    owner: &str,
    q: &ThreadQuery,
) -> ServiceResult<(Vec<Thread>, i64)> {
    Ok(state.db.search_threads(owner, q).await?)
}

/// A new thread of `owner` with the metadata, values, interrupts and checkpoints of
/// thread `id`.
pub(crate) async fn copy(state: &AppState, owner: &str, id: &str) -> ServiceResult<Thread> {
    let src = load(state, owner, id).await?;
    let new_id = uuid::Uuid::now_v7().to_string();
    let mut t = new_thread(new_id.clone(), src.metadata.clone(), src.ttl.clone());
    t.values = src.values.clone();
    t.status = match src.status {
        ThreadStatus::Busy => ThreadStatus::Idle,
        s => s,
    };
    t.interrupts = src.interrupts.clone();
    let t = state.db.create_thread(owner, &t).await?;
    state.checkpointer.copy_thread(id, &new_id).await?;
    Ok(t)
}

/// What the thread's checkpoints take in storage (the checkpointer's tables, and a mirror's
/// for graphs that checkpoint on their own), as the Agent Server reports it.
pub(crate) async fn storage(state: &AppState, owner: &str, id: &str) -> ServiceResult<Value> {
    load(state, owner, id).await?;
    Ok(state.checkpointer.thread_storage(id).await?.to_json(id))
}

fn empty_state() -> Value {
    json!({
        "values": {}, "next": [], "tasks": [], "checkpoint": null, "metadata": null,
        "created_at": null, "parent_checkpoint": null, "interrupts": [],
    })
}

/// The thread's state (a LangGraph `ThreadState`), latest or at a checkpoint.
pub(crate) async fn state_at(
    state: &AppState,
    owner: &str,
    id: &str,
    checkpoint: Option<&str>,
) -> ServiceResult<Value> {
    let t = load(state, owner, id).await?;
    let Some(graph) = graph_of(state, &t) else {
        return if checkpoint.is_some() {
            Err(ServiceError::not_found(format!("checkpoint of thread {id}")))
        } else {
            Ok(empty_state())
        };
    };
    match graph.get_state(id, checkpoint).await? {
        Some(s) => Ok(s),
        None if checkpoint.is_some() => Err(ServiceError::not_found(format!("checkpoint of thread {id}"))),
        None => Ok(empty_state()),
    }
}

/// Write `values` to the thread's state as `as_node` would (a new checkpoint, from
/// `checkpoint` or the latest); refused while a run is active.
pub(crate) async fn update_state(
    state: &AppState,
    owner: &str,
    id: &str,
    checkpoint: Option<&str>,
    values: Option<Value>,
    as_node: Option<&str>,
) -> ServiceResult<CheckpointConfig> {
    let t = load(state, owner, id).await?;
    if t.status == ThreadStatus::Busy {
        return Err(ServiceError::conflict(format!("thread {id} is busy with a run")));
    }
    let graph = graph_of(state, &t).ok_or_else(|| {
        ServiceError::invalid(format!(
            "thread {id} has no graph yet: run it once, or create it with metadata.graph_id"
        ))
    })?;
    let saved = graph.update_state(id, checkpoint, values, as_node).await?;
    refresh(state, &graph, id).await?;
    Ok(saved)
}

/// The thread's checkpoint history, newest first: at most `limit` (default 10, at most
/// 1000) states before checkpoint `before`, whose metadata holds `metadata`.
pub(crate) async fn history(
    state: &AppState,
    owner: &str,
    id: &str,
    limit: Option<usize>,
    before: Option<String>,
    metadata: Map<String, Value>,
) -> ServiceResult<Vec<Value>> {
    let t = load(state, owner, id).await?;
    let Some(graph) = graph_of(state, &t) else {
        return Ok(Vec::new());
    };
    let limit = limit.unwrap_or(10).clamp(1, 1000);
    Ok(graph.history(id, metadata, before, Some(limit)).await?)
}
