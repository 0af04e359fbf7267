//! An interrupt's response schema over the server: it is in the thread's state
//! (`/threads/{id}/state` interrupts), a resume that does not match it fails the run with
//! the reason before the node runs again and leaves the interrupt pending, and a matching
//! resume completes the thread.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::{Chat, ChatUpdate, TestServer};
use graphloom_core::{Runtime, StateGraph, END, START};
use graphloom_server::{factory, GraphDeps};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

/// Bound on anything the test awaits.
const WAIT: Duration = Duration::from_secs(30);

fn schema() -> Value {
    json!({"type": "object", "properties": {"approved": {"type": "boolean"}}, "required": ["approved"]})
}

/// `gate`: asks whether to ship, with a schema for the answer; records the answer.
fn gate(deps: &GraphDeps) -> graphloom_core::Result<graphloom_core::CompiledGraph<Chat>> {
    StateGraph::<Chat>::new()
        .add_node("ask", |_s: Arc<Chat>, rt: Runtime| async move {
            let answer = rt.interrupt_with_schema("ship it?", schema())?;
            Ok(ChatUpdate::new()
                .decision(answer["approved"].to_string())
                .steps(1))
        })
        .add_edge(START, "ask")
        .add_edge("ask", END)
        .checkpointer_dyn(Arc::clone(&deps.checkpointer))
        .compile()
}

async fn wait(s: &TestServer, thread: &str, body: Value) -> Value {
    let (st, out) = tokio::time::timeout(WAIT, s.post(&format!("/threads/{thread}/runs/wait"), body))
        .await
        .expect("the run ends in time");
    assert_eq!(st, 200, "{out}");
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_schema_is_in_the_state_and_a_resume_that_does_not_match_is_refused() {
    let s = TestServer::sqlite_with(|_| {}, |b| b.graph("gate", factory(gate))).await;
    let t = s.thread().await;
    let out = wait(&s, &t, json!({"assistant_id": "gate", "input": {}})).await;
    assert_eq!(out["__interrupt__"][0]["response_schema"], schema(), "{out}");
    let (_, state) = s.get(&format!("/threads/{t}/state")).await;
    let asked = &state["interrupts"][0];
    assert_eq!(asked["value"], "ship it?", "{state}");
    assert_eq!(asked["response_schema"], schema(), "{state}");

    let out = wait(
        &s,
        &t,
        json!({"assistant_id": "gate", "command": {"resume": {"approved": "maybe"}}}),
    )
    .await;
    let message = out["__error__"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("does not match its response schema"), "{out}");
    assert!(message.contains("/approved"), "{out}");
    // Nothing ran and nothing was saved: the interrupt is still pending.
    let (_, state) = s.get(&format!("/threads/{t}/state")).await;
    assert_eq!(state["interrupts"][0]["response_schema"], schema(), "{state}");
    assert_eq!(state["values"]["steps"], 0, "{state}");

    let out = wait(
        &s,
        &t,
        json!({"assistant_id": "gate", "command": {"resume": {"approved": true}}}),
    )
    .await;
    assert_eq!(out["decision"], "true", "{out}");
    s.stop().await;
}
