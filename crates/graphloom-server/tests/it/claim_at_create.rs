//! Runs claimed in the transaction that creates them (`NewRun::claim`, what the server
//! does when a worker slot is free), on SQLite and PostgreSQL: claimed only when nothing
//! else is queued or running on the thread and the run is due, never twice, and the
//! thread's metadata merged in the same transaction.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use graphloom_postgres::testing::test_database;
use graphloom_server::db::{Db, DbError, Lease, NewRun, PgDb, SqliteDb};
use graphloom_server::models::{MultitaskStrategy, Run, RunStatus, Thread, ThreadStatus};
use serde_json::{json, Map, Value};
use std::sync::Arc;
use std::time::Duration;

const OWNER: &str = "alice";
const LEASE: Duration = Duration::from_secs(30);

fn obj(v: Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap()
}

fn thread(id: &str, metadata: Value) -> Thread {
    serde_json::from_value(json!({
        "thread_id": id, "created_at": "", "updated_at": "", "state_updated_at": "",
        "metadata": metadata, "status": "idle", "config": {}, "values": {}, "interrupts": {},
    }))
    .unwrap()
}

fn new_run(thread_id: &str, claim_by: Option<&str>) -> NewRun {
    NewRun {
        run: Run {
            run_id: uuid::Uuid::now_v7().to_string(),
            thread_id: thread_id.into(),
            assistant_id: "a1".into(),
            created_at: String::new(),
            updated_at: String::new(),
            status: RunStatus::Pending,
            metadata: Map::new(),
            kwargs: json!({"input": {"n": 1}}),
            multitask_strategy: MultitaskStrategy::Enqueue,
            cancel_reason: None,
            ordinal: 0,
        },
        owner: OWNER.into(),
        delay: None,
        reject_if_busy: false,
        cancel_active: None,
        thread_metadata: None,
        claim: claim_by.map(|w| (w.to_owned(), LEASE)),
        create_thread: None,
    }
}

async fn status_of(db: &dyn Db, run_id: &str) -> RunStatus {
    db.get_run(OWNER, None, run_id).await.unwrap().unwrap().status
}

