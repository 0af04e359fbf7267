//! A node's timeout policy over the server: progress a node makes (stream writes,
//! heartbeats) keeps it within its idle limit, a silent node fails the run with a
//! `TimeoutError` naming the limit, and the run's own time limit stays the outer bound
//! however much progress a node reports.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::{Chat, ChatUpdate, TestServer};
use graphloom_core::{Runtime, StateGraph, TimeoutPolicy, END, START};
use graphloom_server::{factory, GraphDeps};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

/// Bound on anything the test awaits.
const WAIT: Duration = Duration::from_secs(30);
/// The node's idle limit; its ticks of work are far shorter.
const IDLE: Duration = Duration::from_millis(250);
const TICK: Duration = Duration::from_millis(20);

/// `ticker`: `work` works `sleep_ms` in ticks, showing life after each as `decision`
/// says: `write` (a custom stream event), `heartbeat`, or `silent` (nothing).
fn ticker(deps: &GraphDeps) -> graphloom_core::Result<graphloom_core::CompiledGraph<Chat>> {
    StateGraph::<Chat>::new()
        .add_node("work", |s: Arc<Chat>, rt: Runtime| async move {
            let ticks = s.sleep_ms / u64::try_from(TICK.as_millis()).unwrap();
            for i in 0..ticks {
                tokio::time::sleep(TICK).await;
                match s.decision.as_str() {
                    "write" => rt.write(json!({ "tick": i })),
                    "heartbeat" => rt.heartbeat(),
                    _ => {}
                }
            }
            Ok(ChatUpdate::new().steps(1))
        })
        .node_timeout("work", TimeoutPolicy::idle(IDLE))
        .add_edge(START, "work")
        .add_edge("work", END)
        .checkpointer_dyn(Arc::clone(&deps.checkpointer))
        .compile()
}

/// `runs/wait` for `ticker` on a new thread; the body.
async fn wait(s: &TestServer, input: Value) -> Value {
    let t = s.thread().await;
    let (st, body) = tokio::time::timeout(
        WAIT,
        s.post(
            &format!("/threads/{t}/runs/wait"),
            json!({"assistant_id": "ticker", "input": input}),
        ),
    )
    .await
    .expect("the run ends in time");
    assert_eq!(st, 200, "{body}");
    body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_keeps_a_node_alive_and_a_silent_one_fails_with_a_timeout_error() {
    let s = TestServer::sqlite_with(|_| {}, |b| b.graph("ticker", factory(ticker))).await;
    // 600 ms of work, more than twice the idle limit, in ticks that each show progress.
    for signal in ["write", "heartbeat"] {
        let out = wait(&s, json!({"sleep_ms": 600, "decision": signal})).await;
        assert_eq!(out["steps"], 1, "{signal}: {out}");
    }
    let out = wait(&s, json!({"sleep_ms": 600, "decision": "silent"})).await;
    assert_eq!(
        out["__error__"],
        json!({"error": "TimeoutError", "message": "node `work` made no progress for 250 ms"}),
        "{out}"
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_runs_time_limit_bounds_a_node_that_keeps_reporting_progress() {
    let s = TestServer::sqlite_with(
        |c| c.run_timeout = Some(Duration::from_millis(400)),
        |b| b.graph("ticker", factory(ticker)),
    )
    .await;
    let t = s.thread().await;
    let (st, run) = s
        .post(
            &format!("/threads/{t}/runs"),
            json!({"assistant_id": "ticker", "input": {"sleep_ms": 60_000, "decision": "heartbeat"}}),
        )
        .await;
    assert_eq!(st, 200, "{run}");
    let rid = run["run_id"].as_str().unwrap();
    let (st, _) = tokio::time::timeout(WAIT, s.get(&format!("/threads/{t}/runs/{rid}/join")))
        .await
        .expect("the run ends in time");
    assert_eq!(st, 200);
    let (_, row) = s.get(&format!("/threads/{t}/runs/{rid}")).await;
    assert_eq!(row["status"], "timeout", "{row}");
    s.stop().await;
}
