//! The store conformance kits (plain and vector search with `HashEmbedder`) against
//! PostgreSQL, filters answered exactly as the in-memory reference answers them, TTL
//! refresh on the database clock, and the SQL-specific edges.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use graphloom_core::store::{
    namespace, HashEmbedder, IndexConfig, IndexFields, ListNamespaces, PutOptions, SearchQuery, TtlConfig,
};
use graphloom_core::{BackendErrorKind, Error, InMemoryStore, Store};
use graphloom_postgres::testing::test_database;
use graphloom_postgres::PostgresStore;
use graphloom_test_kit::store::{store_conformance, store_vector_conformance};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

fn index(dims: usize) -> IndexConfig {
    IndexConfig::new(dims, Arc::new(HashEmbedder::new(dims)))
}

#[tokio::test]
async fn passes_the_store_conformance_kit() {
    let (url, _db) = test_database().await;
    let store = PostgresStore::connect(&url).await.unwrap();
    store_conformance(&store).await;
    // Again on the same database, as replicas sharing it would.
    store_conformance(&store).await;
}

#[tokio::test]
async fn passes_the_vector_kits_whole_value_and_fields() {
    let (url, _db) = test_database().await;
    let store = PostgresStore::connect(&url).await.unwrap().with_index(index(256));
    store_conformance(&store).await;
    store_vector_conformance(&store).await;
    let fields = PostgresStore::from_pool(store.pool().clone()).with_index(index(256).fields(["text"]));
    store_vector_conformance(&fields).await;
    let dyn_store: Arc<dyn graphloom_core::store::DynStore> = Arc::new(store.clone());
    store_vector_conformance(&dyn_store).await;
}

#[tokio::test]
async fn filters_match_the_in_memory_reference() {
    let (url, _db) = test_database().await;
    let pg = PostgresStore::connect(&url).await.unwrap();
    let mem = InMemoryStore::new();
    let ns = namespace(["diff"]);
    let items = [
        (
            "a",
            json!({"kind": "note", "n": 1, "tags": ["x", "y"], "author": {"name": "ada"}, "dotted.key": 1}),
        ),
        (
            "b",
            json!({"kind": "note", "n": 5.0, "tags": ["x"], "author": {"name": "bob", "age": 3}}),
        ),
        (
            "c",
            json!({"kind": "todo", "n": 10, "tags": [], "nested": {"deep": {"v": null}}}),
        ),
        (
            "d",
            json!({"kind": "Note", "n": "5", "flag": true, "arr": [1, 2.0, {"k": 1}]}),
        ),
        (
            "e",
            json!({"n": -3, "flag": false, "kind": null, "arr": [1, 2, {"k": 1.0}]}),
        ),
    ];
    for (key, value) in &items {
        pg.put(&ns, key, value.clone(), PutOptions::new()).await.unwrap();
        mem.put(&ns, key, value.clone(), PutOptions::new()).await.unwrap();
    }
    let filters = [
        json!({"kind": "note"}),
        json!({"kind": null}),
        json!({"n": 5}),
        json!({"n": "5"}),
        json!({"tags": ["x"]}),
        json!({"tags": []}),
        json!({"arr": [1, 2, {"k": 1}]}),
        json!({"flag": false}),
        json!({"kind": {"$ne": "note"}}),
        json!({"kind": {"$eq": "todo"}}),
        json!({"kind": {"$eq": "note", "$ne": "todo"}}),
        json!({"n": {"$gt": 1}}),
        json!({"n": {"$gte": 1, "$lt": 10}}),
        json!({"kind": {"$gt": "N"}}),
        json!({"author.name": "ada"}),
        json!({"author": {"name": "bob"}}),
        json!({"dotted.key": 1}),
        json!({"tags.0": "x"}),
        json!({"nested.deep.v": null}),
        json!({"missing": {"$ne": 1}}),
        json!({"kind": "note", "n": {"$lt": 3}}),
    ];
    for f in filters {
        let Value::Object(map) = f.clone() else {
            unreachable!()
        };
        let q = SearchQuery {
            filter: map,
            limit: 100,
            ..SearchQuery::default()
        };
        let keys = |found: Vec<graphloom_core::store::SearchItem>| {
            let mut k: Vec<String> = found.into_iter().map(|i| i.item.key).collect();
            k.sort();
            k
        };
        let want = keys(mem.search(&ns, q.clone()).await.unwrap());
        let got = keys(pg.search(&ns, q).await.unwrap());
        assert_eq!(got, want, "filter {f}");
    }
}

