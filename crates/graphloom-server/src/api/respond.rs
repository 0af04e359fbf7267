//! Response shapes shared by the handlers: search pages and field selection.

use crate::api::error::{ApiError, ApiResult};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};

/// A search page: the items (with only the `select`ed fields, when given) and the
/// `X-Pagination-Total` / `X-Pagination-Next` headers the clients read.
pub(super) fn page_response<T: serde::Serialize>(
    list: &[T],
    total: i64,
    offset: i64,
    select: &[String],
) -> ApiResult<Response> {
    let mut headers = HeaderMap::new();
    headers.insert("x-pagination-total", total.into());
    let next = offset.saturating_add(i64::try_from(list.len()).unwrap_or(0));
    if next < total {
        headers.insert("x-pagination-next", next.into());
    }
    Ok((headers, axum::Json(select_fields(list, select)?)).into_response())
}

/// Serialize `items`, keeping only the `select`ed fields of each (all when `select` is
/// empty), as the reference server does for search and list endpoints.
pub(super) fn select_fields<T: serde::Serialize>(
    items: &[T],
    select: &[String],
) -> ApiResult<serde_json::Value> {
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        let mut v = serde_json::to_value(item).map_err(|e| ApiError::internal(e.to_string()))?;
        if let (Some(obj), false) = (v.as_object_mut(), select.is_empty()) {
            obj.retain(|k, _| select.iter().any(|s| s == k));
        }
        out.push(v);
    }
    Ok(serde_json::Value::Array(out))
}
