//! [`InMemoryStore`]: the reference [`Store`], keeping everything in process memory.

use super::namespace::has_prefix;
use super::{
    texts_at_path, timestamp_after, validate_namespace, validate_value, Filter, IndexConfig, IndexFields,
    Item, ListNamespaces, PutOptions, SearchItem, SearchQuery, Store, TtlConfig,
};
use crate::error::{BackendError, BackendErrorKind, Error, Result};
use serde_json::Value;
use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;
use tokio::time::Instant;

/// A [`Store`] in process memory, optionally with vector search ([`IndexConfig`]) and default
/// expiry ([`TtlConfig`]). Data is lost when the process exits.
///
/// Clones share the same data. Configure it ([`with_ttl`](Self::with_ttl)) before cloning:
/// the configuration is per handle.
///
/// Expiry uses [`tokio::time::Instant`], so tests with a paused tokio clock can advance time
/// instead of sleeping. Expired items are hidden at once and removed by
/// [`Store::sweep_expired`]; call it now and then to free their memory.
#[derive(Clone, Default)]
pub struct InMemoryStore {
    data: Arc<Mutex<Data>>,
    index: Option<IndexConfig>,
    ttl: TtlConfig,
}

#[derive(Default)]
struct Data {
    namespaces: BTreeMap<Vec<String>, BTreeMap<String, Entry>>,
    /// The latest timestamp handed out, so every write gets a strictly later one.
    last_ts: Option<String>,
}

struct Entry {
    item: Item,
    /// The item's TTL, restarted by refreshing reads.
    ttl: Option<Duration>,
    expires_at: Option<Instant>,
    /// Embeddings of the indexed fields (empty if not indexed).
    vectors: Vec<Vec<f32>>,
}

impl Entry {
    fn is_live(&self, now: Instant) -> bool {
        self.expires_at.is_none_or(|at| now < at)
    }

    fn refresh(&mut self, now: Instant) {
        if let Some(ttl) = self.ttl {
            self.expires_at = now.checked_add(ttl);
        }
    }
}

impl fmt::Debug for InMemoryStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InMemoryStore")
            .field("index", &self.index)
            .field("ttl", &self.ttl)
            .finish_non_exhaustive()
    }
}

fn backend_other(message: String) -> Error {
    Error::Backend(BackendError::new(BackendErrorKind::Other, message))
}

impl InMemoryStore {
    /// An empty store without vector search or default expiry.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty store with vector search.
    #[must_use]
    pub fn with_index(index: IndexConfig) -> Self {
        Self {
            index: Some(index),
            ..Self::default()
        }
    }

    /// This store with expiry settings `ttl`.
    #[must_use]
    pub fn with_ttl(mut self, ttl: TtlConfig) -> Self {
        self.ttl = ttl;
        self
    }

    /// Its vector-search settings.
    #[must_use]
    pub fn index_config(&self) -> Option<&IndexConfig> {
        self.index.as_ref()
    }

    /// Its expiry settings.
    #[must_use]
    pub fn ttl_config(&self) -> TtlConfig {
        self.ttl
    }

    fn lock(&self) -> MutexGuard<'_, Data> {
        // A panic while holding the lock cannot leave `Data` half-updated in a way that
        // matters more than losing the store, so keep going.
        self.data.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Embed `texts` with the index's embedder, checking count and dimensions.
    async fn embed(&self, index: &IndexConfig, texts: Vec<String>) -> Result<Vec<Vec<f32>>> {
        let want = texts.len();
        let vectors = index.embedder.embed(texts).await?;
        if vectors.len() != want {
            return Err(backend_other(format!(
                "embedder returned {} vectors for {want} texts",
                vectors.len()
            )));
        }
        if let Some(bad) = vectors.iter().find(|v| v.len() != index.dims) {
            return Err(backend_other(format!(
                "embedder returned a vector of {} dimensions, the index expects {}",
                bad.len(),
                index.dims
            )));
        }
        Ok(vectors)
    }

    async fn embed_value(&self, value: &Value, fields: &IndexFields) -> Result<Vec<Vec<f32>>> {
        let Some(index) = &self.index else {
            return Ok(Vec::new());
        };
        let fields = match fields {
            IndexFields::Skip => return Ok(Vec::new()),
            IndexFields::Default => &index.fields,
            IndexFields::Fields(fields) => fields,
        };
        let texts: Vec<String> = fields.iter().flat_map(|f| texts_at_path(value, f)).collect();
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        self.embed(index, texts).await
    }
}

