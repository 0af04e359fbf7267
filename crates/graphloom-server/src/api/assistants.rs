//! `/assistants`.

use super::{AppRef, Owner};
use crate::app::system_assistant_id;
use crate::db::{AssistantPatch, AssistantQuery, SortOrder};
use crate::error::{parse_body, ApiError, ApiResult, ErrorBody};
use crate::models::{now_rfc3339, Assistant};
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::response::Response;
use axum::{Extension, Json};
use serde::Deserialize;
use serde_json::{json, Map, Value};

/// An assistant visible to `owner`: its own, or a system one (owner `""`). `id` may also be
/// a graph id, naming that graph's system assistant.
pub(crate) async fn resolve(state: &AppRef, owner: &str, id: &str) -> ApiResult<Assistant> {
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
    Err(ApiError::not_found(format!("assistant {id}")))
}

/// `POST /assistants`.
#[derive(Deserialize, utoipa::ToSchema)]
pub(crate) struct CreateBody {
    graph_id: String,
    assistant_id: Option<String>,
    #[serde(default)]
    config: Option<Value>,
    #[serde(default)]
    context: Option<Value>,
    #[serde(default)]
    metadata: Option<Map<String, Value>>,
    if_exists: Option<String>,
    name: Option<String>,
    description: Option<String>,
}

#[utoipa::path(post, path = "/assistants", tag = "assistants", summary = "Create an assistant",
    request_body = CreateBody,
    responses((status = 200, body = Assistant), (status = 409, description = "The id exists", body = ErrorBody)))]
pub(crate) async fn create(
    State(state): State<AppRef>,
    Extension(Owner(owner)): Extension<Owner>,
    body: Bytes,
) -> ApiResult<Json<Assistant>> {
    let b: CreateBody = parse_body(&body)?;
    super::bounds::run_config(b.config.as_ref())?;
    if !state.graphs.contains_key(&b.graph_id) {
        return Err(ApiError::not_found(format!(
            "graph {} (registered: {})",
            b.graph_id,
            state.graphs.keys().cloned().collect::<Vec<_>>().join(", ")
        )));
    }
    let id = match b.assistant_id {
        Some(id) => uuid::Uuid::parse_str(&id)
            .map_err(|_| ApiError::invalid(format!("assistant_id {id:?} is not a UUID")))?
            .to_string(),
        None => uuid::Uuid::new_v4().to_string(),
    };
    let now = now_rfc3339();
    let a = Assistant {
        assistant_id: id.clone(),
        graph_id: b.graph_id.clone(),
        config: b.config.unwrap_or_else(|| json!({})),
        context: b.context.unwrap_or_else(|| json!({})),
        created_at: now.clone(),
        updated_at: now,
        metadata: b.metadata.unwrap_or_default(),
        version: 1,
        name: b.name.unwrap_or_else(|| b.graph_id.clone()),
        description: b.description,
    };
    match state.db.create_assistant(&owner, &a).await {
        Ok(a) => Ok(Json(a)),
        Err(crate::db::DbError::Conflict(what)) => {
            // Another owner's assistant is "not found", never "already exists".
            let visible = resolve(&state, &owner, &id).await?;
            if b.if_exists.as_deref() == Some("do_nothing") {
                return Ok(Json(visible));
            }
            Err(crate::db::DbError::Conflict(what).into())
        }
        Err(e) => Err(e.into()),
    }
}

#[utoipa::path(get, path = "/assistants/{assistant_id}", tag = "assistants", summary = "Get an assistant",
    params(("assistant_id" = String, Path, description = "Assistant id, or a graph id for its system assistant")), responses((status = 200, body = Assistant)))]
pub(crate) async fn get_one(
    State(state): State<AppRef>,
    Extension(Owner(owner)): Extension<Owner>,
    Path(id): Path<String>,
) -> ApiResult<Json<Assistant>> {
    Ok(Json(resolve(&state, &owner, &id).await?))
}

