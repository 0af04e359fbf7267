//! Assistants: a graph with its configuration, per owner; every graph also has a system
//! assistant (owner `""`) that every owner sees.

use crate::db::{AssistantPatch, AssistantQuery, DbError, SortOrder};
use crate::error::{ServiceError, ServiceResult};
use crate::host::HostedGraph;
use crate::models::{now_rfc3339, Assistant};
use crate::state::AppState;
use serde_json::{json, Map, Value};
use std::sync::Arc;

/// The id of the system assistant of a graph: UUID v5 of the graph id, as the reference
/// server computes it, so clients that hard-code it keep working.
#[must_use]
pub fn system_assistant_id(graph_id: &str) -> String {
    let ns = uuid::Uuid::from_u128(0x6ba7_b821_9dad_11d1_80b4_00c0_4fd4_30c8);
    uuid::Uuid::new_v5(&ns, graph_id.as_bytes()).to_string()
}

/// An assistant visible to `owner`: its own, or a system one (owner `""`). `id` may also be
/// a graph id, naming that graph's system assistant.
pub(crate) async fn resolve(state: &AppState, owner: &str, id: &str) -> ServiceResult<Assistant> {
    if let Some(a) = state.db.get_assistant(owner, id).await? {
        return Ok(a);
    }
    if !owner.is_empty() {
        if let Some(a) = state.db.get_assistant("", id).await? {
            return Ok(a);
        }
    }
    if state.graphs.contains_key(id) {
        if let Some(a) = state.db.get_assistant("", &system_assistant_id(id)).await? {
            return Ok(a);
        }
    }
    Err(ServiceError::not_found(format!("assistant {id}")))
}

/// The compiled graph of an assistant.
pub(crate) fn graph_of(state: &AppState, a: &Assistant) -> ServiceResult<Arc<dyn HostedGraph>> {
    state
        .graphs
        .get(&a.graph_id)
        .cloned()
        .ok_or_else(|| ServiceError::not_found(format!("graph {}", a.graph_id)))
}

/// A new assistant, as the request gives it (checked at the edge).
pub(crate) struct NewAssistant {
    pub graph_id: String,
    /// Its id; `None`: a new UUID.
    pub assistant_id: Option<String>,
    pub config: Option<Value>,
    pub context: Option<Value>,
    pub metadata: Option<Map<String, Value>>,
    pub name: Option<String>,
    pub description: Option<String>,
    /// When the id exists: answer the existing assistant instead of 409.
    pub if_exists_do_nothing: bool,
}

/// Create an assistant of `owner`.
pub(crate) async fn create(state: &AppState, owner: &str, new: NewAssistant) -> ServiceResult<Assistant> {
    if !state.graphs.contains_key(&new.graph_id) {
        return Err(ServiceError::not_found(format!(
            "graph {} (registered: {})",
            new.graph_id,
            state.graphs.keys().cloned().collect::<Vec<_>>().join(", ")
        )));
    }
    let id = new
        .assistant_id
        .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    let now = now_rfc3339();
    let a = Assistant {
        assistant_id: id.clone(),
        graph_id: new.graph_id.clone(),
        config: new.config.unwrap_or_else(|| json!({})),
        context: new.context.unwrap_or_else(|| json!({})),
        created_at: now.clone(),
        updated_at: now,
        metadata: new.metadata.unwrap_or_default(),
        version: 1,
        name: new.name.unwrap_or(new.graph_id),
        description: new.description,
    };
    match state.db.create_assistant(owner, &a).await {
        Ok(a) => Ok(a),
        Err(DbError::Conflict(what)) => {
            // Another owner's assistant is "not found", never "already exists".
            let visible = resolve(state, owner, &id).await?;
            if new.if_exists_do_nothing {
                return Ok(visible);
            }
            Err(DbError::Conflict(what).into())
        }
        Err(e) => Err(e.into()),
    }
}

/// Change an assistant of `owner` (a new version).
pub(crate) async fn patch(
    state: &AppState,
    owner: &str,
    id: &str,
    p: AssistantPatch,
) -> ServiceResult<Assistant> {
    if let Some(g) = &p.graph_id {
        if !state.graphs.contains_key(g) {
            return Err(ServiceError::not_found(format!("graph {g}")));
        }
    }
    state
        .db
        .patch_assistant(owner, id, p)
        .await?
        .ok_or_else(|| ServiceError::not_found(format!("assistant {id}")))
}

