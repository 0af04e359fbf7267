//! A database written by the earlier release opens and migrates: its two tables of applied
//! migrations (the saver's and store's `graphloom_migrations` of version and description,
//! the server's own `server_schema_version`) become the one `graphloom_migrations`, and the
//! rows already stored are read as before. `server_schema_version` stays, kept up to date,
//! for the earlier release's replicas during a rolling upgrade.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use graphloom_core::store::{namespace, PutOptions};
use graphloom_core::Store;
use graphloom_postgres::migrate::{MIGRATIONS, SERVER_MIGRATIONS};
use graphloom_postgres::server::PgDb;
use graphloom_postgres::testing::test_database;
use graphloom_postgres::{PgPoolOptions, PostgresSaver, PostgresStore};
use graphloom_server_db::models::ThreadStatus;
use graphloom_server_db::{Db, RunEventRecord};
use serde_json::json;
use sqlx::PgPool;
use std::time::Duration;

/// A database as the earlier release left it: the storage tables and their bookkeeping,
/// the server's tables of `server_versions` and theirs, one idle thread and one pending run.
async fn earlier_release_database(pool: &PgPool, server_versions: &[i32]) {
    // graphloom-postgres' bookkeeping, as its migrations created it.
    sqlx::query(
        "CREATE TABLE graphloom_migrations (
             version     INTEGER PRIMARY KEY,
             description TEXT NOT NULL,
             applied_at  TIMESTAMPTZ NOT NULL DEFAULT now()
         )",
    )
    .execute(pool)
    .await
    .unwrap();
    for m in MIGRATIONS {
        for statement in m.statements {
            sqlx::query(statement).execute(pool).await.unwrap();
        }
        sqlx::query("INSERT INTO graphloom_migrations (version, description) VALUES ($1, $2)")
            .bind(i32::try_from(m.version).unwrap())
            .bind(m.description)
            .execute(pool)
            .await
            .unwrap();
    }
    // The server's, as its own migrator created them (versions 1 and 2 then).
    sqlx::query(
        "CREATE TABLE server_schema_version (
             version    INTEGER PRIMARY KEY,
             applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
         )",
    )
    .execute(pool)
    .await
    .unwrap();
    for (old, m) in [1i32, 2].iter().zip(SERVER_MIGRATIONS) {
        if !server_versions.contains(old) {
            continue;
        }
        for statement in m.statements {
            sqlx::query(statement).execute(pool).await.unwrap();
        }
        sqlx::query("INSERT INTO server_schema_version (version) VALUES ($1)")
            .bind(old)
            .execute(pool)
            .await
            .unwrap();
    }
    sqlx::query(
        "INSERT INTO server_threads (thread_id, owner, created_at, updated_at, state_updated_at, metadata, \
         config, status, state_values, interrupts, error, ttl, ttl_us, expires_at) \
         VALUES ('t-old', 'alice', 1, 1, 1, '{\"from\":\"before\"}', '{}', 'idle', '{\"n\":1}', '{}', \
         NULL, NULL, NULL, NULL)",
    )
    .execute(pool)
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO server_runs (run_id, thread_id, owner, assistant_id, created_at, updated_at, status, \
         metadata, kwargs, multitask_strategy, due_at, worker, lease_expires_at, attempt, cancel_action) \
         VALUES ('r-old', 't-old', 'alice', 'a', 2, 2, 'pending', '{}', '{\"input\":{\"n\":2}}', 'enqueue', 0, \
         NULL, NULL, 0, NULL)",
    )
    .execute(pool)
    .await
    .unwrap();
}

/// `(version, component)` of every applied migration.
async fn applied(pool: &PgPool) -> Vec<(i64, String)> {
    sqlx::query_as("SELECT version::int8, component FROM graphloom_migrations ORDER BY version")
        .fetch_all(pool)
        .await
        .unwrap()
}

/// The versions in the earlier release's `server_schema_version`.
async fn legacy_versions(pool: &PgPool) -> Vec<i32> {
    sqlx::query_scalar("SELECT version FROM server_schema_version ORDER BY version")
        .fetch_all(pool)
        .await
        .unwrap()
}

