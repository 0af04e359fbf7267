//! Regression: searches that refresh TTLs, run concurrently with writes that reorder their
//! results, deadlocked each other ("deadlock detected") when each locked the rows in its
//! own join order.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use graphloom_core::store::{namespace, PutOptions, SearchQuery, Store};
use graphloom_postgres::testing::test_database;
use graphloom_postgres::PostgresStore;
use serde_json::json;
use std::time::Duration;

#[tokio::test]
async fn concurrent_refreshing_searches_and_writes_do_not_deadlock() {
    let (url, _db) = test_database().await;
    let store = PostgresStore::connect(&url).await.unwrap();
    let ns = namespace(["ttl", "hot"]);
    let opts = || PutOptions::new().ttl(Duration::from_secs(600));
    for i in 0..40 {
        store
            .put(&ns, &format!("k{i}"), json!({"i": i}), opts())
            .await
            .unwrap();
    }
    let mut tasks = Vec::new();
    for t in 0..8 {
        let (store, ns) = (store.clone(), ns.clone());
        tasks.push(tokio::spawn(async move {
            for round in 0..15 {
                // Rewriting items moves them to the front of the next searches' results.
                let key = format!("k{}", (t * 7 + round * 3) % 40);
                store
                    .put(&ns, &key, json!({"t": t, "round": round}), opts())
                    .await?;
                let found = store
                    .search(&ns, SearchQuery::new().limit(40).refresh_ttl(true))
                    .await?;
                assert_eq!(found.len(), 40);
            }
            Ok::<_, graphloom_core::Error>(())
        }));
    }
    for task in tasks {
        tokio::time::timeout(Duration::from_secs(60), task)
            .await
            .expect("no task hangs")
            .unwrap()
            .unwrap();
    }
}