#[tokio::test]
async fn pages_with_filters_evaluated_in_rust_follow_the_full_order() {
    let (url, _db) = test_database().await;
    let store = PostgresStore::connect(&url).await.unwrap();
    let ns = namespace(["page"]);
    for i in 0..12 {
        store
            .put(
                &ns,
                &format!("k{i:02}"),
                json!({"n": i, "kind": "x"}),
                PutOptions::new(),
            )
            .await
            .unwrap();
    }
    // `$gte` stays in Rust, `kind` goes to SQL: paging must happen after both.
    let q = || {
        SearchQuery::new()
            .filter("n", json!({"$gte": 3}))
            .filter("kind", "x")
    };
    let all: Vec<String> = store
        .search(&ns, q().limit(100))
        .await
        .unwrap()
        .into_iter()
        .map(|i| i.item.key)
        .collect();
    assert_eq!(all.len(), 9);
    assert_eq!(all[0], "k11", "newest first");
    let mut paged = Vec::new();
    for offset in (0..9).step_by(4) {
        paged.extend(
            store
                .search(&ns, q().offset(offset).limit(4))
                .await
                .unwrap()
                .into_iter()
                .map(|i| i.item.key),
        );
    }
    assert_eq!(paged, all);
}

async fn expires_at(store: &PostgresStore, key: &str) -> f64 {
    sqlx::query_scalar("SELECT extract(epoch FROM expires_at)::float8 FROM graphloom_store WHERE key = $1")
        .bind(key)
        .fetch_one(store.pool())
        .await
        .unwrap()
}

#[tokio::test]
async fn reads_refresh_ttl_on_the_database_clock_unless_told_not_to() {
    let (url, _db) = test_database().await;
    let store = PostgresStore::connect(&url).await.unwrap();
    let ns = namespace(["ttl"]);
    let hour = Duration::from_secs(3600);
    store
        .put(&ns, "k", json!({"a": 1}), PutOptions::new().ttl(hour))
        .await
        .unwrap();
    let t0 = expires_at(&store, "k").await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    store.get(&ns, "k").await.unwrap().unwrap();
    let t1 = expires_at(&store, "k").await;
    assert!(t1 > t0, "get refreshes ({t0} -> {t1})");
    tokio::time::sleep(Duration::from_millis(20)).await;
    store.search(&ns, SearchQuery::new()).await.unwrap();
    let t2 = expires_at(&store, "k").await;
    assert!(t2 > t1, "search refreshes ({t1} -> {t2})");
    store
        .search(&ns, SearchQuery::new().refresh_ttl(false))
        .await
        .unwrap();
    assert_eq!(expires_at(&store, "k").await, t2, "refresh_ttl(false)");

    // A store configured not to refresh, with a default TTL.
    let quiet = PostgresStore::from_pool(store.pool().clone()).with_ttl(TtlConfig {
        default_ttl: Some(hour),
        refresh_on_read: false,
    });
    quiet.put(&ns, "d", json!({}), PutOptions::new()).await.unwrap();
    let d0 = expires_at(&quiet, "d").await;
    assert!(d0 > 0.0, "the default TTL applies");
    tokio::time::sleep(Duration::from_millis(20)).await;
    quiet.get(&ns, "d").await.unwrap().unwrap();
    assert_eq!(expires_at(&quiet, "d").await, d0, "no refresh on read");
    // Items without a TTL never get an expiry.
    store
        .put(&ns, "forever", json!({}), PutOptions::new())
        .await
        .unwrap();
    store.get(&ns, "forever").await.unwrap().unwrap();
    let none: Option<f64> =
        sqlx::query_scalar("SELECT expires_at::text::float8 FROM graphloom_store WHERE key = 'forever'")
            .fetch_one(store.pool())
            .await
            .unwrap();
    assert_eq!(none, None);
}

#[tokio::test]
async fn an_expired_key_written_again_is_a_new_item() {
    let (url, _db) = test_database().await;
    let store = PostgresStore::connect(&url).await.unwrap();
    let ns = namespace(["re"]);
    store
        .put(
            &ns,
            "k",
            json!({"v": 1}),
            PutOptions::new().ttl(Duration::from_millis(1)),
        )
        .await
        .unwrap();
    let old_created: String = sqlx::query_scalar("SELECT created_at::text FROM graphloom_store")
        .fetch_one(store.pool())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(store.get(&ns, "k").await.unwrap().is_none());
    store
        .put(&ns, "k", json!({"v": 2}), PutOptions::new())
        .await
        .unwrap();
    let item = store.get(&ns, "k").await.unwrap().unwrap();
    assert_eq!(item.created_at, item.updated_at);
    let new_created: String = sqlx::query_scalar("SELECT created_at::text FROM graphloom_store")
        .fetch_one(store.pool())
        .await
        .unwrap();
    assert_ne!(old_created, new_created);
    assert_eq!(store.sweep_expired().await.unwrap(), 0);
}

