//! `runs/wait` over a real socket: a run that ends quickly is answered with a plain JSON body
//! (with a length, in one piece); a run longer than the keep-alive interval gets its headers
//! first and spaces before the body. Runs started straight from the request (a free worker
//! slot) and runs queued behind a busy thread both end with the right values.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::{human, TestServer};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

#[tokio::test]
async fn a_quick_run_is_one_plain_body() {
    let s = TestServer::sqlite(|_| {}).await;
    let t = s.thread().await;
    // Server-made thread ids are time-ordered UUIDs (v7): new threads' rows and index
    // entries sit together at the end of each index.
    assert_eq!(uuid::Uuid::parse_str(&t).unwrap().get_version_num(), 7, "{t}");
    let res = s
        .http
        .post(s.u(&format!("/threads/{t}/runs/wait")))
        .json(&json!({"assistant_id": "echo", "input": human("hi")}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["content-type"], "application/json");
    let length: usize = res.headers()["content-length"].to_str().unwrap().parse().unwrap();
    let body = res.bytes().await.unwrap();
    assert_eq!(body.len(), length);
    assert_ne!(body[0], b' ', "no keep-alive space before a quick answer");
    let v: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(v["messages"].as_array().unwrap().len(), 2, "{v}");
    // The thread remembers the run's graph (merged when the run was created).
    let (_, thread) = s.get(&format!("/threads/{t}")).await;
    assert_eq!(thread["metadata"]["graph_id"], "echo");
    assert_eq!(thread["status"], "idle");
    s.stop().await;
}

#[tokio::test]
async fn a_long_run_gets_keep_alive_spaces_then_its_body() {
    let s = TestServer::sqlite(|_| {}).await;
    let t = s.thread().await;
    let started = Instant::now();
    let res = s
        .http
        .post(s.u(&format!("/threads/{t}/runs/wait")))
        .json(&json!({"assistant_id": "slow", "input": {"sleep_ms": 5600}}))
        .send()
        .await
        .unwrap();
    // Headers come when the first keep-alive is due, before the run ends.
    assert_eq!(res.status(), 200);
    assert!(
        started.elapsed() < Duration::from_millis(5500),
        "{:?}",
        started.elapsed()
    );
    assert!(res.headers().get("content-length").is_none());
    let body = String::from_utf8(res.bytes().await.unwrap().to_vec()).unwrap();
    assert!(body.starts_with(' '), "{body:?}");
    let v: Value = serde_json::from_str(body.trim_start()).unwrap();
    assert_eq!(v["steps"], 1, "{v}");
    s.stop().await;
}

#[tokio::test]
async fn runs_queued_behind_a_busy_thread_and_started_at_once_both_finish() {
    let s = TestServer::sqlite(|_| {}).await;
    let (busy, idle) = (s.thread().await, s.thread().await);
    let (st, slow) = s
        .post(
            &format!("/threads/{busy}/runs"),
            json!({"assistant_id": "slow", "input": {"sleep_ms": 400}}),
        )
        .await;
    assert_eq!(st, 200, "{slow}");
    // Queued behind the slow run (enqueue), while a run on another thread starts at once.
    let queued = {
        let (http, url) = (s.http.clone(), s.u(&format!("/threads/{busy}/runs/wait")));
        tokio::spawn(async move {
            http.post(url)
                .json(&json!({"assistant_id": "slow", "input": {"sleep_ms": 1}, "multitask_strategy": "enqueue"}))
                .send()
                .await
                .unwrap()
                .json::<Value>()
                .await
                .unwrap()
        })
    };
    let (st, quick) = s
        .post(
            &format!("/threads/{idle}/runs/wait"),
            json!({"assistant_id": "echo", "input": human("now")}),
        )
        .await;
    assert_eq!(st, 200, "{quick}");
    assert_eq!(quick["messages"].as_array().unwrap().len(), 2, "{quick}");
    let queued = queued.await.unwrap();
    assert_eq!(
        queued["steps"], 2,
        "both runs of the busy thread counted a step: {queued}"
    );
    let (_, runs) = s.get(&format!("/threads/{busy}/runs")).await;
    let runs = runs.as_array().unwrap();
    assert_eq!(runs.len(), 2);
    assert!(runs.iter().all(|r| r["status"] == "success"), "{runs:?}");
    s.stop().await;
}