impl Store for InMemoryStore {
    async fn get(&self, namespace: &[String], key: &str) -> Result<Option<Item>> {
        let now = Instant::now();
        let mut data = self.lock();
        let Some(entry) = data
            .namespaces
            .get_mut(namespace)
            .and_then(|items| items.get_mut(key))
        else {
            return Ok(None);
        };
        if !entry.is_live(now) {
            return Ok(None);
        }
        if self.ttl.refresh_on_read {
            entry.refresh(now);
        }
        Ok(Some(entry.item.clone()))
    }

    async fn put(&self, namespace: &[String], key: &str, value: Value, opts: PutOptions) -> Result<()> {
        validate_namespace(namespace)?;
        validate_value(&value)?;
        let vectors = self.embed_value(&value, &opts.index).await?;
        let ttl = opts.ttl.or(self.ttl.default_ttl);

        let now = Instant::now();
        let mut data = self.lock();
        let ts = timestamp_after(data.last_ts.as_deref());
        data.last_ts = Some(ts.clone());
        let items = data.namespaces.entry(namespace.to_vec()).or_default();
        let created_at = match items.get(key) {
            Some(old) if old.is_live(now) => old.item.created_at.clone(),
            _ => ts.clone(),
        };
        let item = Item {
            namespace: namespace.to_vec(),
            key: key.to_owned(),
            value,
            created_at,
            updated_at: ts,
        };
        let expires_at = ttl.and_then(|ttl| now.checked_add(ttl));
        items.insert(
            key.to_owned(),
            Entry {
                item,
                ttl,
                expires_at,
                vectors,
            },
        );
        Ok(())
    }

    async fn delete(&self, namespace: &[String], key: &str) -> Result<()> {
        let mut data = self.lock();
        if let Some(items) = data.namespaces.get_mut(namespace) {
            items.remove(key);
            if items.is_empty() {
                data.namespaces.remove(namespace);
            }
        }
        Ok(())
    }

    async fn search(&self, namespace_prefix: &[String], query: SearchQuery) -> Result<Vec<SearchItem>> {
        let filter = Filter::parse(&query.filter)?;
        let query_vector = match (&query.query, &self.index) {
            (Some(text), Some(index)) => self.embed(index, vec![text.clone()]).await?.pop(),
            _ => None,
        };
        let refresh = query.refresh_ttl.unwrap_or(self.ttl.refresh_on_read);

        let now = Instant::now();
        let mut data = self.lock();
        let mut hits: Vec<(&Entry, Option<f64>)> = data
            .namespaces
            .range(namespace_prefix.to_vec()..)
            .take_while(|(ns, _)| has_prefix(ns, namespace_prefix))
            .flat_map(|(_, items)| items.values())
            .filter(|e| e.is_live(now) && filter.matches(&e.item.value))
            .filter_map(|e| match &query_vector {
                None => Some((e, None)),
                Some(q) => e
                    .vectors
                    .iter()
                    .map(|v| super::cosine(q, v))
                    .max_by(f64::total_cmp)
                    .map(|score| (e, Some(score))),
            })
            .collect();
        hits.sort_by(|(a, sa), (b, sb)| {
            let by_score = match (sa, sb) {
                (Some(x), Some(y)) => y.total_cmp(x),
                _ => Ordering::Equal,
            };
            by_score
                .then_with(|| b.item.updated_at.cmp(&a.item.updated_at))
                .then_with(|| a.item.namespace.cmp(&b.item.namespace))
                .then_with(|| a.item.key.cmp(&b.item.key))
        });
        let results: Vec<SearchItem> = hits
            .into_iter()
            .skip(query.offset)
            .take(query.limit)
            .map(|(e, score)| SearchItem {
                item: e.item.clone(),
                score,
            })
            .collect();

        if refresh {
            for found in &results {
                if let Some(entry) = data
                    .namespaces
                    .get_mut(&found.item.namespace)
                    .and_then(|items| items.get_mut(&found.item.key))
                {
                    entry.refresh(now);
                }
            }
        }
        Ok(results)
    }

