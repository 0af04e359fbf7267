//! `Db::finish_run_at_checkpoint` on SQLite: a completed run's outcome written in the same
//! transaction as a check that its last checkpoint is saved, so the worker can queue it
//! with that checkpoint's put and both share one commit, the run's last events with them;
//! nothing written when the checkpoint is missing or the lease was lost.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use graphloom_core::checkpoint::{
    Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSource, Checkpointer,
};
use graphloom_server::broker::RunEventRecord;
use graphloom_server::db::{Db, NewRun, SqliteDb, ThreadOutcome};
use graphloom_server::models::{MultitaskStrategy, Run, RunStatus, Thread, ThreadStatus};
use graphloom_sqlite::{SqliteDatabase, SqliteOptions};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::time::Duration;

const OWNER: &str = "alice";
const WORKER: &str = "w1";

fn thread(id: &str) -> Thread {
    serde_json::from_value(json!({
        "thread_id": id, "created_at": "", "updated_at": "", "state_updated_at": "",
        "metadata": {}, "status": "idle", "config": {}, "values": {}, "interrupts": {},
    }))
    .unwrap()
}

/// A thread with a run claimed by [`WORKER`] (running, the thread busy).
async fn running(db: &SqliteDb, thread_id: &str) -> String {
    db.create_thread(OWNER, &thread(thread_id)).await.unwrap();
    let run_id = uuid::Uuid::now_v7().to_string();
    let new = NewRun {
        run: Run {
            run_id: run_id.clone(),
            thread_id: thread_id.into(),
            assistant_id: "a1".into(),
            created_at: String::new(),
            updated_at: String::new(),
            status: RunStatus::Pending,
            metadata: Map::new(),
            kwargs: json!({}),
            multitask_strategy: MultitaskStrategy::Reject,
            cancel_reason: None,
            ordinal: 0,
        },
        owner: OWNER.into(),
        delay: None,
        reject_if_busy: true,
        cancel_active: None,
        thread_metadata: None,
        claim: Some((WORKER.to_owned(), Duration::from_secs(30))),
        create_thread: None,
    };
    let run = db.create_run(&new).await.unwrap();
    assert_eq!(run.status, RunStatus::Running);
    run_id
}

/// `n` events of a run's log, from the first.
fn events(n: u64) -> Vec<RunEventRecord> {
    (0..n)
        .map(|id| RunEventRecord {
            id,
            event: "values".into(),
            data: std::sync::Arc::new(json!({"step": id})),
        })
        .collect()
}

fn done(values: Value) -> ThreadOutcome {
    ThreadOutcome {
        status: ThreadStatus::Idle,
        values: Some(values),
        interrupts: json!({}),
        error: None,
    }
}

async fn put(saver: &graphloom_sqlite::SqliteSaver, thread_id: &str, cp: Checkpoint) {
    saver
        .put(
            &CheckpointConfig::thread(thread_id),
            cp,
            CheckpointMetadata {
                source: CheckpointSource::Loop,
                step: 1,
                parents: BTreeMap::new(),
                run_id: None,
                extra: Map::new(),
            },
            BTreeMap::new(),
        )
        .await
        .unwrap();
}

async fn open() -> (tempfile::TempDir, SqliteDatabase, SqliteDb) {
    let dir = tempfile::tempdir().unwrap();
    let shared = SqliteDatabase::open(SqliteOptions::new(dir.path().join("s.db")))
        .await
        .unwrap();
    let db = SqliteDb::new(shared.clone()).await.unwrap();
    (dir, shared, db)
}

