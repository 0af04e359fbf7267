//! The server's run queue under load: many workers, and on PostgreSQL two replicas, claim
//! every run exactly once, and no thread ever has two runs at once (a worker that just
//! claimed a run claims the next without looking first, as the server's do).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::db_fixtures;

use db_fixtures::*;
use graphloom_postgres::testing::test_database;
use graphloom_server::db::{Db, DbError, Lease, PgDb, SqliteDb};
use graphloom_server::models::RunStatus;
use serde_json::json;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const THREADS: usize = 20;
const RUNS_PER_THREAD: usize = 10;

/// 20 threads x 10 runs through `workers` concurrent workers spread over `dbs` (replicas
/// of one database): each run is claimed once and succeeds, a thread never has two runs
/// held at once (checked in memory and in the database), and each thread's runs go in order.
async fn stress(dbs: Vec<Arc<dyn Db>>, workers_per_db: usize) {
    let setup = &dbs[0];
    let mut order: HashMap<String, Vec<String>> = HashMap::new();
    for i in 0..THREADS {
        setup
            .create_thread(ALICE, &thread(&format!("st{i:02}"), json!({})))
            .await
            .unwrap();
    }
    // Thread by thread: the oldest runs are all of one thread, so workers race for it.
    for i in 0..THREADS {
        for _ in 0..RUNS_PER_THREAD {
            let t = format!("st{i:02}");
            let r = setup.create_run(&enqueue(&t)).await.unwrap();
            order.entry(t).or_default().push(r.run_id);
        }
    }
    let total = THREADS * RUNS_PER_THREAD;
    assert_eq!(setup.queue_depth().await.unwrap(), total as i64);

    let done = Arc::new(AtomicUsize::new(0));
    let holding: Arc<Mutex<HashMap<String, String>>> = Arc::default();
    let claims: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
    let finished: Arc<Mutex<HashMap<String, Vec<String>>>> = Arc::default();
    let mut tasks = Vec::new();
    for (d, db) in dbs.iter().enumerate() {
        for w in 0..workers_per_db {
            let (db, done, holding, claims, finished) = (
                Arc::clone(db),
                Arc::clone(&done),
                Arc::clone(&holding),
                Arc::clone(&claims),
                Arc::clone(&finished),
            );
            let name = format!("replica{d}-worker{w}");
            tasks.push(tokio::spawn(async move {
                // As the server's workers: after a claim that found a run, the next claims
                // without a look first.
                let mut busy = false;
                while done.load(Ordering::SeqCst) < total {
                    let claimed = if busy {
                        db.claim_expected_run(&name, LONG).await.unwrap()
                    } else {
                        db.claim_run(&name, LONG).await.unwrap()
                    };
                    busy = claimed.is_some();
                    let Some(c) = claimed else {
                        tokio::time::sleep(Duration::from_millis(2)).await;
                        continue;
                    };
                    assert_eq!(c.attempt, 1);
                    let (run_id, thread_id) = (c.run.run_id.clone(), c.run.thread_id.clone());
                    if let Some(other) = holding.lock().unwrap().insert(thread_id.clone(), run_id.clone()) {
                        panic!("thread {thread_id}: {run_id} claimed while {other} is held");
                    }
                    *claims.lock().unwrap().entry(run_id.clone()).or_default() += 1;
                    let running = db
                        .list_runs(ALICE, &thread_id, Some(RunStatus::Running), 10, 0)
                        .await
                        .unwrap();
                    assert_eq!(
                        running.len(),
                        1,
                        "thread {thread_id} has {} running runs",
                        running.len()
                    );
                    tokio::time::sleep(Duration::from_millis(3)).await;
                    assert_eq!(db.heartbeat(&run_id, &name, LONG).await.unwrap(), Lease::Held);
                    finished
                        .lock()
                        .unwrap()
                        .entry(thread_id.clone())
                        .or_default()
                        .push(run_id.clone());
                    // Released in memory before the database lets the next run go.
                    assert_eq!(holding.lock().unwrap().remove(&thread_id), Some(run_id.clone()));
                    assert!(db.finish_run(&run_id, &name, RunStatus::Success).await.unwrap());
                    done.fetch_add(1, Ordering::SeqCst);
                }
            }));
        }
    }
    let all = async {
        for t in tasks {
            t.await.unwrap();
        }
    };
    tokio::time::timeout(Duration::from_secs(60), all)
        .await
        .expect("the workers finished the queue in time");

    let claims = claims.lock().unwrap().clone();
    assert_eq!(claims.len(), total);
    assert!(claims.values().all(|&n| n == 1), "a run was claimed twice");
    assert_eq!(
        *finished.lock().unwrap(),
        order,
        "each thread's runs ran in creation order"
    );
    for db in &dbs {
        assert_eq!(db.queue_depth().await.unwrap(), 0);
        assert_eq!(
            db.runs_by_status().await.unwrap(),
            vec![(RunStatus::Success, total as i64)]
        );
    }
    for i in 0..THREADS {
        let runs = setup
            .list_runs(ALICE, &format!("st{i:02}"), None, 0, 0)
            .await
            .unwrap();
        assert_eq!(runs.len(), RUNS_PER_THREAD);
        assert!(runs.iter().all(|r| r.status == RunStatus::Success));
    }
}

/// Ten `reject` runs created at once on one idle thread, spread over the replicas: exactly
/// one gets in.
async fn reject_race(dbs: &[Arc<dyn Db>]) {
    dbs[0]
        .create_thread(ALICE, &thread("race", json!({})))
        .await
        .unwrap();
    let tasks: Vec<_> = (0..10)
        .map(|i| {
            let db = Arc::clone(&dbs[i % dbs.len()]);
            tokio::spawn(async move {
                let mut new = enqueue("race");
                new.reject_if_busy = true;
                db.create_run(&new).await
            })
        })
        .collect();
    let (mut ok, mut busy) = (0, 0);
    for t in tasks {
        match t.await.unwrap() {
            Ok(_) => ok += 1,
            Err(DbError::Busy(_)) => busy += 1,
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!((ok, busy), (1, 9));
    assert_eq!(
        dbs[0].list_runs(ALICE, "race", None, 0, 0).await.unwrap().len(),
        1
    );
    assert!(dbs[0].delete_thread(ALICE, "race").await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_queue_under_eight_workers() {
    let dir = tempfile::tempdir().unwrap();
    let db = SqliteDb::open(dir.path().join("queue.db")).await.unwrap();
    let started = std::time::Instant::now();
    let dbs: Vec<Arc<dyn Db>> = vec![Arc::new(db)];
    reject_race(&dbs).await;
    stress(dbs, 8).await;
    eprintln!("sqlite: 200 runs in {:?}", started.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_queue_across_two_replicas() {
    let (url, _guard) = test_database().await;
    let (a, b) = tokio::join!(PgDb::connect(&url), PgDb::connect(&url));
    let started = std::time::Instant::now();
    let dbs: Vec<Arc<dyn Db>> = vec![Arc::new(a.unwrap()), Arc::new(b.unwrap())];
    reject_race(&dbs).await;
    stress(dbs, 8).await;
    eprintln!("postgres: 200 runs in {:?}", started.elapsed());
}
