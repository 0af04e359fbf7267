//! The store as an owner sees it: items and namespaces under the owner's hidden first
//! label ([`crate::owner_store::scoped`]), handed back without it.

use crate::error::{ServiceError, ServiceResult};
use crate::owner_store::{scoped, unscoped};
use crate::state::AppState;
use graphloom_core::store::{Item, ListNamespaces, PutOptions, SearchItem, SearchQuery};
use serde_json::Value;

fn strip(owner: &str, mut item: Item) -> Item {
    item.namespace = unscoped(owner, item.namespace);
    item
}

/// Put an item of `owner`.
pub(crate) async fn put(
    state: &AppState,
    owner: &str,
    namespace: &[String],
    key: &str,
    value: Value,
    opts: PutOptions,
) -> ServiceResult<()> {
    Ok(state
        .store
        .put(&scoped(owner, namespace), key, value, opts)
        .await?)
}

/// An item of `owner`.
pub(crate) async fn get(
    state: &AppState,
    owner: &str,
    namespace: &[String],
    key: &str,
) -> ServiceResult<Item> {
    match state.store.get(&scoped(owner, namespace), key).await? {
        Some(item) => Ok(strip(owner, item)),
        None => Err(ServiceError::not_found(format!(
            "item {}/{key}",
            namespace.join(".")
        ))),
    }
}

/// Delete an item of `owner`.
pub(crate) async fn delete(
    state: &AppState,
    owner: &str,
    namespace: &[String],
    key: &str,
) -> ServiceResult<()> {
    Ok(state.store.delete(&scoped(owner, namespace), key).await?)
}

/// The items of `owner` under `prefix` that match `q`.
pub(crate) async fn search(
    state: &AppState,
    owner: &str,
    prefix: &[String],
    q: SearchQuery,
) -> ServiceResult<Vec<SearchItem>> {
    let found = state.store.search(&scoped(owner, prefix), q).await?;
    Ok(found
        .into_iter()
        .map(|s| SearchItem {
            item: strip(owner, s.item),
            score: s.score,
        })
        .collect())
}

/// The namespaces of `owner` (options as the owner names them: its prefix and depth do not
/// count the hidden label).
pub(crate) async fn namespaces(
    state: &AppState,
    owner: &str,
    opts: ListNamespaces,
) -> ServiceResult<Vec<Vec<String>>> {
    let opts = if owner.is_empty() {
        opts
    } else {
        ListNamespaces {
            prefix: Some(scoped(owner, &opts.prefix.unwrap_or_default())),
            max_depth: opts.max_depth.map(|d| d.saturating_add(1)),
            ..opts
        }
    };
    let list = state.store.list_namespaces(opts).await?;
    Ok(list.into_iter().map(|ns| unscoped(owner, ns)).collect())
}
