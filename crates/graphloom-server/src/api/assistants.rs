//! `/assistants`.

use super::auth::Owner;
use super::extract::Body;
use super::respond::page_response;
use crate::api::error::{ApiError, ApiResult, ErrorBody};
use crate::db::{AssistantPatch, AssistantQuery, SortOrder};
use crate::models::Assistant;
use crate::service::{self, assistants};
use crate::state::AppRef;
use axum::extract::{Path, Query, State};
use axum::response::Response;
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Map, Value};

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
    Owner(owner): Owner,
    Body(b): Body<CreateBody>,
) -> ApiResult<Json<Assistant>> {
    super::bounds::run_config(b.config.as_ref())?;
    let assistant_id = match b.assistant_id {
        Some(id) => Some(
            uuid::Uuid::parse_str(&id)
                .map_err(|_| ApiError::invalid(format!("assistant_id {id:?} is not a UUID")))?
                .to_string(),
        ),
        None => None,
    };
    let new = assistants::NewAssistant {
        graph_id: b.graph_id,
        assistant_id,
        config: b.config,
        context: b.context,
        metadata: b.metadata,
        name: b.name,
        description: b.description,
        if_exists_do_nothing: b.if_exists.as_deref() == Some("do_nothing"),
    };
    Ok(Json(assistants::create(&state, &owner, new).await?))
}

#[utoipa::path(get, path = "/assistants/{assistant_id}", tag = "assistants", summary = "Get an assistant",
    params(("assistant_id" = String, Path, description = "Assistant id, or a graph id for its system assistant")), responses((status = 200, body = Assistant)))]
pub(crate) async fn get_one(
    State(state): State<AppRef>,
    Owner(owner): Owner,
    Path(id): Path<String>,
) -> ApiResult<Json<Assistant>> {
    Ok(Json(assistants::resolve(&state, &owner, &id).await?))
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
    Owner(owner): Owner,
    Path(id): Path<String>,
    Body(b): Body<PatchBody>,
) -> ApiResult<Json<Assistant>> {
    super::bounds::run_config(b.config.as_ref())?;
    let p = AssistantPatch {
        graph_id: b.graph_id,
        config: b.config,
        context: b.context,
        metadata: b.metadata,
        name: b.name,
        description: b.description,
    };
    Ok(Json(assistants::patch(&state, &owner, &id, p).await?))
}

#[utoipa::path(delete, path = "/assistants/{assistant_id}", tag = "assistants", summary = "Delete an assistant",
    params(("assistant_id" = String, Path, description = "Assistant id, or a graph id for its system assistant")), responses((status = 200, description = "Deleted", body = Object)))]
pub(crate) async fn delete(
    State(state): State<AppRef>,
    Owner(owner): Owner,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    assistants::delete(&state, &owner, &id).await?;
    Ok(Json(json!({})))
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

/// The order of a search (`asc` or `desc`, the default).
pub(super) fn sort_order(s: Option<&str>) -> ApiResult<SortOrder> {
    match s {
        None | Some("desc") => Ok(SortOrder::Desc),
        Some("asc") => Ok(SortOrder::Asc),
        Some(other) => Err(ApiError::invalid(format!(
            "sort_order must be asc or desc, not {other:?}"
        ))),
    }
}

fn query(b: SearchBody) -> ApiResult<AssistantQuery> {
    let (limit, offset) = service::page(b.limit, b.offset)?;
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

#[utoipa::path(post, path = "/assistants/search", tag = "assistants", summary = "Search assistants",
    request_body = SearchBody,
    responses((status = 200, body = Vec<Assistant>, headers(("x-pagination-total" = i64), ("x-pagination-next" = i64)))))]
pub(crate) async fn search(
    State(state): State<AppRef>,
    Owner(owner): Owner,
    Body(mut b): Body<SearchBody>,
) -> ApiResult<Response> {
    let select = b.select.take().unwrap_or_default();
    let q = query(b)?;
    let (list, total) = assistants::search(&state, &owner, &q).await?;
    page_response(&list, total, q.offset, &select)
}

#[utoipa::path(post, path = "/assistants/count", tag = "assistants", summary = "Count assistants",
    request_body = SearchBody, responses((status = 200, body = i64)))]
pub(crate) async fn count(
    State(state): State<AppRef>,
    Owner(owner): Owner,
    Body(mut b): Body<SearchBody>,
) -> ApiResult<Json<i64>> {
    b.limit = Some(1);
    b.offset = Some(0);
    let q = query(b)?;
    Ok(Json(assistants::search(&state, &owner, &q).await?.1))
}