async fn claims_at_creation(db: &dyn Db) {
    db.create_thread(OWNER, &thread("c1", json!({"team": "fraud"})))
        .await
        .unwrap();

    // An idle thread: claimed at once, the thread busy, its metadata merged.
    let mut first = new_run("c1", Some("w1"));
    first.thread_metadata = Some(obj(json!({"graph_id": "agent", "assistant_id": "a1"})));
    let run = db.create_run(&first).await.unwrap();
    assert_eq!(run.status, RunStatus::Running);
    let id1 = run.run_id.clone();
    assert_eq!(status_of(db, &id1).await, RunStatus::Running);
    let t = db.get_thread(OWNER, "c1").await.unwrap().unwrap();
    assert_eq!(t.status, ThreadStatus::Busy);
    assert_eq!(
        Value::Object(t.metadata),
        json!({"team": "fraud", "graph_id": "agent", "assistant_id": "a1"})
    );
    // Held by w1 (attempt 1): nobody else claims it, w1's heartbeat keeps it.
    assert!(db.claim_run("w2", LEASE).await.unwrap().is_none());
    assert_eq!(db.heartbeat(&id1, "w1", LEASE).await.unwrap(), Lease::Held);
    assert_eq!(db.heartbeat(&id1, "w2", LEASE).await.unwrap(), Lease::Lost);

    // The thread is busy: the next run is queued, not claimed.
    let second = db.create_run(&new_run("c1", Some("w1"))).await.unwrap();
    assert_eq!(second.status, RunStatus::Pending);
    assert_eq!(status_of(db, &second.run_id).await, RunStatus::Pending);
    // A rejected run changes nothing, metadata included.
    let mut rejected = new_run("c1", Some("w1"));
    rejected.reject_if_busy = true;
    rejected.thread_metadata = Some(obj(json!({"graph_id": "other"})));
    assert!(matches!(db.create_run(&rejected).await, Err(DbError::Busy(_))));
    let t = db.get_thread(OWNER, "c1").await.unwrap().unwrap();
    assert_eq!(t.metadata["graph_id"], "agent");

    // When the first ends, the queued one goes through the queue as before.
    assert!(db.finish_run(&id1, "w1", RunStatus::Success).await.unwrap());
    let claimed = db.claim_run("w2", LEASE).await.unwrap().unwrap();
    assert_eq!(
        (claimed.run.run_id.as_str(), claimed.attempt),
        (second.run_id.as_str(), 1)
    );
    assert!(db
        .finish_run(&second.run_id, "w2", RunStatus::Success)
        .await
        .unwrap());

    // A pending run on the thread (not yet claimed) also keeps a new one from jumping it.
    let queued = db.create_run(&new_run("c1", None)).await.unwrap();
    assert_eq!(queued.status, RunStatus::Pending);
    let behind = db.create_run(&new_run("c1", Some("w1"))).await.unwrap();
    assert_eq!(behind.status, RunStatus::Pending);
    let next = db.claim_run("w1", LEASE).await.unwrap().unwrap();
    assert_eq!(next.run.run_id, queued.run_id);
    db.finish_run(&queued.run_id, "w1", RunStatus::Success)
        .await
        .unwrap();
    let next = db.claim_run("w1", LEASE).await.unwrap().unwrap();
    assert_eq!(next.run.run_id, behind.run_id);
    db.finish_run(&behind.run_id, "w1", RunStatus::Success)
        .await
        .unwrap();

    // A delayed run is not due: queued.
    let mut later = new_run("c1", Some("w1"));
    later.delay = Some(Duration::from_secs(60));
    let later = db.create_run(&later).await.unwrap();
    assert_eq!(later.status, RunStatus::Pending);
    assert!(db.claim_run("w1", LEASE).await.unwrap().is_none());
    assert_eq!(status_of(db, &later.run_id).await, RunStatus::Pending);
    assert!(db.delete_thread(OWNER, "c1").await.unwrap());

    // A run claimed at creation whose worker died is taken over like any other: attempt 2.
    db.create_thread(OWNER, &thread("c2", json!({}))).await.unwrap();
    let mut short = new_run("c2", Some("dead"));
    short.claim = Some(("dead".into(), Duration::from_millis(1)));
    let short = db.create_run(&short).await.unwrap();
    assert_eq!(short.status, RunStatus::Running);
    tokio::time::sleep(Duration::from_millis(20)).await;
    let taken = db.claim_run("w2", LEASE).await.unwrap().unwrap();
    assert_eq!(
        (taken.run.run_id.as_str(), taken.attempt),
        (short.run_id.as_str(), 2)
    );
    assert_eq!(
        db.heartbeat(&short.run_id, "dead", LEASE).await.unwrap(),
        Lease::Lost
    );
    assert!(db.delete_thread(OWNER, "c2").await.unwrap());
}

/// Twenty creations with a claim on one idle thread at once, over every replica, while
/// workers also claim from the queue: exactly one run holds the thread at any time.
async fn claim_race(dbs: &[Arc<dyn Db>]) {
    dbs[0]
        .create_thread(OWNER, &thread("race", json!({})))
        .await
        .unwrap();
    let tasks: Vec<_> = (0..20)
        .map(|i| {
            let db = Arc::clone(&dbs[i % dbs.len()]);
            tokio::spawn(async move {
                let run = db
                    .create_run(&new_run("race", Some(&format!("w{i}"))))
                    .await
                    .unwrap();
                let other = db.claim_run(&format!("q{i}"), LEASE).await.unwrap();
                (run, other)
            })
        })
        .collect();
    let mut running = 0;
    for t in tasks {
        let (run, other) = t.await.unwrap();
        running += usize::from(run.status == RunStatus::Running);
        running += usize::from(other.is_some());
    }
    assert_eq!(running, 1, "one run holds the thread");
    let runs = dbs[0].list_runs(OWNER, "race", None, 100, 0).await.unwrap();
    assert_eq!(runs.len(), 20);
    assert_eq!(runs.iter().filter(|r| r.status == RunStatus::Running).count(), 1);
    assert!(dbs[0].delete_thread(OWNER, "race").await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_claims_at_creation() {
    let dir = tempfile::tempdir().unwrap();
    let db = SqliteDb::open(dir.path().join("claim.db")).await.unwrap();
    claims_at_creation(&db).await;
    claim_race(&[Arc::new(db)]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_claims_at_creation_across_two_replicas() {
    let (url, _guard) = test_database().await;
    let (a, b) = tokio::join!(PgDb::connect(&url), PgDb::connect(&url));
    let (a, b) = (a.unwrap(), b.unwrap());
    claims_at_creation(&a).await;
    claim_race(&[Arc::new(a), Arc::new(b)]).await;
}
