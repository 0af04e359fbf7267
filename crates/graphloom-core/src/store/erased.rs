//! Object-safe form of [`Store`], so graphs can hold any store behind an `Arc`.

use super::{Item, ListNamespaces, PutOptions, SearchItem, SearchQuery, Store};
use crate::error::Result;
use futures::future::BoxFuture;
use serde_json::Value;
use std::sync::Arc;

/// [`Store`] with boxed futures. Every `Store` implements it, and `Arc<dyn DynStore>` is a
/// `Store` again.
pub trait DynStore: Send + Sync + 'static {
    /// See [`Store::get`].
    fn get<'a>(&'a self, namespace: &'a [String], key: &'a str) -> BoxFuture<'a, Result<Option<Item>>>;
    /// See [`Store::put`].
    fn put<'a>(
        &'a self,
        namespace: &'a [String],
        key: &'a str,
        value: Value,
        opts: PutOptions,
    ) -> BoxFuture<'a, Result<()>>;
    /// See [`Store::delete`].
    fn delete<'a>(&'a self, namespace: &'a [String], key: &'a str) -> BoxFuture<'a, Result<()>>;
    /// See [`Store::search`].
    fn search<'a>(
        &'a self,
        namespace_prefix: &'a [String],
        query: SearchQuery,
    ) -> BoxFuture<'a, Result<Vec<SearchItem>>>;
    /// See [`Store::list_namespaces`].
    fn list_namespaces(&self, opts: ListNamespaces) -> BoxFuture<'_, Result<Vec<Vec<String>>>>;
    /// See [`Store::sweep_expired`].
    fn sweep_expired(&self) -> BoxFuture<'_, Result<usize>>;
}

impl<T: Store> DynStore for T {
    fn get<'a>(&'a self, namespace: &'a [String], key: &'a str) -> BoxFuture<'a, Result<Option<Item>>> {
        Box::pin(Store::get(self, namespace, key))
    }
    fn put<'a>(
        &'a self,
        namespace: &'a [String],
        key: &'a str,
        value: Value,
        opts: PutOptions,
    ) -> BoxFuture<'a, Result<()>> {
        Box::pin(Store::put(self, namespace, key, value, opts))
    }
    fn delete<'a>(&'a self, namespace: &'a [String], key: &'a str) -> BoxFuture<'a, Result<()>> {
        Box::pin(Store::delete(self, namespace, key))
    }
    fn search<'a>(
        &'a self,
        namespace_prefix: &'a [String],
        query: SearchQuery,
    ) -> BoxFuture<'a, Result<Vec<SearchItem>>> {
        Box::pin(Store::search(self, namespace_prefix, query))
    }
    fn list_namespaces(&self, opts: ListNamespaces) -> BoxFuture<'_, Result<Vec<Vec<String>>>> {
        Box::pin(Store::list_namespaces(self, opts))
    }
    fn sweep_expired(&self) -> BoxFuture<'_, Result<usize>> {
        Box::pin(Store::sweep_expired(self))
    }
}

impl Store for Arc<dyn DynStore> {
    async fn get(&self, namespace: &[String], key: &str) -> Result<Option<Item>> {
        DynStore::get(&**self, namespace, key).await
    }
    async fn put(&self, namespace: &[String], key: &str, value: Value, opts: PutOptions) -> Result<()> {
        DynStore::put(&**self, namespace, key, value, opts).await
    }
    async fn delete(&self, namespace: &[String], key: &str) -> Result<()> {
        DynStore::delete(&**self, namespace, key).await
    }
    async fn search(&self, namespace_prefix: &[String], query: SearchQuery) -> Result<Vec<SearchItem>> {
        DynStore::search(&**self, namespace_prefix, query).await
    }
    async fn list_namespaces(&self, opts: ListNamespaces) -> Result<Vec<Vec<String>>> {
        DynStore::list_namespaces(&**self, opts).await
    }
    async fn sweep_expired(&self) -> Result<usize> {
        DynStore::sweep_expired(&**self).await
    }
}
