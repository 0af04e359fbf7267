//! The crate contract the CLI and server rely on: `graph`, `default_model`, `sample_input`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use graphloom_core::checkpoint::InMemorySaver;
use graphloom_core::store::InMemoryStore;
use graphloom_core::{RunConfig, RunInput};
use std::sync::Arc;
use support_chat::{default_model, graph, sample_input, GRAPH_ID};

#[tokio::test]
async fn the_sample_input_runs_the_offline_happy_path() {
    if std::env::var("GRAPHLOOM_MODEL").is_ok() {
        std::env::remove_var("GRAPHLOOM_MODEL");
    }
    let g = graph(
        Arc::new(InMemorySaver::new()),
        Arc::new(InMemoryStore::new()),
        default_model().unwrap(),
    )
    .unwrap();
    assert_eq!(g.name(), GRAPH_ID);
    for turn in 1..=2 {
        let out = g
            .invoke_input(RunInput::Json(sample_input()), RunConfig::thread("cli"))
            .await
            .unwrap();
        let s = out.values;
        assert_eq!(s.phase, "done");
        assert!(s.safety_check);
        assert_eq!(s.user_id, "u-123");
        assert_eq!(s.session_id, "s-1");
        assert_eq!(s.tool_outputs.len(), 1);
        assert!(s.messages.last().unwrap().text().contains("Reset password"));
        assert_eq!(s.summary.lines().count(), turn);
    }
}
