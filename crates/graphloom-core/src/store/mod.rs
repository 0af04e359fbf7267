//! Long-term memory: a namespaced, JSON-document [`Store`] that graphs share across threads.
//!
//! Items live under a *namespace* (a path of labels such as `["users", "42", "prefs"]`) and a
//! key; their value is always a JSON object. A store can
//!
//! - [`get`](Store::get), [`put`](Store::put) and [`delete`](Store::delete) single items;
//! - [`search`](Store::search) every item under a namespace prefix, with a structured
//!   [`filter`] and, when configured with an [`IndexConfig`], a natural-language
//!   query ranked by vector similarity;
//! - [`list_namespaces`](Store::list_namespaces) that hold items;
//! - expire items after a time-to-live ([`PutOptions::ttl`], [`TtlConfig`]).
//!
//! [`InMemoryStore`] is the reference implementation. Graphs hold any store as an
//! `Arc<dyn DynStore>` ([`DynStore`] is the object-safe form every `Store` implements).
//! Backends check themselves with the store conformance kit of the `graphloom-test-kit`
//! crate.

mod erased;
pub mod filter;
pub mod memory;
mod namespace;
pub mod vector;

pub use erased::DynStore;
pub use filter::{matches_filter, value_at_path, Filter};
pub use memory::InMemoryStore;
pub use namespace::{has_prefix, namespace, validate_namespace, RESERVED_LABEL, WILDCARD};
pub use vector::{cosine, texts_at_path, Embedder, HashEmbedder, IndexConfig, WHOLE_VALUE};

use crate::error::{BackendError, BackendErrorKind, Error, Result};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// A stored item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Item {
    /// The namespace it lives in.
    pub namespace: Vec<String>,
    /// Its key, unique within the namespace.
    pub key: String,
    /// The value: always a JSON object.
    pub value: Value,
    /// When the key was first written (RFC 3339, UTC). Kept by overwrites.
    pub created_at: String,
    /// When the value was last written (RFC 3339, UTC).
    pub updated_at: String,
}

/// An item found by [`Store::search`], with its relevance score.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchItem {
    /// The item.
    #[serde(flatten)]
    pub item: Item,
    /// Similarity to the query (cosine, in `[-1, 1]`); `None` when the search had no query
    /// or the store has no vector index.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub score: Option<f64>,
}

/// Which parts of a value [`Store::put`] embeds for vector search.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum IndexFields {
    /// The fields of the store's [`IndexConfig`].
    #[default]
    Default,
    /// Nothing: the item is never returned by a search with a query.
    Skip,
    /// These fields (dotted paths, or [`WHOLE_VALUE`]) instead of the store's.
    Fields(Vec<String>),
}

/// Options of [`Store::put`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PutOptions {
    /// Time to live, counted from this write (and from reads that refresh it). `None` uses
    /// the store's [`TtlConfig::default_ttl`] (no expiry if that is `None` too).
    pub ttl: Option<Duration>,
    /// What to embed for vector search.
    pub index: IndexFields,
}

impl PutOptions {
    /// Default options: the store's TTL and index fields.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }
    /// Expire the item `ttl` after it is written (or last read, see [`TtlConfig`]).
    #[must_use]
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Some(ttl);
        self
    }
    /// Embed these parts of the value.
    #[must_use]
    pub fn index(mut self, index: IndexFields) -> Self {
        self.index = index;
        self
    }
}

/// Default [`SearchQuery::limit`].
pub const DEFAULT_SEARCH_LIMIT: usize = 10;
/// Default [`ListNamespaces::limit`].
pub const DEFAULT_LIST_LIMIT: usize = 100;

/// What [`Store::search`] looks for.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchQuery {
    /// Conditions on the value, all of which must hold; see [`filter`] for the syntax.
    pub filter: Map<String, Value>,
    /// Natural-language query, ranked by similarity when the store has a vector index.
    pub query: Option<String>,
    /// At most this many results (default [`DEFAULT_SEARCH_LIMIT`]).
    pub limit: usize,
    /// Skip this many results first.
    pub offset: usize,
    /// Refresh the TTL of returned items; `None` uses [`TtlConfig::refresh_on_read`].
    pub refresh_ttl: Option<bool>,
}

