//! Several processes migrating one fresh database at the same time all succeed, and each
//! migration is applied exactly once (pools racing stand in for processes: each pool has its
//! own connections, like a server replica).
#![allow(clippy::unwrap_used, clippy::expect_used)]
use graphloom_core::checkpoint::{CheckpointConfig, Checkpointer};
use graphloom_core::store::{namespace, PutOptions};
use graphloom_core::Store;
use graphloom_postgres::migrate::MIGRATIONS;
use graphloom_postgres::testing::test_database;
use graphloom_postgres::{PgPoolOptions, PostgresSaver, PostgresStore};
use serde_json::json;

async fn applied(url: &str) -> Vec<i64> {
    let pool = PgPoolOptions::new()
        .max_connections(1)
        .connect(url)
        .await
        .unwrap();
    sqlx::query_scalar("SELECT version::int8 FROM graphloom_migrations ORDER BY version")
        .fetch_all(&pool)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn pools_racing_to_migrate_a_fresh_database_all_succeed() {
    let (url, _db) = test_database().await;
    let mut racers = Vec::new();
    for _ in 0..6 {
        let url = url.clone();
        racers.push(tokio::spawn(async move {
            let saver = PostgresSaver::connect(&url).await.unwrap();
            saver.migrate().await
        }));
    }
    for r in racers {
        r.await.unwrap().unwrap();
    }
    let want: Vec<i64> = MIGRATIONS.iter().map(|m| m.version).collect();
    assert_eq!(applied(&url).await, want);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn first_use_migrates_even_when_saver_and_store_start_together() {
    let (url, _db) = test_database().await;
    let (saver, store) = tokio::join!(PostgresSaver::connect(&url), PostgresStore::connect(&url));
    let (saver, store) = (saver.unwrap(), store.unwrap());
    let third = PostgresSaver::connect(&url).await.unwrap();
    let (cfg, ns, all) = (
        CheckpointConfig::thread("t"),
        namespace(["n"]),
        Default::default(),
    );
    // No explicit migrate(): the first calls, made at the same time, migrate.
    let (a, b, c) = tokio::join!(
        saver.get_tuple(&cfg),
        store.put(&ns, "k", json!({"v": 1}), PutOptions::new()),
        third.list(&all),
    );
    assert!(a.unwrap().is_none());
    b.unwrap();
    assert!(c.unwrap().is_empty());
    let want: Vec<i64> = MIGRATIONS.iter().map(|m| m.version).collect();
    assert_eq!(applied(&url).await, want);
    // Migrating an up-to-date database is a no-op.
    graphloom_postgres::migrate(saver.pool()).await.unwrap();
    assert_eq!(applied(&url).await, want);
}

#[tokio::test]
async fn stored_values_are_compressed_with_lz4() {
    // The server the tests run on (Debian's PostgreSQL) is built with lz4.
    let (url, _db) = test_database().await;
    let saver = PostgresSaver::connect(&url).await.unwrap();
    saver.migrate().await.unwrap();
    let methods: Vec<(String, String)> = sqlx::query_as(
        "SELECT c.relname::text || '.' || a.attname::text, a.attcompression::text
         FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
         WHERE (c.relname, a.attname) IN (('graphloom_checkpoints', 'checkpoint'),
             ('graphloom_checkpoint_blobs', 'value'), ('graphloom_checkpoint_writes', 'value'),
             ('graphloom_store', 'value'))
         ORDER BY 1",
    )
    .fetch_all(saver.pool())
    .await
    .unwrap();
    assert_eq!(methods.len(), 4, "{methods:?}");
    assert!(methods.iter().all(|(_, m)| m == "l"), "{methods:?}");
}
