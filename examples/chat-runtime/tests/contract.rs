//! The crate contract the CLI and server rely on: `graph`, `default_model`, `sample_input`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use chat_runtime::{default_model, graph, sample_input, GRAPH_ID};
use graphloom_core::checkpoint::InMemorySaver;
use graphloom_core::store::InMemoryStore;
use graphloom_core::{MessageKind, RunConfig, RunInput, StreamMode, StreamOptions};
use std::sync::Arc;

#[tokio::test]
async fn the_sample_input_runs_the_offline_happy_path_without_the_runtime() {
    if std::env::var("GRAPHLOOM_MODEL").is_ok() {
        // A configured real model is what default_model returns then; the offline script is
        // what this test checks.
        std::env::remove_var("GRAPHLOOM_MODEL");
    }
    let g = graph(
        Arc::new(InMemorySaver::new()),
        Arc::new(InMemoryStore::new()),
        default_model().unwrap(),
    )
    .unwrap();
    assert_eq!(g.name(), GRAPH_ID);
    let mut stream = g.stream(
        RunInput::Json(sample_input()),
        RunConfig::thread("cli"),
        StreamOptions::modes([StreamMode::Custom]),
    );
    let mut kinds = Vec::new();
    let mut end = None;
    use futures::StreamExt;
    while let Some(ev) = stream.next().await {
        match ev {
            graphloom_core::RunEvent::Part(p) => {
                kinds.push(p.data_json().unwrap()["type"].as_str().unwrap().to_owned())
            }
            graphloom_core::RunEvent::End(out) => end = Some(out.unwrap()),
        }
    }
    let out = end.unwrap();
    let msgs = out.values.messages.to_vec();
    assert_eq!(msgs.iter().filter(|m| m.kind == MessageKind::Tool).count(), 1);
    assert!(msgs.last().unwrap().text().contains("Reset password"));
    assert!(kinds.contains(&"text_delta".to_owned()) && kinds.contains(&"tool_call_result".to_owned()));
    assert!(
        !kinds.contains(&"done".to_owned()),
        "done belongs to the executor, not the graph"
    );
}
