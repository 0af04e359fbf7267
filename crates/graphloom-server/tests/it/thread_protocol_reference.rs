//! The thread protocol's frames against the reference server's: `tests/js/reference/`
//! holds the Python graph `langgraph dev` (langgraph-api 0.16.7) ran, the frames recorded
//! from it (`frames.json`, by `record.sh`), and `compare.mjs`, which drives the same
//! conversation against graphloom's `weather` graph (the same graph in Rust) and compares
//! the channels both send, per channel and namespace.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use crate::js;
use crate::weather;

use common::TestServer;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_frames_match_the_reference_recording() {
    let s = TestServer::sqlite_with(
        |_| {},
        |b| b.graph("weather", graphloom_server::factory(weather::graph)),
    )
    .await;
    let summary = js::node("reference/compare.mjs", &s.url, &[], Duration::from_secs(60)).await;
    let checks = summary["checks"].as_array().unwrap();
    for want in [
        "messages@(root)",
        "lifecycle@(root)",
        "lifecycle@review",
        "input@review",
        "values@(root)",
        "values@review",
    ] {
        assert!(checks.iter().any(|c| c == want), "{want} not compared: {summary}");
    }
    s.stop().await;
}
