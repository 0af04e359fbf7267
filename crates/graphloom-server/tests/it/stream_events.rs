//! A run's events reach the `runs/stream` request that created it however fast the run
//! ends: a run that is not `stream_resumable` drops its events when it ends unread, so the
//! stream takes its reader before the run can start. A join after the end gets the final
//! values instead.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::{human, parse_sse, TestServer};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_stream_of_a_quick_run_has_its_events() {
    let s = TestServer::sqlite(|_| {}).await;
    let mut runs = Vec::new();
    for i in 0..40 {
        let t = s.thread().await;
        let body = s
            .http
            .post(s.u(&format!("/threads/{t}/runs/stream")))
            .json(
                &json!({"assistant_id": "echo", "input": human(&format!("m{i}")), "stream_mode": ["values"]}),
            )
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let events = parse_sse(&body);
        let names: Vec<&str> = events.iter().map(|e| e.0.as_str()).collect();
        // metadata, the input's values, the reply's values.
        assert_eq!(names, ["metadata", "values", "values"], "run {i}: {body}");
        assert_eq!(events[2].1["messages"][1]["content"], format!("echo: m{i}"));
        runs.push((t, events[0].1["run_id"].as_str().unwrap().to_owned()));
    }
    // Joined after its end: the final values, from the log's outcome or the database.
    let (t, run) = &runs[0];
    let body = s
        .http
        .get(s.u(&format!("/threads/{t}/runs/{run}/stream")))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let events = parse_sse(&body);
    assert_eq!(events.len(), 1, "{body}");
    assert_eq!(events[0].0, "values");
    assert_eq!(events[0].1["messages"][1]["content"], "echo: m0", "{body}");
    s.stop().await;
}

#[tokio::test]
async fn a_static_interrupt_is_an_empty_interrupt_in_the_updates_stream() {
    let s = TestServer::sqlite(|_| {}).await;
    let t = s.thread().await;
    let body = s
        .http
        .post(s.u(&format!("/threads/{t}/runs/stream")))
        .json(
            &json!({"assistant_id": "echo", "input": human("hi"), "stream_mode": ["updates"],
            "interrupt_before": ["reply"]}),
        )
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let events = parse_sse(&body);
    let updates: Vec<_> = events.iter().filter(|e| e.0 == "updates").map(|e| &e.1).collect();
    assert_eq!(updates, [&json!({"__interrupt__": []})], "{body}");
    assert_eq!(s.get(&format!("/threads/{t}")).await.1["status"], "interrupted");
    s.stop().await;
}
