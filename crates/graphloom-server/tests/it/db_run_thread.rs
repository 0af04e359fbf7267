//! A run that creates its thread (`NewRun::create_thread`), on SQLite and PostgreSQL: the
//! thread is written in the run's transaction. A run's ordinal among its thread's runs, and
//! a long thread's runs listed page by page.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::db_fixtures;

use db_fixtures::*;
use graphloom_postgres::testing::test_database;
use graphloom_server::db::{Db, DbError, NewRun, PgDb, SqliteDb};
use graphloom_server::models::{CancelAction, RunStatus, ThreadStatus};
use serde_json::{json, Value};

/// `NewRun::create_thread`: the thread is made with the run, one of the same owner is
/// used as it is, another owner's is not taken and nothing is written.
async fn runs_that_create_their_thread(db: &dyn Db) {
    let with_thread = |id: &str, meta: Value| NewRun {
        create_thread: Some(thread(id, meta)),
        ..enqueue(id)
    };
    let r = db
        .create_run(&with_thread("made", json!({"graph_id": "g"})))
        .await
        .unwrap();
    assert_eq!(r.status, RunStatus::Pending);
    let t = db.get_thread(ALICE, "made").await.unwrap().unwrap();
    assert_eq!(t.metadata, obj(json!({"graph_id": "g"})));
    assert_eq!(db.get_thread(BOB, "made").await.unwrap(), None);
    // Made meanwhile by the same owner: the run goes on it, the thread stays as it was.
    let r2 = db
        .create_run(&with_thread("made", json!({"other": 1})))
        .await
        .unwrap();
    assert_eq!(
        db.get_run(ALICE, Some("made"), &r2.run_id)
            .await
            .unwrap()
            .map(|r| r.run_id),
        Some(r2.run_id)
    );
    assert_eq!(
        db.get_thread(ALICE, "made").await.unwrap().unwrap().metadata,
        t.metadata
    );
    // Another owner's thread of that id.
    db.create_thread(BOB, &thread("bobs", json!({}))).await.unwrap();
    let theirs = with_thread("bobs", json!({}));
    assert!(matches!(db.create_run(&theirs).await, Err(DbError::Conflict(_))));
    assert_eq!(db.get_run(ALICE, None, &theirs.run.run_id).await.unwrap(), None);
    assert_eq!(db.get_run(BOB, None, &theirs.run.run_id).await.unwrap(), None);
    assert_eq!(db.list_runs(BOB, "bobs", None, 10, 0).await.unwrap(), vec![]);
    // Claimed at creation on a thread made with it: the thread is busy.
    let claimed = NewRun {
        claim: Some(("w9".into(), LONG)),
        ..with_thread("made-busy", json!({}))
    };
    assert_eq!(db.create_run(&claimed).await.unwrap().status, RunStatus::Running);
    assert_eq!(
        db.get_thread(ALICE, "made-busy").await.unwrap().unwrap().status,
        ThreadStatus::Busy
    );
}

#[tokio::test]
async fn sqlite_runs_create_their_thread() {
    let dir = tempfile::tempdir().unwrap();
    let db = SqliteDb::open(&dir.path().join("server.db")).await.unwrap();
    runs_that_create_their_thread(&db).await;
}

#[tokio::test]
async fn postgres_runs_create_their_thread() {
    let (url, _guard) = test_database().await;
    let db = PgDb::connect(&url).await.unwrap();
    runs_that_create_their_thread(&db).await;
}