/// `PATCH /assistants/{assistant_id}`: the fields to change (a new version).
#[derive(Deserialize, Default, utoipa::ToSchema)]
pub(crate) struct PatchBody {
    graph_id: Option<String>,
    config: Option<Value>,
    context: Option<Value>,
    metadata: Option<Map<String, Value>>,
    name: Option<String>,
    description: Option<String>,
}

#[utoipa::path(patch, path = "/assistants/{assistant_id}", tag = "assistants", summary = "Update an assistant (a new version)",
    params(("assistant_id" = String, Path, description = "Assistant id, or a graph id for its system assistant")), request_body = PatchBody, responses((status = 200, body = Assistant)))]
pub(crate) async fn patch(
    State(state): State<AppRef>,
    Extension(Owner(owner)): Extension<Owner>,
    Path(id): Path<String>,
    body: Bytes,
) -> ApiResult<Json<Assistant>> {
    let b: PatchBody = parse_body(&body)?;
    super::bounds::run_config(b.config.as_ref())?;
    if let Some(g) = &b.graph_id {
        if !state.graphs.contains_key(g) {
            return Err(ApiError::not_found(format!("graph {g}")));
        }
    }
    let p = AssistantPatch {
        graph_id: b.graph_id,
        config: b.config,
        context: b.context,
        metadata: b.metadata,
        name: b.name,
        description: b.description,
    };
    state
        .db
        .patch_assistant(&owner, &id, p)
        .await?
        .map(Json)
        .ok_or_else(|| ApiError::not_found(format!("assistant {id}")))
}

#[utoipa::path(delete, path = "/assistants/{assistant_id}", tag = "assistants", summary = "Delete an assistant",
    params(("assistant_id" = String, Path, description = "Assistant id, or a graph id for its system assistant")), responses((status = 200, description = "Deleted", body = Object)))]
pub(crate) async fn delete(
    State(state): State<AppRef>,
    Extension(Owner(owner)): Extension<Owner>,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    if state.db.delete_assistant(&owner, &id).await? {
        Ok(Json(json!({})))
    } else {
        Err(ApiError::not_found(format!("assistant {id}")))
    }
}

/// `POST /assistants/search` and `/assistants/count`.
#[derive(Deserialize, Default, utoipa::ToSchema)]
pub(crate) struct SearchBody {
    #[serde(default)]
    metadata: Option<Map<String, Value>>,
    graph_id: Option<String>,
    name: Option<String>,
    limit: Option<i64>,
    offset: Option<i64>,
    sort_by: Option<String>,
    sort_order: Option<String>,
    #[serde(default)]
    select: Option<Vec<String>>,
}

pub(crate) fn sort_order(s: Option<&str>) -> ApiResult<SortOrder> {
    match s {
        None | Some("desc") => Ok(SortOrder::Desc),
        Some("asc") => Ok(SortOrder::Asc),
        Some(other) => Err(ApiError::invalid(format!(
            "sort_order must be asc or desc, not {other:?}"
        ))),
    }
}

pub(crate) fn page(limit: Option<i64>, offset: Option<i64>) -> ApiResult<(i64, i64)> {
    let limit = limit.unwrap_or(10);
    let offset = offset.unwrap_or(0);
    if !(1..=1000).contains(&limit) || offset < 0 {
        return Err(ApiError::invalid("limit must be 1..=1000 and offset >= 0"));
    }
    Ok((limit, offset))
}

fn query(b: SearchBody) -> ApiResult<AssistantQuery> {
    let (limit, offset) = page(b.limit, b.offset)?;
    if let Some(s) = &b.sort_by {
        if !["assistant_id", "graph_id", "name", "created_at", "updated_at"].contains(&s.as_str()) {
            return Err(ApiError::invalid(format!("cannot sort assistants by {s:?}")));
        }
    }
    Ok(AssistantQuery {
        metadata: b.metadata.unwrap_or_default(),
        graph_id: b.graph_id,
        name: b.name,
        limit,
        offset,
        sort_by: b.sort_by,
        sort_order: sort_order(b.sort_order.as_deref())?,
    })
}

