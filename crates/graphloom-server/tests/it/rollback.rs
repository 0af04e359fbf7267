//! Rolling back a run (multitask strategy `rollback`, cancel with `action=rollback`) over a
//! real socket: the run and every checkpoint it wrote are gone. A cancelled run's stream
//! ends without an error, as the reference server's does.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::{parse_sse, TestServer};
use serde_json::{json, Value};
use std::time::Duration;

/// The checkpoints of thread `t` whose metadata names run `id`, newest first.
async fn checkpoints_of_run(s: &TestServer, t: &str, id: &str) -> Value {
    s.post(
        &format!("/threads/{t}/history"),
        json!({"metadata": {"run_id": id}}),
    )
    .await
    .1
}

/// `steps` and `sleep_ms` of thread `t`'s current state.
async fn steps_and_sleep(s: &TestServer, t: &str) -> (Option<i64>, Option<i64>) {
    let state = s.get(&format!("/threads/{t}/state")).await.1;
    (
        state["values"]["steps"].as_i64(),
        state["values"]["sleep_ms"].as_i64(),
    )
}

/// Start a 30 s run of `slow` on thread `t`; return once it runs and has checkpointed.
async fn start_long_run(s: &TestServer, t: &str) -> String {
    let (_, long) = s
        .post(
            &format!("/threads/{t}/runs"),
            json!({"assistant_id": "slow", "input": {"sleep_ms": 30000}}),
        )
        .await;
    let id = long["run_id"].as_str().unwrap().to_owned();
    for _ in 0..500 {
        let running = s.get(&format!("/threads/{t}/runs/{id}")).await.1["status"] == "running";
        if running
            && checkpoints_of_run(s, t, &id)
                .await
                .as_array()
                .is_some_and(|h| !h.is_empty())
        {
            return id;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("run {id} never started");
}

#[tokio::test]
async fn rollback_deletes_the_run_and_its_checkpoints() {
    let s = TestServer::sqlite(|_| {}).await;
    let t = s.thread().await;
    let (st, _) = s
        .post(
            &format!("/threads/{t}/runs/wait"),
            json!({"assistant_id": "slow", "input": {"sleep_ms": 1}}),
        )
        .await;
    assert_eq!(st, 200);
    let history_before = s.post(&format!("/threads/{t}/history"), json!({})).await.1;
    assert_eq!(steps_and_sleep(&s, &t).await, (Some(1), Some(1)));

    // A long run, rolled back by a new run (multitask strategy `rollback`).
    let long_id = start_long_run(&s, &t).await;
    let (st, next) = s
        .post(
            &format!("/threads/{t}/runs"),
            json!({"assistant_id": "slow", "input": {"sleep_ms": 2}, "multitask_strategy": "rollback"}),
        )
        .await;
    assert_eq!(st, 200, "{next}");
    let next_id = next["run_id"].as_str().unwrap().to_owned();
    assert_eq!(s.wait_run(&t, &next_id).await["status"], "success");
    // The rolled-back run is gone, and so is every checkpoint it wrote; the new run went on
    // from the state before it.
    assert_eq!(s.get(&format!("/threads/{t}/runs/{long_id}")).await.0, 404);
    assert_eq!(checkpoints_of_run(&s, &t, &long_id).await, json!([]));
    assert_eq!(steps_and_sleep(&s, &t).await, (Some(2), Some(2)));
    let mine = checkpoints_of_run(&s, &t, &next_id).await;
    let first_of_next = mine
        .as_array()
        .and_then(|h| h.last())
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        first_of_next["parent_checkpoint"]["checkpoint_id"], history_before[0]["checkpoint"]["checkpoint_id"],
        "the new run starts from the checkpoint before the rolled-back one"
    );

    // Cancel with action=rollback: the thread is back at the state before the run, idle.
    let long_id = start_long_run(&s, &t).await;
    let r = s
        .http
        .post(s.u(&format!(
            "/threads/{t}/runs/{long_id}/cancel?wait=1&action=rollback"
        )))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.status());
    for _ in 0..500 {
        if s.get(&format!("/threads/{t}/runs/{long_id}")).await.0 == 404 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(s.get(&format!("/threads/{t}/runs/{long_id}")).await.0, 404);
    let thread = s.get(&format!("/threads/{t}")).await.1;
    assert_eq!(thread["status"], "idle");
    assert_eq!(thread["values"]["sleep_ms"], 2);
    assert_eq!(steps_and_sleep(&s, &t).await, (Some(2), Some(2)));
    assert_eq!(checkpoints_of_run(&s, &t, &long_id).await, json!([]));
    s.stop().await;
}

/// A run's stream, joined while it runs, ends without an `error` event when the run is
/// cancelled, with either action (the reference server, langgraph-api 0.16.7, sends
/// `metadata` and `values`, then ends the stream).
#[tokio::test]
async fn a_cancelled_runs_stream_ends_without_an_error() {
    let s = TestServer::sqlite(|_| {}).await;
    for action in ["interrupt", "rollback"] {
        let t = s.thread().await;
        let (_, run) = s
            .post(
                &format!("/threads/{t}/runs"),
                json!({"assistant_id": "slow", "input": {"sleep_ms": 30000}, "stream_resumable": true}),
            )
            .await;
        let id = run["run_id"].as_str().unwrap().to_owned();
        for _ in 0..500 {
            if s.get(&format!("/threads/{t}/runs/{id}")).await.1["status"] == "running" {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let joined = s
            .http
            .get(s.u(&format!("/threads/{t}/runs/{id}/stream")))
            .send()
            .await
            .unwrap();
        assert_eq!(joined.status(), 200);
        let (st, _) = s
            .post(
                &format!("/threads/{t}/runs/{id}/cancel?action={action}"),
                json!({}),
            )
            .await;
        assert_eq!(st, 202, "{action}");
        let body = tokio::time::timeout(Duration::from_secs(20), joined.text())
            .await
            .expect("the stream ends")
            .unwrap();
        let events: Vec<String> = parse_sse(&body).into_iter().map(|(e, _, _)| e).collect();
        // Replayed from its start (the run keeps its events), then nothing more.
        assert_eq!(
            events.first().map(String::as_str),
            Some("metadata"),
            "{action}: {body}"
        );
        assert!(!events.iter().any(|e| e == "error"), "{action}: {events:?}");
    }
    s.stop().await;
}