/// Queued together with the checkpoint's put, the outcome shares its commit.
#[tokio::test]
async fn the_outcome_shares_the_checkpoints_commit() {
    let (_dir, shared, db) = open().await;
    let saver = shared.saver();
    let run_id = running(&db, "t1").await;

    // Keep the writer busy so that the put and the outcome queue up behind it together.
    let (started_tx, started_rx) = std::sync::mpsc::channel();
    let writer = shared.clone();
    let busy = tokio::spawn(async move {
        writer
            .write(move |_c| {
                started_tx.send(()).unwrap();
                std::thread::sleep(Duration::from_millis(200));
                Ok::<_, graphloom_core::Error>(())
            })
            .await
    });
    tokio::task::spawn_blocking(move || started_rx.recv().unwrap())
        .await
        .unwrap();
    let before = shared.commit_stats();
    let cp = Checkpoint::empty();
    let id = cp.id.clone();
    let outcome = done(json!({"answer": 42}));
    let last = events(2);
    let (_, recorded) = tokio::join!(
        put(&saver, "t1", cp),
        db.finish_run_at_checkpoint(&run_id, WORKER, "t1", &outcome, &id, &last)
    );
    busy.await.unwrap().unwrap();
    assert!(recorded.unwrap());
    let after = shared.commit_stats();
    // The busy operation's commit, then one for the checkpoint and the outcome.
    assert_eq!(after.commits - before.commits, 2, "{before:?} -> {after:?}");
    assert_eq!(after.operations - before.operations, 3);
    // The server's operations are re-runnable like the checkpointer's: their shared batch
    // ran without savepoints.
    assert_eq!(
        after.savepoint_batches, before.savepoint_batches,
        "{before:?} -> {after:?}"
    );

    let run = db.get_run(OWNER, None, &run_id).await.unwrap().unwrap();
    assert_eq!(run.status, RunStatus::Success);
    let t = db.get_thread(OWNER, "t1").await.unwrap().unwrap();
    assert_eq!(t.status, ThreadStatus::Idle);
    assert_eq!(t.values, json!({"answer": 42}));
    // The run's last events went with it.
    let stored = db.run_events(&run_id, 0, 10).await.unwrap();
    let names: Vec<&str> = stored.iter().map(|e| e.event.as_str()).collect();
    assert_eq!(names, ["values", "values"]);
}

/// A checkpoint that is not saved (its put failed, or went to another checkpointer) or a
/// lease held by another worker: nothing is written, the run is still running.
#[tokio::test]
async fn nothing_is_written_without_the_checkpoint_or_the_lease() {
    let (_dir, shared, db) = open().await;
    let saver = shared.saver();
    let run_id = running(&db, "t2").await;

    let missing = Checkpoint::empty().id;
    let recorded = db
        .finish_run_at_checkpoint(
            &run_id,
            WORKER,
            "t2",
            &done(json!({"x": 1})),
            &missing,
            &events(1),
        )
        .await
        .unwrap();
    assert!(!recorded);

    // Saved, but on another thread: still not this run's checkpoint.
    let elsewhere = Checkpoint::empty();
    let elsewhere_id = elsewhere.id.clone();
    put(&saver, "other", elsewhere).await;
    let recorded = db
        .finish_run_at_checkpoint(
            &run_id,
            WORKER,
            "t2",
            &done(json!({"x": 1})),
            &elsewhere_id,
            &events(1),
        )
        .await
        .unwrap();
    assert!(!recorded);

    let cp = Checkpoint::empty();
    let id = cp.id.clone();
    put(&saver, "t2", cp).await;
    let recorded = db
        .finish_run_at_checkpoint(&run_id, "w2", "t2", &done(json!({"x": 1})), &id, &events(1))
        .await
        .unwrap();
    assert!(!recorded, "another worker's lease");

    let run = db.get_run(OWNER, None, &run_id).await.unwrap().unwrap();
    assert_eq!(run.status, RunStatus::Running);
    let t = db.get_thread(OWNER, "t2").await.unwrap().unwrap();
    assert_eq!(t.status, ThreadStatus::Busy);
    assert_eq!(t.values, json!({}));
    assert!(
        db.run_events(&run_id, 0, 10).await.unwrap().is_empty(),
        "no event stored"
    );

    // With the checkpoint and the lease it is written.
    assert!(db
        .finish_run_at_checkpoint(&run_id, WORKER, "t2", &done(json!({"x": 1})), &id, &events(1))
        .await
        .unwrap());
    let run = db.get_run(OWNER, None, &run_id).await.unwrap().unwrap();
    assert_eq!(run.status, RunStatus::Success);
}