/// Delete an assistant of `owner` and its versions.
pub(crate) async fn delete(state: &AppState, owner: &str, id: &str) -> ServiceResult<()> {
    if state.db.delete_assistant(owner, id).await? {
        Ok(())
    } else {
        Err(ServiceError::not_found(format!("assistant {id}")))
    }
}

/// A page of the owner's assistants plus the system ones (when the owner is not the
/// system), and the total.
pub(crate) async fn search(
    state: &AppState,
    owner: &str,
    q: &AssistantQuery,
) -> ServiceResult<(Vec<Assistant>, i64)> {
    if owner.is_empty() {
        return Ok(state.db.search_assistants("", q).await?);
    }
    let wide = AssistantQuery {
        limit: q.limit.saturating_add(q.offset),
        offset: 0,
        ..q.clone()
    };
    let (mut mine, n1) = state.db.search_assistants(owner, &wide).await?;
    let (system, n2) = state.db.search_assistants("", &wide).await?;
    mine.extend(system);
    let desc = q.sort_order == SortOrder::Desc;
    mine.sort_by(|a, b| {
        let o = a
            .created_at
            .cmp(&b.created_at)
            .then(a.assistant_id.cmp(&b.assistant_id));
        if desc {
            o.reverse()
        } else {
            o
        }
    });
    let page = mine
        .into_iter()
        .skip(usize::try_from(q.offset).unwrap_or(0))
        .take(usize::try_from(q.limit).unwrap_or(0))
        .collect();
    Ok((page, n1 + n2))
}

/// The input, output, state and context schemas of an assistant's graph.
pub(crate) async fn schemas(state: &AppState, owner: &str, id: &str) -> ServiceResult<Value> {
    let a = resolve(state, owner, id).await?;
    let g = graph_of(state, &a)?;
    Ok(json!({
        "graph_id": a.graph_id,
        "input_schema": g.input_schema(),
        "output_schema": g.output_schema(),
        "state_schema": g.state_schema(),
        "config_schema": {"type": "object", "properties": {}},
        "context_schema": {"type": "object", "additionalProperties": true},
    }))
}

/// The subgraph nodes of an assistant's graph by namespace, each with its schemas (a
/// subgraph's state describes its input and output too). `only` keeps that namespace
/// (and, with `recurse`, the ones under it).
pub(crate) async fn subgraphs(
    state: &AppState,
    owner: &str,
    id: &str,
    only: Option<&str>,
    recurse: bool,
) -> ServiceResult<Value> {
    let a = resolve(state, owner, id).await?;
    let g = graph_of(state, &a)?;
    let mut out = Map::new();
    for (ns, name, schema) in g.subgraphs(recurse || only.is_some()) {
        if let Some(only) = only {
            let under = ns.strip_prefix(only).is_some_and(|rest| rest.starts_with('|'));
            if ns != only && !(recurse && under) {
                continue;
            }
        }
        out.insert(
            ns,
            json!({
                "graph_id": name,
                "input_schema": schema,
                "output_schema": schema,
                "state_schema": schema,
                "config_schema": {"type": "object", "properties": {}},
                "context_schema": {"type": "object", "additionalProperties": true},
            }),
        );
    }
    Ok(Value::Object(out))
}

/// The versions of an assistant, newest first.
pub(crate) async fn versions(
    state: &AppState,
    owner: &str,
    id: &str,
    metadata: &Map<String, Value>,
    (limit, offset): (i64, i64),
) -> ServiceResult<Vec<Assistant>> {
    let a = resolve(state, owner, id).await?;
    let owner_of = if state.db.get_assistant(owner, &a.assistant_id).await?.is_some() {
        owner
    } else {
        ""
    };
    Ok(state
        .db
        .assistant_versions(owner_of, &a.assistant_id, metadata, limit, offset)
        .await?)
}

/// Make version `version` of an assistant of `owner` the current one.
pub(crate) async fn set_version(
    state: &AppState,
    owner: &str,
    id: &str,
    version: i64,
) -> ServiceResult<Assistant> {
    state
        .db
        .set_assistant_version(owner, id, version)
        .await?
        .ok_or_else(|| ServiceError::not_found(format!("assistant {id} version {version}")))
}
