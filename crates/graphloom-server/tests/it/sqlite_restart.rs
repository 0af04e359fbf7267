//! A server on a SQLite file is the file's only executor: a second server on the same file
//! refuses to start, and a server starting on a file whose runs a dead process left running
//! takes them over at once instead of waiting out their leases.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::{human, TestServer};
use graphloom_server::db::{Db, NewRun, SqliteDb};
use graphloom_server::models::{MultitaskStrategy, Run, RunStatus};
use graphloom_server::{Server, ServerConfig};
use serde_json::json;
use std::time::{Duration, Instant};

#[tokio::test]
async fn a_second_server_on_the_same_sqlite_file_refuses_to_start() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("graphloom.db");
    let first = TestServer::start(ServerConfig::sqlite(&path)).await;
    let t = first.thread().await;
    let err = match Server::builder(ServerConfig::sqlite(&path)).build().await {
        Ok(_) => panic!("a second server started on the same file"),
        Err(e) => e.to_string(),
    };
    assert!(err.contains("in use by another graphloom server"), "{err}");
    assert!(err.contains("graphloom.db.lock"), "{err}");
    // The first one goes on serving.
    let (st, _) = first
        .post(
            &format!("/threads/{t}/runs/wait"),
            json!({"assistant_id": "echo", "input": human("still here")}),
        )
        .await;
    assert_eq!(st, 200);
    // Once it has stopped, the file is free.
    first.stop().await;
    let second = TestServer::start(ServerConfig::sqlite(&path)).await;
    assert_eq!(second.get(&format!("/threads/{t}")).await.0, 200);
    second.stop().await;
}

#[tokio::test]
async fn lease_and_heartbeat_must_agree() {
    let dir = tempfile::tempdir().unwrap();
    for (lease, heartbeat) in [(10, Some(10)), (10, Some(0)), (10, Some(30)), (0, None)] {
        let mut cfg = ServerConfig::sqlite(dir.path().join("graphloom.db"));
        cfg.lease = Duration::from_secs(lease);
        cfg.heartbeat = heartbeat.map(Duration::from_secs);
        let err = match Server::builder(cfg).build().await {
            Ok(_) => panic!("lease {lease} s with heartbeat {heartbeat:?} s was accepted"),
            Err(e) => e.to_string(),
        };
        assert!(err.contains("lease"), "{err}");
    }
    let mut cfg = ServerConfig::sqlite(dir.path().join("graphloom.db"));
    cfg.lease = Duration::from_secs(10);
    cfg.heartbeat = Some(Duration::from_secs(9));
    assert_eq!(cfg.heartbeat_interval(), Duration::from_secs(9));
    Server::builder(cfg).build().await.unwrap();
}

#[tokio::test]
async fn a_restarted_server_takes_over_its_dead_predecessors_runs_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("graphloom.db");
    // The state a process killed mid-run leaves: its run `running`, leased for an hour.
    let (thread_id, run_id) = {
        let first = TestServer::start(ServerConfig::sqlite(&path)).await;
        let t = first.thread().await;
        first.stop().await;
        let db = SqliteDb::open(&path).await.unwrap();
        let run = Run {
            run_id: uuid::Uuid::now_v7().to_string(),
            thread_id: t.clone(),
            assistant_id: graphloom_server::system_assistant_id("echo"),
            created_at: String::new(),
            updated_at: String::new(),
            status: RunStatus::Pending,
            metadata: serde_json::Map::new(),
            kwargs: json!({"input": human("orphan"), "graph_id": "echo", "owner": "", "stream_mode": ["values"]}),
            multitask_strategy: MultitaskStrategy::Enqueue,
            cancel_reason: None,
            ordinal: 0,
        };
        let new = NewRun {
            run,
            owner: String::new(),
            delay: None,
            reject_if_busy: false,
            cancel_active: None,
            thread_metadata: json!({"graph_id": "echo"}).as_object().cloned(),
            claim: Some(("dead-worker".into(), Duration::from_secs(3600))),
            create_thread: None,
        };
        let run = db.create_run(&new).await.unwrap();
        assert_eq!(run.status, RunStatus::Running);
        (t, run.run_id)
    };
    // The new server's own lease is as long: only taking over at start finishes the run
    // within the wait below.
    let mut cfg = ServerConfig::sqlite(&path);
    cfg.lease = Duration::from_secs(3600);
    let started = Instant::now();
    let s = TestServer::start(cfg).await;
    let joined = tokio::time::timeout(
        Duration::from_secs(30),
        s.get(&format!("/threads/{thread_id}/runs/{run_id}/join")),
    )
    .await
    .expect("the orphaned run was not taken over");
    println!("orphaned run finished {:?} after the restart", started.elapsed());
    assert_eq!(joined.0, 200, "{}", joined.1);
    let (_, run) = s.get(&format!("/threads/{thread_id}/runs/{run_id}")).await;
    assert_eq!(run["status"], "success", "{run}");
    assert_eq!(joined.1["messages"][1]["content"], "echo: orphan", "{}", joined.1);
    let (_, state) = s.get(&format!("/threads/{thread_id}/state")).await;
    assert_eq!(state["values"]["steps"], 1, "the run was applied once: {state}");
    s.stop().await;
}