fn all_known() -> Vec<(i64, String)> {
    MIGRATIONS
        .iter()
        .chain(SERVER_MIGRATIONS)
        .map(|m| (m.version, m.component.to_owned()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_database_of_the_earlier_release_opens_with_one_table_of_migrations() {
    let (url, _db) = test_database().await;
    let pool = PgPoolOptions::new()
        .max_connections(2)
        .connect(&url)
        .await
        .unwrap();
    earlier_release_database(&pool, &[1, 2]).await;

    // Replicas starting together: savers, stores and the server's tables, all at once.
    let mut racers = Vec::new();
    for i in 0..6 {
        let url = url.clone();
        racers.push(tokio::spawn(async move {
            match i % 3 {
                0 => PostgresSaver::connect(&url)
                    .await
                    .unwrap()
                    .migrate()
                    .await
                    .unwrap(),
                1 => PostgresStore::connect(&url)
                    .await
                    .unwrap()
                    .migrate()
                    .await
                    .unwrap(),
                _ => drop(PgDb::connect(&url).await.unwrap()),
            }
        }));
    }
    for r in racers {
        r.await.unwrap();
    }
    assert_eq!(applied(&pool).await, all_known());
    // Kept for replicas of the earlier release restarting during a rolling upgrade.
    assert_eq!(legacy_versions(&pool).await, [1, 2]);
    let descriptions: Vec<String> =
        sqlx::query_scalar("SELECT description FROM graphloom_migrations ORDER BY version")
            .fetch_all(&pool)
            .await
            .unwrap();
    let want: Vec<&str> = MIGRATIONS
        .iter()
        .chain(SERVER_MIGRATIONS)
        .map(|m| m.description)
        .collect();
    assert_eq!(descriptions, want);

    // What was stored before reads as before.
    let db = PgDb::connect(&url).await.unwrap();
    let t = db.get_thread("alice", "t-old").await.unwrap().unwrap();
    assert_eq!(t.metadata.get("from"), Some(&json!("before")));
    assert_eq!(t.values, json!({"n": 1}));
    assert_eq!(t.status, ThreadStatus::Idle);
    let claimed = db
        .claim_run("w", Duration::from_secs(30))
        .await
        .unwrap()
        .expect("the earlier release's pending run is claimable");
    assert_eq!(claimed.run.run_id, "r-old");
    assert_eq!(claimed.run.kwargs, json!({"input": {"n": 2}}));
    // Numbered among its thread's runs; the thread's next run comes after it.
    assert_eq!(claimed.run.ordinal, 0);
    let next: i64 = sqlx::query_scalar("SELECT next_ordinal FROM server_threads WHERE thread_id = 't-old'")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(next, 1);
    let store = PostgresStore::connect(&url).await.unwrap();
    store
        .put(&namespace(["n"]), "k", json!({"v": 1}), PutOptions::new())
        .await
        .unwrap();
    // Migrating an up-to-date database changes nothing.
    graphloom_postgres::migrate(&pool).await.unwrap();
    drop(PgDb::connect(&url).await.unwrap());
    assert_eq!(applied(&pool).await, all_known());
}

#[tokio::test]
async fn an_earlier_server_without_stored_run_events_gets_them() {
    let (url, _db) = test_database().await;
    let pool = PgPoolOptions::new()
        .max_connections(2)
        .connect(&url)
        .await
        .unwrap();
    earlier_release_database(&pool, &[1]).await;
    let exists: bool = sqlx::query_scalar("SELECT to_regclass('server_run_events') IS NOT NULL")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert!(!exists);
    let db = PgDb::connect(&url).await.unwrap();
    assert_eq!(applied(&pool).await, all_known());
    // The earlier release's replicas see the migration of their version 2 applied.
    assert_eq!(legacy_versions(&pool).await, [1, 2]);
    let record = RunEventRecord {
        id: 0,
        event: "values".into(),
        data: json!({"n": 1}).into(),
    };
    db.append_run_events("r-old", vec![record.clone()]).await.unwrap();
    assert_eq!(db.run_events("r-old", 0, 10).await.unwrap(), [record]);
}