impl Default for SearchQuery {
    fn default() -> Self {
        Self {
            filter: Map::new(),
            query: None,
            limit: DEFAULT_SEARCH_LIMIT,
            offset: 0,
            refresh_ttl: None,
        }
    }
}

impl SearchQuery {
    /// Every item, newest first, at most [`DEFAULT_SEARCH_LIMIT`].
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }
    /// Add a filter condition: `field` (a top-level or dotted path) must match `condition`
    /// (a plain value, or an object of operators such as `{"$gte": 3}`).
    #[must_use]
    pub fn filter(mut self, field: impl Into<String>, condition: impl Into<Value>) -> Self {
        self.filter.insert(field.into(), condition.into());
        self
    }
    /// Rank by similarity to `query`.
    #[must_use]
    pub fn query(mut self, query: impl Into<String>) -> Self {
        self.query = Some(query.into());
        self
    }
    /// Return at most `limit` results.
    #[must_use]
    pub fn limit(mut self, limit: usize) -> Self {
        self.limit = limit;
        self
    }
    /// Skip the first `offset` results.
    #[must_use]
    pub fn offset(mut self, offset: usize) -> Self {
        self.offset = offset;
        self
    }
    /// Whether to refresh the TTL of returned items.
    #[must_use]
    pub fn refresh_ttl(mut self, refresh: bool) -> Self {
        self.refresh_ttl = Some(refresh);
        self
    }
}

/// What [`Store::list_namespaces`] returns.
///
/// A `"*"` label in `prefix` or `suffix` matches any label. Matching namespaces are cut to
/// `max_depth` labels, deduplicated, sorted, then `offset` and `limit` apply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListNamespaces {
    /// Only namespaces starting with these labels.
    pub prefix: Option<Vec<String>>,
    /// Only namespaces ending with these labels.
    pub suffix: Option<Vec<String>>,
    /// Cut namespaces to at most this many labels (at least 1).
    pub max_depth: Option<usize>,
    /// At most this many namespaces (default [`DEFAULT_LIST_LIMIT`]).
    pub limit: usize,
    /// Skip this many namespaces first.
    pub offset: usize,
}

impl Default for ListNamespaces {
    fn default() -> Self {
        Self {
            prefix: None,
            suffix: None,
            max_depth: None,
            limit: DEFAULT_LIST_LIMIT,
            offset: 0,
        }
    }
}

impl ListNamespaces {
    /// Every namespace, at most [`DEFAULT_LIST_LIMIT`].
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }
    /// Only namespaces starting with `prefix` (`"*"` matches any label).
    #[must_use]
    pub fn prefix<I, S>(mut self, prefix: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.prefix = Some(namespace(prefix));
        self
    }
    /// Only namespaces ending with `suffix` (`"*"` matches any label).
    #[must_use]
    pub fn suffix<I, S>(mut self, suffix: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.suffix = Some(namespace(suffix));
        self
    }
    /// Cut namespaces to at most `depth` labels.
    #[must_use]
    pub fn max_depth(mut self, depth: usize) -> Self {
        self.max_depth = Some(depth);
        self
    }
    /// Return at most `limit` namespaces.
    #[must_use]
    pub fn limit(mut self, limit: usize) -> Self {
        self.limit = limit;
        self
    }
    /// Skip the first `offset` namespaces.
    #[must_use]
    pub fn offset(mut self, offset: usize) -> Self {
        self.offset = offset;
        self
    }
}

/// Expiry settings of a store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TtlConfig {
    /// TTL of items put without one; `None` means they never expire.
    pub default_ttl: Option<Duration>,
    /// Whether reads ([`Store::get`], and [`Store::search`] unless the query says otherwise)
    /// restart the TTL of the items they return.
    pub refresh_on_read: bool,
}

impl Default for TtlConfig {
    fn default() -> Self {
        Self {
            default_ttl: None,
            refresh_on_read: true,
        }
    }
}

