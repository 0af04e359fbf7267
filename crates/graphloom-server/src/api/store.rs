//! `/store`: long-term memory items, scoped per owner when auth is on.

use super::auth::Owner;
use super::extract::Body;
use crate::api::error::{ApiError, ApiResult};
use crate::service::store;
use crate::state::AppRef;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use graphloom_core::store::{IndexFields, Item, ListNamespaces, PutOptions, SearchQuery};
use serde::Deserialize;
use serde_json::{json, Map, Value};

/// An item as the clients read it (`score` under a query).
fn item_json(item: Item, score: Option<f64>) -> Value {
    let mut v = json!({
        "namespace": item.namespace,
        "key": item.key,
        "value": item.value,
        "created_at": item.created_at,
        "updated_at": item.updated_at,
    });
    if let (Some(s), Some(o)) = (score, v.as_object_mut()) {
        o.insert("score".into(), json!(s));
    }
    v
}

fn check_namespace(ns: &[String]) -> ApiResult<()> {
    if ns.is_empty() {
        return Err(ApiError::invalid("namespace must not be empty"));
    }
    if ns.iter().any(|l| l.is_empty() || l.contains('.')) {
        return Err(ApiError::invalid(
            "namespace labels must be non-empty and contain no '.'",
        ));
    }
    Ok(())
}

/// `PUT /store/items`.
#[derive(Deserialize, utoipa::ToSchema)]
pub(crate) struct PutBody {
    /// Namespace labels (none may contain `.`).
    namespace: Vec<String>,
    /// Key within the namespace.
    key: String,
    /// The item: a JSON object.
    value: Value,
    /// `false` to skip indexing, or the paths to index for vector search.
    index: Option<Value>,
    /// Time to live, in minutes (more than 0, at most one year).
    #[schema(exclusive_minimum = 0, maximum = 525_600)]
    ttl: Option<f64>,
}

#[utoipa::path(put, path = "/store/items", tag = "store", summary = "Put an item",
    request_body = PutBody, responses((status = 204, description = "Stored")))]
pub(crate) async fn put_item(
    State(state): State<AppRef>,
    Owner(owner): Owner,
    Body(b): Body<PutBody>,
) -> ApiResult<Response> {
    check_namespace(&b.namespace)?;
    if !b.value.is_object() {
        return Err(ApiError::invalid("value must be a JSON object"));
    }
    let mut opts = PutOptions::new();
    if let Some(ttl) = super::bounds::store_ttl(b.ttl)? {
        opts = opts.ttl(ttl);
    }
    opts = match b.index {
        None | Some(Value::Null) => opts,
        Some(Value::Bool(false)) => opts.index(IndexFields::Skip),
        Some(Value::Array(fields)) => opts.index(IndexFields::Fields(
            fields
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect(),
        )),
        Some(other) => {
            return Err(ApiError::invalid(format!(
                "index must be false or a list of paths, not {other}"
            )))
        }
    };
    store::put(&state, &owner, &b.namespace, &b.key, b.value, opts).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// Query of `GET /store/items`.
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct GetParams {
    /// Namespace labels joined with `.`.
    namespace: Option<String>,
    /// Key within the namespace.
    key: String,
}

#[utoipa::path(get, path = "/store/items", tag = "store", summary = "Get an item",
    params(GetParams), responses((status = 200, description = "`{namespace, key, value, created_at, updated_at}`", body = Object)))]
pub(crate) async fn get_item(
    State(state): State<AppRef>,
    Owner(owner): Owner,
    Query(p): Query<GetParams>,
) -> ApiResult<Json<Value>> {
    let ns: Vec<String> = p
        .namespace
        .as_deref()
        .unwrap_or_default()
        .split('.')
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect();
    check_namespace(&ns)?;
    let item = store::get(&state, &owner, &ns, &p.key).await?;
    Ok(Json(item_json(item, None)))
}

