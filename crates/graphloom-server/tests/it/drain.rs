//! A graceful shutdown drains: a run mid-step finishes that step, stops at the boundary
//! with its checkpoint saved and goes back to the queue as `pending` (not failed, not
//! finished) well before the grace period ends; the server restarted on the file continues
//! it, and no node runs twice.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common::TestServer;
use graphloom_core::*;
use graphloom_server::db::{Db, SqliteDb};
use graphloom_server::models::RunStatus;
use graphloom_server::{factory, GraphDeps, ServerBuilder, ServerConfig};
use serde_json::json;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

#[derive(State, Clone, Default, Debug)]
struct Steps {
    #[reducer(add)]
    steps: i64,
}

/// What the test sees of the graph: calls per node, and node `two`'s first call, which
/// says it started and waits to be released.
#[derive(Clone, Default)]
struct Probe {
    calls: Arc<Mutex<BTreeMap<String, usize>>>,
    started: Arc<Notify>,
    release: Arc<Notify>,
}

impl Probe {
    /// Count a call of `node`; how many there were.
    fn call(&self, node: &str) -> usize {
        let mut calls = self.calls.lock().unwrap();
        let n = calls.entry(node.to_owned()).or_insert(0);
        *n += 1;
        *n
    }
}

/// `one -> two -> three`, each counting a step.
fn gated(deps: &GraphDeps, probe: &Probe) -> graphloom_core::Result<CompiledGraph<Steps>> {
    let node = |name: &'static str| {
        let probe = probe.clone();
        move |_s: Arc<Steps>, _rt: Runtime| {
            let probe = probe.clone();
            async move {
                if probe.call(name) == 1 && name == "two" {
                    probe.started.notify_one();
                    probe.release.notified().await;
                }
                Ok(StepsUpdate::new().steps(1))
            }
        }
    };
    StateGraph::<Steps>::new()
        .add_node("one", node("one"))
        .add_node("two", node("two"))
        .add_node("three", node("three"))
        .add_sequence(["one", "two", "three"])
        .add_edge(START, "one")
        .add_edge("three", END)
        .checkpointer_dyn(Arc::clone(&deps.checkpointer))
        .compile()
}

fn with_gated(probe: &Probe) -> impl FnOnce(ServerBuilder) -> ServerBuilder {
    let probe = probe.clone();
    move |b| b.graph("gated", factory(move |deps| gated(deps, &probe)))
}

async fn status_on_file(path: &Path, thread: &str, run: &str) -> RunStatus {
    let db = SqliteDb::open(path).await.unwrap();
    db.get_run("", Some(thread), run).await.unwrap().unwrap().status
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_drains_a_run_mid_step_back_to_the_queue_and_a_restart_finishes_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("graphloom.db");
    let probe = Probe::default();
    let grace = Duration::from_secs(60);
    let mut cfg = ServerConfig::sqlite(&path);
    cfg.shutdown_grace = grace;
    let first = TestServer::start_with(cfg, with_gated(&probe)).await;
    let t = first.thread().await;
    let (st, run) = first
        .post(
            &format!("/threads/{t}/runs"),
            json!({"assistant_id": "gated", "input": {}}),
        )
        .await;
    assert_eq!(st, 200, "{run}");
    let run_id = run["run_id"].as_str().unwrap().to_owned();
    tokio::time::timeout(Duration::from_secs(10), probe.started.notified())
        .await
        .expect("node `two` started");
    // Drain asked while `two` runs; `two` then finishes its step.
    first.server.shutdown();
    probe.release.notify_one();
    let stopping = Instant::now();
    tokio::time::timeout(Duration::from_secs(30), first.stop())
        .await
        .expect("the server stops once its run has drained");
    assert!(stopping.elapsed() < grace);
    assert_eq!(status_on_file(&path, &t, &run_id).await, RunStatus::Pending);
    let calls = probe.calls.lock().unwrap().clone();
    assert_eq!(calls, BTreeMap::from([("one".into(), 1), ("two".into(), 1)]));

    let second = TestServer::start_with(ServerConfig::sqlite(&path), with_gated(&probe)).await;
    let run = second.wait_run(&t, &run_id).await;
    assert_eq!(run["status"], "success", "{run}");
    let (_, state) = second.get(&format!("/threads/{t}/state")).await;
    assert_eq!(state["values"]["steps"], 3, "{state}");
    let calls = probe.calls.lock().unwrap().clone();
    assert_eq!(
        calls,
        BTreeMap::from([("one".into(), 1), ("two".into(), 1), ("three".into(), 1)]),
        "each node ran once"
    );
    second.stop().await;
}
