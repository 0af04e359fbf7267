//! The official JS client (`@langchain/langgraph-sdk` 1.15, `client.threads.stream`) as
//! the judge of the thread-centric protocol: `tests/js/thread_client.mjs` streams the
//! `weather` graph's messages token by token, its values, tool calls and subgraph events,
//! answers its interrupt with `input.respond`, reattaches and replays, over SSE and over a
//! WebSocket, with two clients on one thread, and reconnects after dropping a stream.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use crate::js;
use crate::weather;

use common::TestServer;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_js_client_drives_the_thread_protocol() {
    let s = TestServer::sqlite_with(
        |_| {},
        |b| b.graph("weather", graphloom_server::factory(weather::graph)),
    )
    .await;
    let summary = js::node("thread_client.mjs", &s.url, &[], Duration::from_secs(120)).await;
    let checks: Vec<&str> = summary["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c.as_str())
        .collect();
    for want in [
        "sse:tokens arrive one by one",
        "sse:tool start and end",
        "sse:a subgraph starts in its namespace",
        "sse:the interrupt is the HITL request",
        "sse:the output has the approval",
        "sse:reattaching replays the whole history",
        "websocket:tokens arrive one by one",
        "websocket:the output has the approval",
        "websocket:reattaching replays the latest run",
        "two clients on one thread see the same events",
        "an SSE client that reconnects with since loses nothing",
        "ws: reconnecting with the last event id loses nothing",
        "state.fork starts a run",
    ] {
        assert!(checks.contains(&want), "{want} not checked: {checks:?}");
    }
    s.stop().await;
}
