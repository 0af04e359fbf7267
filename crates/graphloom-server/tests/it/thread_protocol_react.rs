//! A React page on `@langchain/react`'s `useStream`, built with esbuild and loaded in
//! Debian's headless Chromium by Playwright (`tests/js/react_check.mjs`), against a server
//! on another origin: it sends a message, sees the answer stream in token by token, sees
//! the interrupt's human-in-the-loop request, approves it, and sees the run finish.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use crate::js;
use crate::weather;

use common::TestServer;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_use_stream_page_chats_and_approves_in_chromium() {
    // Tokens 40 ms apart, as a provider sends them: the page must show the answer growing.
    let paced = |deps: &graphloom_server::GraphDeps| weather::paced_graph(deps, Duration::from_millis(40));
    let s = TestServer::sqlite_with(|_| {}, |b| b.graph("weather", graphloom_server::factory(paced))).await;
    let chromium = std::env::var("GRAPHLOOM_CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".to_owned());
    assert!(
        std::path::Path::new(&chromium).exists(),
        "Chromium is needed at {chromium} (scripts/test.sh installs Debian's)"
    );
    let summary = js::node(
        "react_check.mjs",
        &s.url,
        &[("GRAPHLOOM_CHROMIUM", chromium)],
        Duration::from_secs(120),
    )
    .await;
    let checks = summary["checks"].as_array().unwrap();
    for want in [
        "the answer streams in",
        "the interrupt shows its HITL request",
        "approving finishes the run",
        "no error shows",
    ] {
        assert!(checks.iter().any(|c| c == want), "{want}: {summary}");
    }
    s.stop().await;
}
