//! SQLite store behaviour beyond the kits: TTL refresh and defaults on the wall clock, index
//! field overrides, embedder errors, and data (vectors included) surviving a reopen.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use futures::future::BoxFuture;
use graphloom_core::store::{
    namespace, Embedder, HashEmbedder, IndexConfig, IndexFields, ListNamespaces, PutOptions, SearchQuery,
    Store, TtlConfig,
};
use graphloom_sqlite::SqliteStore;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

fn index(dims: usize) -> IndexConfig {
    IndexConfig::new(dims, Arc::new(HashEmbedder::new(dims)))
}

#[tokio::test]
async fn reads_refresh_the_ttl_unless_told_not_to() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("ttl.db")).await.unwrap();
    let ns = namespace(["t"]);
    let ttl = Duration::from_millis(1500);
    store
        .put(&ns, "k", json!({"a": 1}), PutOptions::new().ttl(ttl))
        .await
        .unwrap();
    store
        .put(&ns, "forever", json!({"a": 2}), PutOptions::new())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(900)).await;
    assert!(store.get(&ns, "k").await.unwrap().is_some());
    tokio::time::sleep(Duration::from_millis(900)).await;
    // 1.8 s after the put, 0.9 s after the refreshing read.
    assert!(
        store.get(&ns, "k").await.unwrap().is_some(),
        "the read restarted the TTL"
    );
    let found = store
        .search(&ns, SearchQuery::new().refresh_ttl(false))
        .await
        .unwrap();
    assert_eq!(found.len(), 2);
    tokio::time::sleep(Duration::from_millis(1700)).await;
    assert!(
        store.get(&ns, "k").await.unwrap().is_none(),
        "refresh_ttl(false) did not refresh"
    );
    assert_eq!(store.sweep_expired().await.unwrap(), 1);
    assert_eq!(store.sweep_expired().await.unwrap(), 0);
    assert_eq!(
        store.list_namespaces(ListNamespaces::new()).await.unwrap(),
        vec![ns.clone()]
    );
}

#[tokio::test]
async fn default_ttl_without_refresh_and_expired_keys_written_again_are_new() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::builder(dir.path().join("ttl.db"))
        .ttl(TtlConfig {
            default_ttl: Some(Duration::from_millis(600)),
            refresh_on_read: false,
        })
        .open()
        .await
        .unwrap();
    let ns = namespace(["t"]);
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
    let first = store.get(&ns, "default").await.unwrap().unwrap();
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert!(store.get(&ns, "default").await.unwrap().is_none());
    let left = store.search(&ns, SearchQuery::new()).await.unwrap();
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].item.key, "long");
    store
        .put(&ns, "default", json!({"v": 2}), PutOptions::new())
        .await
        .unwrap();
    let again = store.get(&ns, "default").await.unwrap().unwrap();
    assert_eq!(again.created_at, again.updated_at, "a new item");
    assert!(again.created_at > first.created_at);
    assert_eq!(store.sweep_expired().await.unwrap(), 0);
}

#[tokio::test]
async fn index_fields_override_and_skip() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::builder(dir.path().join("vec.db"))
        .index(index(256))
        .open()
        .await
        .unwrap();
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
            "tags",
            json!({"tags": ["garden", "tomato"], "n": 1}),
            PutOptions::new().index(IndexFields::Fields(vec!["tags".into(), "missing".into()])),
        )
        .await
        .unwrap();
    let keys = |found: &[graphloom_core::store::SearchItem]| -> Vec<String> {
        found.iter().map(|f| f.item.key.clone()).collect()
    };
    let found = store
        .search(&ns, SearchQuery::new().query("rust runtime"))
        .await
        .unwrap();
    assert_eq!(keys(&found)[0], "titled");
    assert!(!keys(&found).contains(&"skipped".to_owned()));
    let found = store
        .search(&ns, SearchQuery::new().query("tomato"))
        .await
        .unwrap();
    assert_eq!(keys(&found)[0], "tags", "each string of a list is embedded");
    let found = store
        .search(&ns, SearchQuery::new().query("bread oven").filter("n", 1))
        .await
        .unwrap();
    assert_eq!(keys(&found), ["tags"], "filters apply to query searches");
    let all = store.search(&ns, SearchQuery::new()).await.unwrap();
    assert_eq!(all.len(), 4);
    assert!(all.iter().all(|f| f.score.is_none()));

    // Reopened with the same index: vectors are read back, nothing is embedded again.
    drop(store);
    let store = SqliteStore::open(dir.path().join("vec.db"))
        .await
        .unwrap()
        .with_index(index(256));
    let found = store
        .search(&ns, SearchQuery::new().query("rust runtime").limit(1))
        .await
        .unwrap();
    assert_eq!(keys(&found), ["titled"]);
    assert!(found[0].score.unwrap() > 0.5);
    // Without an index, a query is ignored: newest first, no score.
    let plain = SqliteStore::open(dir.path().join("vec.db")).await.unwrap();
    let found = plain.search(&ns, SearchQuery::new().query("rust")).await.unwrap();
    assert_eq!(keys(&found)[0], "tags");
    assert!(found.iter().all(|f| f.score.is_none()));
}

struct BadEmbedder;
impl Embedder for BadEmbedder {
    fn embed(&self, texts: Vec<String>) -> BoxFuture<'_, graphloom_core::Result<Vec<Vec<f32>>>> {
        Box::pin(async move { Ok(texts.iter().map(|_| vec![1.0; 3]).collect()) })
    }
}

#[tokio::test]
async fn an_embedder_of_the_wrong_dimension_is_an_error_and_stores_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::builder(dir.path().join("bad.db"))
        .index(IndexConfig::new(4, Arc::new(BadEmbedder)))
        .open()
        .await
        .unwrap();
    let ns = namespace(["docs"]);
    let err = store
        .put(&ns, "a", json!({"t": "x"}), PutOptions::new())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("dimensions"), "{err}");
    assert!(store.get(&ns, "a").await.unwrap().is_none());
    assert!(store.search(&ns, SearchQuery::new().query("x")).await.is_err());
}

#[tokio::test]
async fn items_survive_a_reopen_and_keep_created_at() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("keep.db");
    let ns = namespace(["users", "42", "prefs"]);
    let created = {
        let store = SqliteStore::open(&path).await.unwrap();
        store
            .put(&ns, "theme", json!({"dark": true}), PutOptions::new())
            .await
            .unwrap();
        store.get(&ns, "theme").await.unwrap().unwrap().created_at
    };
    let store = SqliteStore::open(&path).await.unwrap();
    store
        .put(&ns, "theme", json!({"dark": false}), PutOptions::new())
        .await
        .unwrap();
    let item = store.get(&ns, "theme").await.unwrap().unwrap();
    assert_eq!(item.created_at, created);
    assert!(item.updated_at > created);
    assert_eq!(item.value, json!({"dark": false}));
    assert_eq!(
        store
            .list_namespaces(ListNamespaces::new().prefix(["users", "*"]).max_depth(2))
            .await
            .unwrap(),
        vec![namespace(["users", "42"])]
    );
    // A label with '.' never aliases a stored namespace.
    assert!(store
        .get(&namespace(["users", "42.prefs"]), "theme")
        .await
        .unwrap()
        .is_none());
    assert!(store
        .search(&namespace(["users", "42.prefs"]), SearchQuery::new())
        .await
        .unwrap()
        .is_empty());
}
