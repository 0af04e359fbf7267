//! A thread's stream replays a long history: a stream without `since` lists a thread's
//! runs in one short listing when the thread has a few, and again in pages when it has
//! more (the short listing is full); either way every run comes, once and in order.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use crate::weather;

use common::{human, read_until, root_terminal, thread_events, TestServer};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};

/// A thread of `runs` runs (the weather graph's runs stop at its review's interrupt); a
/// stream without `since` replays each run's end, in order.
async fn replayed(runs: usize) {
    let s = TestServer::sqlite_with(
        |_| {},
        |b| b.graph("weather", graphloom_server::factory(weather::graph)),
    )
    .await;
    // The client's thread id; the first `run.start` makes the thread.
    let t = uuid::Uuid::new_v4().to_string();
    let mut made = Vec::new();
    for i in 0..runs {
        let start = json!({"id": i, "method": "run.start", "params": {
            "assistant_id": "weather", "input": human(&format!("weather in {i}?"))}});
        let (st, ok) = s.post(&format!("/threads/{t}/commands"), start).await;
        assert_eq!(st, 200, "{ok}");
        let run_id = ok["result"]["run_id"].as_str().unwrap().to_owned();
        let (st, _) = s.get(&format!("/threads/{t}/runs/{run_id}/join")).await;
        assert_eq!(st, 200);
        made.push(run_id);
    }
    let ends = AtomicUsize::new(0);
    let frames = read_until(
        thread_events(&s, &t, json!({"channels": ["lifecycle"]})).await,
        |e, v: &Value| root_terminal(e, v) && ends.fetch_add(1, Ordering::SeqCst) + 1 == runs,
    )
    .await;
    let ended: Vec<&str> = frames
        .iter()
        .filter(|(e, v, _)| root_terminal(e, v))
        // An event's id is its run's, then its place in the run.
        .filter_map(|(_, v, _)| v["event_id"].as_str()?.split(':').next())
        .collect();
    assert_eq!(ended, made, "{frames:#?}");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_threads_history_comes_whole() {
    replayed(3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_threads_history_comes_whole() {
    replayed(70).await;
}