/// Each run of a thread gets the next ordinal, in the order the thread lists its runs,
/// and keeps it; a deleted run's, the latest's too, is not given again (a rollback
/// deletes the pending runs it replaces in the creating transaction).
async fn runs_keep_their_ordinals(db: &dyn Db) {
    db.create_thread(ALICE, &thread("o", json!({}))).await.unwrap();
    db.create_thread(ALICE, &thread("other", json!({})))
        .await
        .unwrap();
    let first = db.create_run(&enqueue("o")).await.unwrap();
    let second = db.create_run(&enqueue("o")).await.unwrap();
    let elsewhere = db.create_run(&enqueue("other")).await.unwrap();
    assert_eq!((first.ordinal, second.ordinal, elsewhere.ordinal), (0, 1, 0));
    // Both pending: the rollback deletes them as it creates the third.
    let rollback = NewRun {
        cancel_active: Some(CancelAction::Rollback),
        ..enqueue("o")
    };
    let third = db.create_run(&rollback).await.unwrap();
    assert_eq!(third.ordinal, 2);
    assert!(db.delete_run(ALICE, "o", &third.run_id).await.unwrap());
    let fourth = db.create_run(&enqueue("o")).await.unwrap();
    assert_eq!(fourth.ordinal, 3);
    let fifth = db.create_run(&enqueue("o")).await.unwrap();
    let listed: Vec<(String, i64)> = db
        .list_runs(ALICE, "o", None, 10, 0)
        .await
        .unwrap()
        .into_iter()
        .map(|r| (r.run_id, r.ordinal))
        .collect();
    assert_eq!(listed, [(fifth.run_id.clone(), 4), (fourth.run_id.clone(), 3)]);
    let got = db
        .get_run(ALICE, Some("o"), &fifth.run_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got.ordinal, 4);
    // Not part of the API's run.
    assert!(serde_json::to_value(&got).unwrap().get("ordinal").is_none());
}

#[tokio::test]
async fn sqlite_runs_keep_their_ordinals() {
    let dir = tempfile::tempdir().unwrap();
    let db = SqliteDb::open(&dir.path().join("server.db")).await.unwrap();
    runs_keep_their_ordinals(&db).await;
}

#[tokio::test]
async fn postgres_runs_keep_their_ordinals() {
    let (url, _guard) = test_database().await;
    let db = PgDb::connect(&url).await.unwrap();
    runs_keep_their_ordinals(&db).await;
}

/// A thread of many runs lists them newest first, page by page: the newest few (read
/// along the thread's index on SQLite's calling thread) and the pages further down (read
/// on the blocking pool) make one listing, each run once; another owner lists none.
async fn a_long_threads_pages_make_its_listing(db: &dyn Db) {
    db.create_thread(ALICE, &thread("long", json!({}))).await.unwrap();
    db.create_thread(ALICE, &thread("short", json!({})))
        .await
        .unwrap();
    let mut made = Vec::new();
    for i in 0..150 {
        made.push(db.create_run(&enqueue("long")).await.unwrap().run_id);
        if i % 50 == 0 {
            db.create_run(&enqueue("short")).await.unwrap();
        }
    }
    made.reverse();
    let ids = |runs: Vec<graphloom_server::models::Run>| -> Vec<String> {
        runs.into_iter().map(|r| r.run_id).collect()
    };
    let all = ids(db.list_runs(ALICE, "long", None, 1000, 0).await.unwrap());
    assert_eq!(all, made);
    assert_eq!(
        ids(db.list_runs(ALICE, "long", None, 1, 0).await.unwrap()),
        made[..1]
    );
    assert_eq!(
        ids(db.list_runs(ALICE, "long", None, 4, 60).await.unwrap()),
        made[60..64]
    );
    let mut paged = Vec::new();
    for offset in (0..150).step_by(8) {
        paged.extend(ids(db.list_runs(ALICE, "long", None, 8, offset).await.unwrap()));
    }
    assert_eq!(paged, made);
    assert_eq!(
        ids(db.list_runs(ALICE, "long", None, 0, 140).await.unwrap()),
        made[140..]
    );
    let pending = db
        .list_runs(ALICE, "long", Some(RunStatus::Pending), 4, 0)
        .await
        .unwrap();
    assert_eq!(ids(pending), made[..4]);
    assert_eq!(db.list_runs(BOB, "long", None, 4, 0).await.unwrap(), vec![]);
    assert_eq!(db.list_runs(ALICE, "short", None, 10, 0).await.unwrap().len(), 3);
}