#[tokio::test]
async fn index_fields_override_skip_and_embeddings_live_in_their_table() {
    let (url, _db) = test_database().await;
    let store = PostgresStore::connect(&url).await.unwrap().with_index(index(256));
    let ns = namespace(["docs"]);
    let put = |key: &'static str, value: Value, fields: IndexFields| {
        let store = store.clone();
        let ns = ns.clone();
        async move {
            store
                .put(&ns, key, value, PutOptions::new().index(fields))
                .await
                .unwrap()
        }
    };
    put(
        "titled",
        json!({"title": "rust tokio runtime", "body": "bread yeast flour"}),
        IndexFields::Fields(vec!["title".into()]),
    )
    .await;
    put(
        "plain",
        json!({"body": "bread yeast flour oven"}),
        IndexFields::Default,
    )
    .await;
    put(
        "skipped",
        json!({"body": "rust tokio runtime"}),
        IndexFields::Skip,
    )
    .await;
    put(
        "nothing",
        json!({"body": "rust"}),
        IndexFields::Fields(vec!["missing".into()]),
    )
    .await;
    let keys: Vec<String> = store
        .search(&ns, SearchQuery::new().query("rust runtime"))
        .await
        .unwrap()
        .into_iter()
        .map(|f| f.item.key)
        .collect();
    assert_eq!(keys, ["titled", "plain"]);
    let rows: Vec<(String, String, i32)> = sqlx::query_as(
        "SELECT key, field, array_length(embedding, 1) FROM graphloom_store_vectors ORDER BY key",
    )
    .fetch_all(store.pool())
    .await
    .unwrap();
    assert_eq!(
        rows,
        vec![
            ("plain".into(), "$".into(), 256),
            ("titled".into(), "title".into(), 256)
        ]
    );
    // Deleting an item deletes its embeddings; overwriting with Skip drops them.
    store.delete(&ns, "plain").await.unwrap();
    put("titled", json!({"title": "x"}), IndexFields::Skip).await;
    let left: i64 = sqlx::query_scalar("SELECT count(*) FROM graphloom_store_vectors")
        .fetch_one(store.pool())
        .await
        .unwrap();
    assert_eq!(left, 0);
    // Without an index configured, a query is ignored: newest first, no score.
    let plain = PostgresStore::from_pool(store.pool().clone());
    let found = plain.search(&ns, SearchQuery::new().query("rust")).await.unwrap();
    assert!(found.iter().all(|f| f.score.is_none()));
    assert_eq!(found[0].item.key, "titled");
}

#[tokio::test]
async fn namespaces_with_odd_labels_and_sql_edges() {
    let (url, _db) = test_database().await;
    let store = PostgresStore::connect(&url).await.unwrap();
    let odd = namespace(["a%", "_b", "c'd", "ü/v"]);
    store
        .put(&odd, "k", json!({"x": 1}), PutOptions::new())
        .await
        .unwrap();
    store
        .put(&namespace(["a%x"]), "k", json!({"x": 2}), PutOptions::new())
        .await
        .unwrap();
    assert_eq!(store.get(&odd, "k").await.unwrap().unwrap().namespace, odd);
    let under: Vec<_> = store
        .search(&namespace(["a%"]), SearchQuery::new())
        .await
        .unwrap();
    assert_eq!(under.len(), 1, "LIKE wildcards in labels are plain characters");
    let listed = store
        .list_namespaces(ListNamespaces::new().prefix(["a%", "*", "c'd"]))
        .await
        .unwrap();
    assert_eq!(listed, vec![odd.clone()]);
    // Namespaces that cannot hold items: nothing to find, nothing to delete.
    assert!(store.get(&namespace(["a%._b"]), "k").await.unwrap().is_none());
    store.delete(&namespace(["a%._b"]), "k").await.unwrap();
    assert!(store.get(&odd, "k").await.unwrap().is_some());
    assert!(store
        .search(&namespace(["a%._b"]), SearchQuery::new())
        .await
        .unwrap()
        .is_empty());
    // JSONB cannot hold U+0000: a typed InvalidInput, not a panic or an opaque error.
    let err = store
        .put(&odd, "nul", json!({"s": "a\u{0}b"}), PutOptions::new())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::Backend(b) if b.kind() == BackendErrorKind::InvalidInput),
        "{err}"
    );
}