/// `DELETE /store/items`.
#[derive(Deserialize, utoipa::ToSchema)]
pub(crate) struct DeleteBody {
    /// Namespace labels.
    namespace: Vec<String>,
    /// Key within the namespace.
    key: String,
}

#[utoipa::path(delete, path = "/store/items", tag = "store", summary = "Delete an item",
    request_body = DeleteBody, responses((status = 204, description = "Deleted")))]
pub(crate) async fn delete_item(
    State(state): State<AppRef>,
    Owner(owner): Owner,
    Body(b): Body<DeleteBody>,
) -> ApiResult<Response> {
    check_namespace(&b.namespace)?;
    store::delete(&state, &owner, &b.namespace, &b.key).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// `POST /store/items/search`.
#[derive(Deserialize, Default, utoipa::ToSchema)]
#[serde(default)]
pub(crate) struct SearchBody {
    /// Only items under this namespace prefix.
    namespace_prefix: Vec<String>,
    /// Conditions on the item's value: `{"field": value}` or operators (`$eq`, `$ne`, `$gt`,
    /// `$gte`, `$lt`, `$lte`, ...).
    filter: Option<Map<String, Value>>,
    /// Page size (1..=1000, default 10).
    limit: Option<usize>,
    /// Items to skip.
    offset: Option<usize>,
    /// Natural-language query, for stores with a vector index.
    query: Option<String>,
    /// Refresh the TTL of the items returned.
    refresh_ttl: Option<bool>,
}

#[utoipa::path(post, path = "/store/items/search", tag = "store", summary = "Search items",
    request_body = SearchBody, responses((status = 200, description = "`{items: [...]}`, each with a `score` under a query", body = Object)))]
pub(crate) async fn search(
    State(state): State<AppRef>,
    Owner(owner): Owner,
    Body(b): Body<SearchBody>,
) -> ApiResult<Json<Value>> {
    let q = SearchQuery {
        filter: b.filter.unwrap_or_default(),
        query: b.query,
        limit: b.limit.unwrap_or(10).clamp(1, 1000),
        offset: b.offset.unwrap_or(0),
        refresh_ttl: b.refresh_ttl,
    };
    let items: Vec<Value> = store::search(&state, &owner, &b.namespace_prefix, q)
        .await?
        .into_iter()
        .map(|s| item_json(s.item, s.score))
        .collect();
    Ok(Json(json!({ "items": items })))
}

/// `POST /store/namespaces`.
#[derive(Deserialize, Default, utoipa::ToSchema)]
#[serde(default)]
pub(crate) struct NamespacesBody {
    /// Only namespaces starting with these labels.
    prefix: Option<Vec<String>>,
    /// Only namespaces ending with these labels.
    suffix: Option<Vec<String>>,
    /// Cut namespaces to this many labels.
    max_depth: Option<usize>,
    /// Page size (1..=1000, default 100).
    limit: Option<usize>,
    /// Namespaces to skip.
    offset: Option<usize>,
}

#[utoipa::path(post, path = "/store/namespaces", tag = "store", summary = "List namespaces",
    request_body = NamespacesBody, responses((status = 200, description = "`{namespaces: [[label, ...], ...]}`", body = Object)))]
pub(crate) async fn namespaces(
    State(state): State<AppRef>,
    Owner(owner): Owner,
    Body(b): Body<NamespacesBody>,
) -> ApiResult<Json<Value>> {
    if b.max_depth == Some(0) {
        // Checked before the owner's label makes it 1.
        return Err(ApiError::invalid("max_depth must be at least 1"));
    }
    let opts = ListNamespaces {
        prefix: b.prefix,
        suffix: b.suffix,
        max_depth: b.max_depth,
        limit: b.limit.unwrap_or(100).clamp(1, 1000),
        offset: b.offset.unwrap_or(0),
    };
    let list = store::namespaces(&state, &owner, opts).await?;
    Ok(Json(json!({ "namespaces": list })))
}