/// Owner's assistants plus the system ones (when the owner is not the system).
async fn search_all(state: &AppRef, owner: &str, q: &AssistantQuery) -> ApiResult<(Vec<Assistant>, i64)> {
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

#[utoipa::path(post, path = "/assistants/search", tag = "assistants", summary = "Search assistants",
    request_body = SearchBody,
    responses((status = 200, body = Vec<Assistant>, headers(("x-pagination-total" = i64), ("x-pagination-next" = i64)))))]
pub(crate) async fn search(
    State(state): State<AppRef>,
    Extension(Owner(owner)): Extension<Owner>,
    body: Bytes,
) -> ApiResult<Response> {
    let mut b: SearchBody = parse_body(&body)?;
    let select = b.select.take().unwrap_or_default();
    let q = query(b)?;
    let (list, total) = search_all(&state, &owner, &q).await?;
    super::page_response(&list, total, q.offset, &select)
}

#[utoipa::path(post, path = "/assistants/count", tag = "assistants", summary = "Count assistants",
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
    Ok(Json(search_all(&state, &owner, &q).await?.1))
}

#[utoipa::path(get, path = "/assistants/{assistant_id}/graph", tag = "assistants", summary = "Drawing data of the assistant's graph",
    params(("assistant_id" = String, Path, description = "Assistant id, or a graph id for its system assistant")), responses((status = 200, description = "`{nodes, edges}`", body = Object)))]
pub(crate) async fn graph(
    State(state): State<AppRef>,
    Extension(Owner(owner)): Extension<Owner>,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    let a = resolve(&state, &owner, &id).await?;
    let g = state
        .graphs
        .get(&a.graph_id)
        .ok_or_else(|| ApiError::not_found(format!("graph {}", a.graph_id)))?;
    Ok(Json(g.drawing()))
}

#[utoipa::path(get, path = "/assistants/{assistant_id}/schemas", tag = "assistants", summary = "Input, output, state and context schemas",
    params(("assistant_id" = String, Path, description = "Assistant id, or a graph id for its system assistant")), responses((status = 200, body = Object)))]
pub(crate) async fn schemas(
    State(state): State<AppRef>,
    Extension(Owner(owner)): Extension<Owner>,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    let a = resolve(&state, &owner, &id).await?;
    let g = state
        .graphs
        .get(&a.graph_id)
        .ok_or_else(|| ApiError::not_found(format!("graph {}", a.graph_id)))?;
    Ok(Json(json!({
        "graph_id": a.graph_id,
        "input_schema": g.input_schema(),
        "output_schema": g.output_schema(),
        "state_schema": g.state_schema(),
        "config_schema": {"type": "object", "properties": {}},
        "context_schema": {"type": "object", "additionalProperties": true},
    })))
}

/// Query of `/assistants/{assistant_id}/subgraphs`.
#[derive(Deserialize, Default, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct SubgraphsQuery {
    /// Kept as text: any value other than `true`/`1` means no (the route never fails on it).
    recurse: Option<String>,
}

/// The subgraph nodes of an assistant's graph by namespace, each with its schemas (a
/// subgraph's state describes its input and output too). `/subgraphs/{ns}` keeps that
/// namespace (and, with `recurse`, the ones under it).
#[utoipa::path(get, path = "/assistants/{assistant_id}/subgraphs", tag = "assistants", summary = "Subgraphs of the assistant's graph, by namespace",
    params(("assistant_id" = String, Path, description = "Assistant id, or a graph id for its system assistant"), SubgraphsQuery), responses((status = 200, body = Object)))]
pub(crate) async fn subgraphs(
    State(state): State<AppRef>,
    Extension(Owner(owner)): Extension<Owner>,
    Path(id): Path<String>,
    Query(q): Query<SubgraphsQuery>,
) -> ApiResult<Json<Value>> {
    list_subgraphs(&state, &owner, &id, None, &q).await
}