#[tokio::test]
async fn sqlite_a_long_threads_pages_make_its_listing() {
    let dir = tempfile::tempdir().unwrap();
    let db = SqliteDb::open(&dir.path().join("server.db")).await.unwrap();
    a_long_threads_pages_make_its_listing(&db).await;
}

#[tokio::test]
async fn postgres_a_long_threads_pages_make_its_listing() {
    let (url, _guard) = test_database().await;
    let db = PgDb::connect(&url).await.unwrap();
    a_long_threads_pages_make_its_listing(&db).await;
}

/// The ordinals of thread `thread_id`'s runs as it lists them (newest first).
async fn listed_ordinals(db: &dyn Db, thread_id: &str) -> Vec<i64> {
    db.list_runs(ALICE, thread_id, None, 1000, 0)
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.ordinal)
        .collect()
}

/// A thread's runs list (and are claimed) in creation order, and their ordinals number
/// their events: the two orders must agree, or a client reconnecting after a run's events
/// would skip the events of a run listed after it with a smaller ordinal. Runs created at
/// once from several tasks, and a run created after one whose creation time a replica
/// with its clock ahead wrote (`ahead` moves a run's creation time an hour on), list in
/// the order of their ordinals.
async fn runs_list_in_the_order_of_their_ordinals<F, Fut>(db: std::sync::Arc<dyn Db>, ahead: F)
where
    F: Fn(String) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    db.create_thread(ALICE, &thread("at-once", json!({})))
        .await
        .unwrap();
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let db = std::sync::Arc::clone(&db);
            tokio::spawn(async move {
                for _ in 0..25 {
                    db.create_run(&enqueue("at-once")).await.unwrap();
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    let ordinals = listed_ordinals(&*db, "at-once").await;
    let descending: Vec<i64> = (0..200).rev().collect();
    assert_eq!(ordinals, descending);

    db.create_thread(ALICE, &thread("skewed", json!({})))
        .await
        .unwrap();
    let first = db.create_run(&enqueue("skewed")).await.unwrap();
    ahead(first.run_id.clone()).await;
    let moved = db
        .get_run(ALICE, Some("skewed"), &first.run_id)
        .await
        .unwrap()
        .unwrap();
    assert!(moved.created_at > first.created_at, "{moved:?}");
    let second = db.create_run(&enqueue("skewed")).await.unwrap();
    assert!(second.created_at > moved.created_at, "{second:?} after {moved:?}");
    assert_eq!(listed_ordinals(&*db, "skewed").await, [1, 0]);
    let got = db
        .get_run(ALICE, Some("skewed"), &second.run_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got.created_at, second.created_at);
}

/// An hour in microseconds (how far the skewed run's creation time moves).
const HOUR_US: i64 = 3_600_000_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_runs_list_in_the_order_of_their_ordinals() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("server.db");
    let db = SqliteDb::open(&path).await.unwrap();
    runs_list_in_the_order_of_their_ordinals(std::sync::Arc::new(db), |run_id| {
        let path = path.clone();
        async move {
            let c = rusqlite::Connection::open(&path).unwrap();
            c.busy_timeout(std::time::Duration::from_secs(10)).unwrap();
            let n = c
                .execute(
                    "UPDATE server_runs SET created_at = created_at + ?1 WHERE run_id = ?2",
                    rusqlite::params![HOUR_US, run_id],
                )
                .unwrap();
            assert_eq!(n, 1);
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_runs_list_in_the_order_of_their_ordinals() {
    let (url, _guard) = test_database().await;
    let db = PgDb::connect(&url).await.unwrap();
    let pool = db.pool().clone();
    runs_list_in_the_order_of_their_ordinals(std::sync::Arc::new(db), |run_id| {
        let pool = pool.clone();
        async move {
            let n = sqlx::query("UPDATE server_runs SET created_at = created_at + $1 WHERE run_id = $2")
                .bind(HOUR_US)
                .bind(run_id)
                .execute(&pool)
                .await
                .unwrap()
                .rows_affected();
            assert_eq!(n, 1);
        }
    })
    .await;
}
