//! A run's end with its last events (`Db::finish_run_with_outcome`), on SQLite and
//! PostgreSQL: the events not stored yet are written in the transaction that records the
//! end, so a reader never sees the run ended before all of its events are stored; with the
//! lease lost, neither is written.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::db_fixtures;

use db_fixtures::*;
use graphloom_postgres::testing::test_database;
use graphloom_server::broker::RunEventRecord;
use graphloom_server::db::{Db, NewRun, PgDb, SqliteDb, ThreadOutcome};
use graphloom_server::models::{RunStatus, ThreadStatus};
use serde_json::json;

fn event(id: u64, name: &str) -> RunEventRecord {
    RunEventRecord {
        id,
        event: name.into(),
        data: json!({"n": id}).into(),
    }
}

async fn the_last_events_go_with_the_end(db: &dyn Db) {
    db.create_thread(ALICE, &thread("t", json!({}))).await.unwrap();
    let claimed = NewRun {
        claim: Some(("w1".into(), LONG)),
        ..enqueue("t")
    };
    let run = db.create_run(&claimed).await.unwrap();
    let run_id = run.run_id.as_str();
    // An earlier batch, stored while the run went on.
    db.append_run_events(run_id, vec![event(0, "metadata")])
        .await
        .unwrap();
    let outcome = ThreadOutcome {
        status: ThreadStatus::Idle,
        values: Some(json!({"answer": 42})),
        interrupts: json!({}),
        error: None,
    };
    let last = || vec![event(1, "values"), event(2, "updates")];

    // Another worker holds no lease on it: nothing is written, not even the events.
    let taken = db
        .finish_run_with_outcome(run_id, "w2", RunStatus::Success, "t", &outcome, last())
        .await
        .unwrap();
    assert!(!taken);
    assert_eq!(
        db.run_events(run_id, 0, 10).await.unwrap(),
        vec![event(0, "metadata")]
    );
    let still = db.get_run(ALICE, Some("t"), run_id).await.unwrap().unwrap();
    assert_eq!(still.status, RunStatus::Running);

    let ended = db
        .finish_run_with_outcome(run_id, "w1", RunStatus::Success, "t", &outcome, last())
        .await
        .unwrap();
    assert!(ended);
    let stored = db.run_events(run_id, 0, 10).await.unwrap();
    assert_eq!(
        stored,
        vec![event(0, "metadata"), event(1, "values"), event(2, "updates")]
    );
    let done = db.get_run(ALICE, Some("t"), run_id).await.unwrap().unwrap();
    assert_eq!(done.status, RunStatus::Success);
    let t = db.get_thread(ALICE, "t").await.unwrap().unwrap();
    assert_eq!((t.status, t.values), (ThreadStatus::Idle, json!({"answer": 42})));
}

#[tokio::test]
async fn sqlite_the_last_events_go_with_the_end() {
    let dir = tempfile::tempdir().unwrap();
    let db = SqliteDb::open(&dir.path().join("server.db")).await.unwrap();
    the_last_events_go_with_the_end(&db).await;
}

#[tokio::test]
async fn postgres_the_last_events_go_with_the_end() {
    let (url, _guard) = test_database().await;
    let db = PgDb::connect(&url).await.unwrap();
    the_last_events_go_with_the_end(&db).await;
}

/// Stored events read from any position, at most `limit`, each once and in order: from
/// the middle of a batch, across batches, and with a batch stored again (a writer that
/// retried), overlapping an earlier one, or going further from the same first event.
async fn stored_events_read_from_any_position(db: &dyn Db) {
    let ids = |v: Vec<RunEventRecord>| v.into_iter().map(|e| e.id).collect::<Vec<_>>();
    let batch = |r: std::ops::Range<u64>| r.map(|i| event(i, "values")).collect::<Vec<_>>();
    db.append_run_events("r", batch(0..5)).await.unwrap();
    db.append_run_events("r", batch(5..8)).await.unwrap();
    db.append_run_events("r", batch(5..8)).await.unwrap();
    db.append_run_events("r", batch(7..10)).await.unwrap();
    assert_eq!(
        ids(db.run_events("r", 0, 100).await.unwrap()),
        (0..10).collect::<Vec<_>>()
    );
    assert_eq!(ids(db.run_events("r", 3, 4).await.unwrap()), [3, 4, 5, 6]);
    assert_eq!(ids(db.run_events("r", 7, 100).await.unwrap()), [7, 8, 9]);
    assert_eq!(ids(db.run_events("r", 10, 100).await.unwrap()), Vec::<u64>::new());
    assert_eq!(ids(db.run_events("r", 0, 0).await.unwrap()), Vec::<u64>::new());
    assert_eq!(db.run_events("r", 4, 1).await.unwrap(), [event(4, "values")]);
    assert!(db.run_events("other", 0, 100).await.unwrap().is_empty());
    // Stored again from the first event and further: nothing lost, nothing twice.
    db.append_run_events("r", batch(0..12)).await.unwrap();
    db.append_run_events("r", batch(0..2)).await.unwrap();
    assert_eq!(
        ids(db.run_events("r", 0, 100).await.unwrap()),
        (0..12).collect::<Vec<_>>()
    );
    db.delete_run_events("r").await.unwrap();
    assert!(db.run_events("r", 0, 100).await.unwrap().is_empty());
}

#[tokio::test]
async fn sqlite_stored_events_read_from_any_position() {
    let dir = tempfile::tempdir().unwrap();
    let db = SqliteDb::open(&dir.path().join("server.db")).await.unwrap();
    stored_events_read_from_any_position(&db).await;
}

#[tokio::test]
async fn postgres_stored_events_read_from_any_position() {
    let (url, _guard) = test_database().await;
    let db = PgDb::connect(&url).await.unwrap();
    stored_events_read_from_any_position(&db).await;
}