/// The subgraphs under one namespace (`parent|child`).
#[utoipa::path(get, path = "/assistants/{assistant_id}/subgraphs/{namespace}", tag = "assistants", summary = "Subgraphs of the assistant's graph under a namespace",
    params(("assistant_id" = String, Path, description = "Assistant id, or a graph id for its system assistant"), ("namespace" = String, Path, description = "A subgraph namespace, `parent|child`"), SubgraphsQuery),
    responses((status = 200, body = Object)))]
pub(crate) async fn subgraphs_at(
    State(state): State<AppRef>,
    Extension(Owner(owner)): Extension<Owner>,
    Path((id, ns)): Path<(String, String)>,
    Query(q): Query<SubgraphsQuery>,
) -> ApiResult<Json<Value>> {
    list_subgraphs(&state, &owner, &id, Some(ns), &q).await
}

async fn list_subgraphs(
    state: &AppRef,
    owner: &str,
    id: &str,
    only: Option<String>,
    q: &SubgraphsQuery,
) -> ApiResult<Json<Value>> {
    let a = resolve(state, owner, id).await?;
    let g = state
        .graphs
        .get(&a.graph_id)
        .ok_or_else(|| ApiError::not_found(format!("graph {}", a.graph_id)))?;
    let recurse = matches!(q.recurse.as_deref(), Some("true" | "1" | "True"));
    let mut out = Map::new();
    for (ns, name, schema) in g.subgraphs(recurse || only.is_some()) {
        if let Some(only) = &only {
            let under = ns
                .strip_prefix(only.as_str())
                .is_some_and(|rest| rest.starts_with('|'));
            if ns != *only && !(recurse && under) {
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
    Ok(Json(Value::Object(out)))
}

/// `POST /assistants/{assistant_id}/versions`.
#[derive(Deserialize, Default, utoipa::ToSchema)]
pub(crate) struct VersionsBody {
    #[serde(default)]
    metadata: Option<Map<String, Value>>,
    limit: Option<i64>,
    offset: Option<i64>,
}

#[utoipa::path(post, path = "/assistants/{assistant_id}/versions", tag = "assistants", summary = "List an assistant's versions",
    params(("assistant_id" = String, Path, description = "Assistant id, or a graph id for its system assistant")), request_body = VersionsBody, responses((status = 200, body = Vec<Assistant>)))]
pub(crate) async fn versions(
    State(state): State<AppRef>,
    Extension(Owner(owner)): Extension<Owner>,
    Path(id): Path<String>,
    body: Bytes,
) -> ApiResult<Json<Vec<Assistant>>> {
    let b: VersionsBody = parse_body(&body)?;
    let (limit, offset) = page(b.limit, b.offset)?;
    let a = resolve(&state, &owner, &id).await?;
    let owner_of = if state.db.get_assistant(&owner, &a.assistant_id).await?.is_some() {
        owner
    } else {
        String::new()
    };
    Ok(Json(
        state
            .db
            .assistant_versions(
                &owner_of,
                &a.assistant_id,
                &b.metadata.unwrap_or_default(),
                limit,
                offset,
            )
            .await?,
    ))
}

/// `POST /assistants/{assistant_id}/latest`.
#[derive(Deserialize, utoipa::ToSchema)]
pub(crate) struct LatestBody {
    version: i64,
}

#[utoipa::path(post, path = "/assistants/{assistant_id}/latest", tag = "assistants", summary = "Make a version the current one",
    params(("assistant_id" = String, Path, description = "Assistant id, or a graph id for its system assistant")), request_body = LatestBody, responses((status = 200, body = Assistant)))]
pub(crate) async fn latest(
    State(state): State<AppRef>,
    Extension(Owner(owner)): Extension<Owner>,
    Path(id): Path<String>,
    body: Bytes,
) -> ApiResult<Json<Assistant>> {
    let b: LatestBody = parse_body(&body)?;
    state
        .db
        .set_assistant_version(&owner, &id, b.version)
        .await?
        .map(Json)
        .ok_or_else(|| ApiError::not_found(format!("assistant {id} version {}", b.version)))
}
