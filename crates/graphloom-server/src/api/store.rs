//! `/store`: long-term memory items, scoped per owner when auth is on.

use super::{AppRef, Owner};
use crate::error::{parse_body, ApiError, ApiResult};
use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use graphloom_core::store::{IndexFields, Item, ListNamespaces, PutOptions, SearchQuery};
use percent_encoding::{percent_decode_str, utf8_percent_encode, AsciiSet, CONTROLS};
use serde::Deserialize;
use serde_json::{json, Map, Value};

/// What the owner label escapes: `.` (the namespace separator), `%` (the escape itself) and
/// control characters. Any owner name becomes one valid label, and back.
const LABEL_ESCAPES: &AsciiSet = &CONTROLS.add(b'.').add(b'%');

/// The hidden first label of an owner's namespaces: `owner:` and the owner's name, escaped.
pub(crate) fn owner_label(owner: &str) -> String {
    format!("owner:{}", utf8_percent_encode(owner, LABEL_ESCAPES))
}

/// The owner an [`owner_label`] stands for; `None` for any other label.
pub(crate) fn label_owner(label: &str) -> Option<String> {
    let escaped = label.strip_prefix("owner:")?;
    percent_decode_str(escaped)
        .decode_utf8()
        .ok()
        .map(std::borrow::Cow::into_owned)
}

/// Namespaces of an owner live under one hidden first label, [`owner_label`]; with auth off
/// (owner `""`) they are as given. Graph runs see the same scoping through
/// [`crate::owner_store::OwnerStore`].
pub(crate) fn scoped(owner: &str, ns: &[String]) -> Vec<String> {
    if owner.is_empty() {
        return ns.to_vec();
    }
    let mut v = Vec::with_capacity(ns.len() + 1);
    v.push(owner_label(owner));
    v.extend(ns.iter().cloned());
    v
}

/// A namespace as its owner sees it: without the owner label [`scoped`] added.
pub(crate) fn unscoped(owner: &str, mut ns: Vec<String>) -> Vec<String> {
    if !owner.is_empty() && ns.first().and_then(|l| label_owner(l)).as_deref() == Some(owner) {
        ns.remove(0);
    }
    ns
}

fn item_json(owner: &str, item: Item, score: Option<f64>) -> Value {
    let mut v = json!({
        "namespace": unscoped(owner, item.namespace),
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
    Extension(Owner(owner)): Extension<Owner>,
    body: Bytes,
) -> ApiResult<Response> {
    let b: PutBody = parse_body(&body)?;
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
    state
        .store
        .put(&scoped(&owner, &b.namespace), &b.key, b.value, opts)
        .await?;
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
    Extension(Owner(owner)): Extension<Owner>,
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
    match state.store.get(&scoped(&owner, &ns), &p.key).await? {
        Some(item) => Ok(Json(item_json(&owner, item, None))),
        None => Err(ApiError::not_found(format!("item {}/{}", ns.join("."), p.key))),
    }
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
    Extension(Owner(owner)): Extension<Owner>,
    body: Bytes,
) -> ApiResult<Response> {
    let b: DeleteBody = parse_body(&body)?;
    check_namespace(&b.namespace)?;
    state.store.delete(&scoped(&owner, &b.namespace), &b.key).await?;
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
    Extension(Owner(owner)): Extension<Owner>,
    body: Bytes,
) -> ApiResult<Json<Value>> {
    let b: SearchBody = parse_body(&body)?;
    let q = SearchQuery {
        filter: b.filter.unwrap_or_default(),
        query: b.query,
        limit: b.limit.unwrap_or(10).clamp(1, 1000),
        offset: b.offset.unwrap_or(0),
        refresh_ttl: b.refresh_ttl,
    };
    let items = state
        .store
        .search(&scoped(&owner, &b.namespace_prefix), q)
        .await?;
    let items: Vec<Value> = items
        .into_iter()
        .map(|s| item_json(&owner, s.item, s.score))
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
    Extension(Owner(owner)): Extension<Owner>,
    body: Bytes,
) -> ApiResult<Json<Value>> {
    let b: NamespacesBody = parse_body(&body)?;
    if b.max_depth == Some(0) {
        // Checked before the owner's label makes it 1.
        return Err(ApiError::invalid("max_depth must be at least 1"));
    }
    let extra = usize::from(!owner.is_empty());
    let prefix = if owner.is_empty() {
        b.prefix
    } else {
        Some(scoped(&owner, &b.prefix.unwrap_or_default()))
    };
    let opts = ListNamespaces {
        prefix,
        suffix: b.suffix,
        max_depth: b.max_depth.map(|d| d.saturating_add(extra)),
        limit: b.limit.unwrap_or(100).clamp(1, 1000),
        offset: b.offset.unwrap_or(0),
    };
    let list: Vec<Vec<String>> = state
        .store
        .list_namespaces(opts)
        .await?
        .into_iter()
        .map(|ns| unscoped(&owner, ns))
        .collect();
    Ok(Json(json!({ "namespaces": list })))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn plain_owners_keep_their_label() {
        assert_eq!(owner_label("ann"), "owner:ann");
        assert_eq!(owner_label("team.a"), "owner:team%2Ea");
        assert_eq!(scoped("", &["n".to_owned()]), ["n"]);
        assert_eq!(scoped("team.a", &["n".to_owned()]), ["owner:team%2Ea", "n"]);
        assert_eq!(
            unscoped("team.a", vec!["owner:team%2Ea".into(), "n".into()]),
            ["n"]
        );
        assert_eq!(label_owner("notes"), None);
    }

    proptest! {
        /// Any owner name is one label a store accepts, and decodes back to itself.
        #[test]
        fn owner_labels_round_trip(owner in any::<String>().prop_filter("non-empty", |o| !o.is_empty())) {
            let label = owner_label(&owner);
            prop_assert!(graphloom_core::store::validate_namespace(&[label.clone(), "n".into()]).is_ok(), "{label:?}");
            prop_assert_eq!(label_owner(&label), Some(owner.clone()));
            prop_assert_eq!(unscoped(&owner, scoped(&owner, &["n".to_owned()])), vec!["n".to_owned()]);
        }
    }
}