/// Query of `/assistants/{assistant_id}/graph`.
#[derive(Deserialize, Default, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct GraphParams {
    /// Expand subgraph nodes into their nodes: `true` (all levels), or how many levels.
    xray: Option<String>,
}

#[utoipa::path(get, path = "/assistants/{assistant_id}/graph", tag = "assistants", summary = "Drawing data of the assistant's graph",
    params(("assistant_id" = String, Path, description = "Assistant id, or a graph id for its system assistant"), GraphParams), responses((status = 200, description = "`{nodes, edges}`", body = Object)))]
pub(crate) async fn graph(
    State(state): State<AppRef>,
    Owner(owner): Owner,
    Path(id): Path<String>,
    Query(p): Query<GraphParams>,
) -> ApiResult<Json<Value>> {
    let a = assistants::resolve(&state, &owner, &id).await?;
    let g = assistants::graph_of(&state, &a)?;
    let depth = match p.xray.as_deref() {
        None | Some("false" | "0") => return Ok(Json(g.drawing())),
        Some("true") => None,
        Some(n) => Some(
            n.parse::<usize>()
                .map_err(|_| ApiError::invalid(format!("xray must be true, false or a depth, not {n:?}")))?,
        ),
    };
    Ok(Json(crate::service::xray::drawing(g.as_ref(), depth)))
}

#[utoipa::path(get, path = "/assistants/{assistant_id}/schemas", tag = "assistants", summary = "Input, output, state and context schemas",
    params(("assistant_id" = String, Path, description = "Assistant id, or a graph id for its system assistant")), responses((status = 200, body = Object)))]
pub(crate) async fn schemas(
    State(state): State<AppRef>,
    Owner(owner): Owner,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    Ok(Json(assistants::schemas(&state, &owner, &id).await?))
}

/// Query of `/assistants/{assistant_id}/subgraphs`.
#[derive(Deserialize, Default, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct SubgraphsQuery {
    /// Kept as text: any value other than `true`/`1` means no (the route never fails on it).
    recurse: Option<String>,
}

impl SubgraphsQuery {
    fn recurse(&self) -> bool {
        matches!(self.recurse.as_deref(), Some("true" | "1" | "True"))
    }
}

/// The subgraph nodes of an assistant's graph by namespace, each with its schemas (a
/// subgraph's state describes its input and output too). `/subgraphs/{ns}` keeps that
/// namespace (and, with `recurse`, the ones under it).
#[utoipa::path(get, path = "/assistants/{assistant_id}/subgraphs", tag = "assistants", summary = "Subgraphs of the assistant's graph, by namespace",
    params(("assistant_id" = String, Path, description = "Assistant id, or a graph id for its system assistant"), SubgraphsQuery), responses((status = 200, body = Object)))]
pub(crate) async fn subgraphs(
    State(state): State<AppRef>,
    Owner(owner): Owner,
    Path(id): Path<String>,
    Query(q): Query<SubgraphsQuery>,
) -> ApiResult<Json<Value>> {
    Ok(Json(
        assistants::subgraphs(&state, &owner, &id, None, q.recurse()).await?,
    ))
}

/// The subgraphs under one namespace (`parent|child`).
#[utoipa::path(get, path = "/assistants/{assistant_id}/subgraphs/{namespace}", tag = "assistants", summary = "Subgraphs of the assistant's graph under a namespace",
    params(("assistant_id" = String, Path, description = "Assistant id, or a graph id for its system assistant"), ("namespace" = String, Path, description = "A subgraph namespace, `parent|child`"), SubgraphsQuery),
    responses((status = 200, body = Object)))]
pub(crate) async fn subgraphs_at(
    State(state): State<AppRef>,
    Owner(owner): Owner,
    Path((id, ns)): Path<(String, String)>,
    Query(q): Query<SubgraphsQuery>,
) -> ApiResult<Json<Value>> {
    let recurse = q.recurse();
    Ok(Json(
        assistants::subgraphs(&state, &owner, &id, Some(&ns), recurse).await?,
    ))
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
    Owner(owner): Owner,
    Path(id): Path<String>,
    Body(b): Body<VersionsBody>,
) -> ApiResult<Json<Vec<Assistant>>> {
    let page = service::page(b.limit, b.offset)?;
    let metadata = b.metadata.unwrap_or_default();
    Ok(Json(
        assistants::versions(&state, &owner, &id, &metadata, page).await?,
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
    Owner(owner): Owner,
    Path(id): Path<String>,
    Body(b): Body<LatestBody>,
) -> ApiResult<Json<Assistant>> {
    Ok(Json(
        assistants::set_version(&state, &owner, &id, b.version).await?,
    ))
}