    async fn list_namespaces(&self, opts: ListNamespaces) -> Result<Vec<Vec<String>>> {
        opts.validate()?;
        let now = Instant::now();
        let data = self.lock();
        let live = data
            .namespaces
            .iter()
            .filter(|(ns, items)| opts.matches(ns) && items.values().any(|e| e.is_live(now)))
            .map(|(ns, _)| ns.clone());
        Ok(opts.apply(live))
    }

    async fn sweep_expired(&self) -> Result<usize> {
        let now = Instant::now();
        let mut data = self.lock();
        let mut removed = 0;
        data.namespaces.retain(|_, items| {
            let before = items.len();
            items.retain(|_, e| e.is_live(now));
            removed += before - items.len();
            !items.is_empty()
        });
        Ok(removed)
    }
}

#[cfg(test)]
mod tests {
    use super::super::{namespace, HashEmbedder};
    use super::*;
    use serde_json::json;

    fn vector_store(dims: usize) -> InMemoryStore {
        InMemoryStore::with_index(IndexConfig::new(dims, Arc::new(HashEmbedder::new(dims))))
    }

    #[tokio::test(start_paused = true)]
    async fn ttl_refresh_on_read() {
        let ns = namespace(["t"]);
        let ttl = Duration::from_secs(10);
        let store = InMemoryStore::new();
        store
            .put(&ns, "k", json!({"a": 1}), PutOptions::new().ttl(ttl))
            .await
            .unwrap();
        tokio::time::advance(Duration::from_secs(7)).await;
        assert!(store.get(&ns, "k").await.unwrap().is_some());
        tokio::time::advance(Duration::from_secs(7)).await;
        assert!(
            store.get(&ns, "k").await.unwrap().is_some(),
            "the read at 7s restarted the TTL"
        );
        // Search refreshes too, unless told not to.
        tokio::time::advance(Duration::from_secs(7)).await;
        assert_eq!(store.search(&ns, SearchQuery::new()).await.unwrap().len(), 1);
        tokio::time::advance(Duration::from_secs(7)).await;
        let found = store
            .search(&ns, SearchQuery::new().refresh_ttl(false))
            .await
            .unwrap();
        assert_eq!(found.len(), 1);
        tokio::time::advance(Duration::from_secs(7)).await;
        assert!(
            store.get(&ns, "k").await.unwrap().is_none(),
            "refresh_ttl(false) did not refresh"
        );
        assert_eq!(store.sweep_expired().await.unwrap(), 1);
        assert!(store
            .list_namespaces(ListNamespaces::new())
            .await
            .unwrap()
            .is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn ttl_defaults_and_no_refresh() {
        let ns = namespace(["t"]);
        let store = InMemoryStore::new().with_ttl(TtlConfig {
            default_ttl: Some(Duration::from_secs(10)),
            refresh_on_read: false,
        });
        store
            .put(&ns, "default", json!({}), PutOptions::new())
            .await
            .unwrap();
        store
            .put(
                &ns,
                "long",
                json!({}),
                PutOptions::new().ttl(Duration::from_secs(100)),
            )
            .await
            .unwrap();
        tokio::time::advance(Duration::from_secs(7)).await;
        assert!(store.get(&ns, "default").await.unwrap().is_some());
        tokio::time::advance(Duration::from_secs(7)).await;
        assert!(
            store.get(&ns, "default").await.unwrap().is_none(),
            "reads do not refresh"
        );
        let left = store
            .search(&ns, SearchQuery::new().refresh_ttl(true))
            .await
            .unwrap();
        assert_eq!(left.len(), 1);
        assert_eq!(left[0].item.key, "long");
        // An expired key written again is a new item.
        store
            .put(&ns, "default", json!({"v": 2}), PutOptions::new())
            .await
            .unwrap();
        let again = store.get(&ns, "default").await.unwrap().unwrap();
        assert_eq!(again.created_at, again.updated_at);
        assert_eq!(store.sweep_expired().await.unwrap(), 0);
    }

    #[tokio::test]
    async fn index_fields_override_and_skip() {
        let store = vector_store(256).with_ttl(TtlConfig::default());
        let ns = namespace(["docs"]);
        store
            .put(
                &ns,
                "titled",
                json!({"title": "rust tokio runtime", "body": "bread yeast flour"}),
                PutOptions::new().index(IndexFields::Fields(vec!["title".into()])),
            )
            .await
            .unwrap();
        store
            .put(
                &ns,
                "plain",
                json!({"body": "bread yeast flour oven"}),
                PutOptions::new(),
            )
            .await
            .unwrap();
        store
            .put(
                &ns,
                "skipped",
                json!({"body": "rust tokio runtime"}),
                PutOptions::new().index(IndexFields::Skip),
            )
            .await
            .unwrap();
        store
            .put(
                &ns,
                "nothing",
                json!({"body": "rust"}),
                PutOptions::new().index(IndexFields::Fields(vec!["missing".into()])),
            )
            .await
            .unwrap();
        let found = store
            .search(&ns, SearchQuery::new().query("rust runtime"))
            .await
            .unwrap();
        let keys: Vec<&str> = found.iter().map(|f| f.item.key.as_str()).collect();
        assert_eq!(keys, ["titled", "plain"]);
        let found = store
            .search(&ns, SearchQuery::new().query("bread oven"))
            .await
            .unwrap();
        assert_eq!(found[0].item.key, "plain");
        // Without a query every item comes back, unscored.
        let all = store.search(&ns, SearchQuery::new()).await.unwrap();
        assert_eq!(all.len(), 4);
        assert!(all.iter().all(|f| f.score.is_none()));
    }

    #[tokio::test]
    async fn query_without_index_is_ignored() {
        let store = InMemoryStore::new();
        let ns = namespace(["docs"]);
        store
            .put(&ns, "a", json!({"t": "x"}), PutOptions::new())
            .await
            .unwrap();
        store
            .put(&ns, "b", json!({"t": "y"}), PutOptions::new())
            .await
            .unwrap();
        let found = store.search(&ns, SearchQuery::new().query("x")).await.unwrap();
        let keys: Vec<&str> = found.iter().map(|f| f.item.key.as_str()).collect();
        assert_eq!(keys, ["b", "a"], "newest first");
        assert!(found.iter().all(|f| f.score.is_none()));
    }

    struct BadEmbedder;
    impl super::super::Embedder for BadEmbedder {
        fn embed(&self, texts: Vec<String>) -> futures::future::BoxFuture<'_, Result<Vec<Vec<f32>>>> {
            Box::pin(async move { Ok(texts.iter().map(|_| vec![1.0; 3]).collect()) })
        }
    }

    #[tokio::test]
    async fn embedder_dimension_mismatch_is_an_error() {
        let store = InMemoryStore::with_index(IndexConfig::new(4, Arc::new(BadEmbedder)));
        let ns = namespace(["docs"]);
        let err = store
            .put(&ns, "a", json!({"t": "x"}), PutOptions::new())
            .await
            .unwrap_err();
        assert!(err.to_string().contains("dimensions"), "{err}");
        assert!(
            store.get(&ns, "a").await.unwrap().is_none(),
            "failed put stores nothing"
        );
        assert!(store.search(&ns, SearchQuery::new().query("x")).await.is_err());
    }

    #[tokio::test]
    async fn search_item_serde_flattens_item() {
        let item = SearchItem {
            item: Item {
                namespace: namespace(["a"]),
                key: "k".into(),
                value: json!({"x": 1}),
                created_at: "c".into(),
                updated_at: "u".into(),
            },
            score: Some(0.5),
        };
        let v = serde_json::to_value(&item).unwrap();
        assert_eq!(v["key"], "k");
        assert_eq!(v["score"], 0.5);
        let back: SearchItem = serde_json::from_value(v).unwrap();
        assert_eq!(back, item);
        let unscored = SearchItem { score: None, ..item };
        let v = serde_json::to_value(&unscored).unwrap();
        assert!(v.get("score").is_none());
        assert_eq!(serde_json::from_value::<SearchItem>(v).unwrap(), unscored);
    }

    #[tokio::test]
    async fn clones_share_data() {
        let a = InMemoryStore::new();
        let b = a.clone();
        let ns = namespace(["n"]);
        a.put(&ns, "k", json!({}), PutOptions::new()).await.unwrap();
        assert!(b.get(&ns, "k").await.unwrap().is_some());
    }
}
