//! [`wait_outcome`](super::wait_outcome) on a run whose log here is gone.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::{wait_outcome, POLL};
use crate::models::RunStatus;
use crate::{factory, GraphDeps, Server, ServerConfig};
use axum::body::Body;
use axum::http::Request;
use graphloom_core::{CompiledGraph, Message, StateGraph, END, START};
use graphloom_prebuilt::{AgentState, AgentStateUpdate};
use serde_json::{json, Value};
use std::sync::Arc;
use tower::ServiceExt;

fn echo(deps: &GraphDeps) -> graphloom_core::Result<CompiledGraph<AgentState>> {
    StateGraph::<AgentState>::new()
        .add_node("reply", |_s: Arc<AgentState>, _rt| async move {
            Ok(AgentStateUpdate::new().messages(vec![Message::ai("echo")]))
        })
        .add_edge(START, "reply")
        .add_edge("reply", END)
        .checkpointer_dyn(Arc::clone(&deps.checkpointer))
        .compile()
}

async fn post(server: &Server, path: &str, body: Value) -> Value {
    let req = Request::post(path)
        .header("content-type", "application/json")
        .body(Body::from(body.to_string()))
        .unwrap();
    let res = server.router().oneshot(req).await.unwrap();
    assert!(res.status().is_success(), "{path}: {}", res.status());
    let bytes = axum::body::to_bytes(res.into_body(), 1 << 20).await.unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

/// A follower that listed a run before its end (a thread stream opened just after a fast
/// run was queued) and finds no log of it here (it ended and nobody held it) gets its
/// outcome from the database at once, not after a poll's pause. The clock is tokio's,
/// paused: a pause would move it by [`POLL`].
#[tokio::test]
async fn a_run_without_a_log_here_is_asked_of_the_database_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = ServerConfig::sqlite(dir.path().join("graphloom.db"));
    let server = Server::builder(cfg)
        .graph("echo", factory(echo))
        .build()
        .await
        .unwrap();
    let workers = server.start_workers();
    let thread = post(&server, "/threads", json!({})).await;
    let thread_id = thread["thread_id"].as_str().unwrap().to_owned();
    let input = json!({"assistant_id": "echo", "input": {"messages": [{"type": "human", "content": "hi"}]}});
    let out = post(&server, &format!("/threads/{thread_id}/runs/wait"), input).await;
    assert_eq!(out["messages"][1]["content"], "echo", "{out}");
    server.shutdown();
    for w in workers {
        w.await.unwrap();
    }
    let state = Arc::clone(&server.state);
    let runs = state.db.list_runs("", &thread_id, None, 10, 0).await.unwrap();
    let [run] = runs.as_slice() else {
        panic!("{runs:?}")
    };
    assert_eq!(run.status, RunStatus::Success);
    assert!(!state.broker.knows(&run.run_id), "the run's log is still here");
    // The run as a listing made before its end has it.
    let mut listed = run.clone();
    listed.status = RunStatus::Running;
    tokio::time::pause();
    let started = tokio::time::Instant::now();
    let body = wait_outcome(&state, "", &listed).await;
    let waited = started.elapsed();
    assert_eq!(body["messages"][1]["content"], "echo", "{body}");
    assert!(waited < POLL, "waited {waited:?} for a run that had ended");
}