/// A long-term memory store.
///
/// Implementations keep these promises (the conformance kit of `graphloom-test-kit` checks
/// them):
///
/// - `put` rejects an invalid namespace ([`validate_namespace`]) or a value that is not a
///   JSON object with [`BackendErrorKind::InvalidInput`]; overwriting a key keeps its
///   `created_at` and moves `updated_at` strictly forward.
/// - `delete` of a missing key succeeds.
/// - `search` returns live items whose namespace starts with `namespace_prefix` (an empty
///   prefix matches everything) and whose value matches the filter. With a query and a
///   vector index, results carry a cosine score, come best first, and items put with
///   [`IndexFields::Skip`] (or with nothing to embed) are left out; otherwise they come by
///   `updated_at`, newest first, with no score. `offset` and `limit` apply last. A malformed
///   filter is `InvalidInput`.
/// - `list_namespaces` lists namespaces that hold at least one live item.
/// - Expired items are never returned, even before [`Store::sweep_expired`] removes them.
pub trait Store: Send + Sync + 'static {
    /// The item at `namespace` / `key`, if it exists and has not expired.
    fn get(&self, namespace: &[String], key: &str) -> impl Future<Output = Result<Option<Item>>> + Send;

    /// Create or replace the item at `namespace` / `key`. `value` must be a JSON object.
    fn put(
        &self,
        namespace: &[String],
        key: &str,
        value: Value,
        opts: PutOptions,
    ) -> impl Future<Output = Result<()>> + Send;

    /// Delete the item at `namespace` / `key` (no error if it does not exist).
    fn delete(&self, namespace: &[String], key: &str) -> impl Future<Output = Result<()>> + Send;

    /// Items under `namespace_prefix` matching `query` (see the trait docs for the order).
    fn search(
        &self,
        namespace_prefix: &[String],
        query: SearchQuery,
    ) -> impl Future<Output = Result<Vec<SearchItem>>> + Send;

    /// Namespaces holding items, filtered and cut as `opts` says, sorted.
    fn list_namespaces(&self, opts: ListNamespaces) -> impl Future<Output = Result<Vec<Vec<String>>>> + Send;

    /// Delete every expired item; returns how many were deleted.
    fn sweep_expired(&self) -> impl Future<Output = Result<usize>> + Send;
}

impl<T: Store> Store for Arc<T> {
    fn get(&self, namespace: &[String], key: &str) -> impl Future<Output = Result<Option<Item>>> + Send {
        (**self).get(namespace, key)
    }
    fn put(
        &self,
        namespace: &[String],
        key: &str,
        value: Value,
        opts: PutOptions,
    ) -> impl Future<Output = Result<()>> + Send {
        (**self).put(namespace, key, value, opts)
    }
    fn delete(&self, namespace: &[String], key: &str) -> impl Future<Output = Result<()>> + Send {
        (**self).delete(namespace, key)
    }
    fn search(
        &self,
        namespace_prefix: &[String],
        query: SearchQuery,
    ) -> impl Future<Output = Result<Vec<SearchItem>>> + Send {
        (**self).search(namespace_prefix, query)
    }
    fn list_namespaces(&self, opts: ListNamespaces) -> impl Future<Output = Result<Vec<Vec<String>>>> + Send {
        (**self).list_namespaces(opts)
    }
    fn sweep_expired(&self) -> impl Future<Output = Result<usize>> + Send {
        (**self).sweep_expired()
    }
}

/// A timestamp (RFC 3339, as [`crate::checkpoint::now_rfc3339`]) strictly later than `prev`,
/// so an overwrite always moves `updated_at` forward even within one clock tick.
///
/// If the system clock has stepped back past `prev`, the current time is returned anyway
/// after a bounded wait of a few microseconds.
#[must_use]
pub fn timestamp_after(prev: Option<&str>) -> String {
    let mut now = crate::checkpoint::now_rfc3339();
    let Some(prev) = prev else {
        return now;
    };
    // The format is fixed-width UTC, so string order is time order.
    for _ in 0..10_000 {
        if now.as_str() > prev {
            break;
        }
        std::hint::spin_loop();
        now = crate::checkpoint::now_rfc3339();
    }
    now
}

/// An [`Error::Backend`] of kind [`BackendErrorKind::InvalidInput`].
pub(crate) fn invalid_input(message: impl Into<String>) -> Error {
    Error::Backend(BackendError::new(BackendErrorKind::InvalidInput, message))
}

/// Check that `value` is a JSON object, as every stored value must be.
///
/// # Errors
/// [`BackendErrorKind::InvalidInput`] naming the JSON type found instead.
pub fn validate_value(value: &Value) -> Result<()> {
    if value.is_object() {
        return Ok(());
    }
    let kind = match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    };
    Err(invalid_input(format!(
        "store values must be JSON objects, got {kind}"
    )))
}
