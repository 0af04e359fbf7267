//! The chat route over real HTTP: data stream lines with the protocol header, and a client
//! that hangs up after the first chunk while the run and its billing carry on.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use chat_runtime::{decode_line, knowledge_search, router};
use common::harness;
use graphloom_core::RunConfig;
use graphloom_llm::{Reply, ScriptedModel, Usage};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

async fn serve(app: axum::Router) -> (String, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}/api/v1/ai/chat"), task)
}

fn body(thread: &str, text: &str) -> serde_json::Value {
    json!({"id": thread, "messages": [
        {"role": "user", "content": "earlier question"},
        {"role": "assistant", "content": "earlier answer"},
        {"role": "user", "content": text}
    ]})
}

fn loop_model(delay: Duration) -> ScriptedModel {
    ScriptedModel::new([
        Reply::tool_call("knowledge_search", json!({"query": "a"}))
            .with_usage(Usage::new(10, 1))
            .after(delay),
        Reply::tool_call("knowledge_search", json!({"query": "b"}))
            .with_usage(Usage::new(20, 2))
            .after(delay),
        Reply::tool_call("knowledge_search", json!({"query": "c"}))
            .with_usage(Usage::new(30, 3))
            .after(delay),
        Reply::text("All three searched.")
            .with_usage(Usage::new(40, 4))
            .after(delay),
    ])
}

#[tokio::test]
async fn the_route_streams_data_stream_lines_with_the_protocol_header() {
    let model = loop_model(Duration::ZERO);
    let h = harness(Arc::new(model.clone()), vec![knowledge_search()]);
    let (url, server) = serve(router(h.runtime.clone())).await;
    let resp = reqwest::Client::new()
        .post(&url)
        .header("x-request-id", "req-http")
        .json(&body("t-http", "search three times"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["x-vercel-ai-data-stream"], "v1");
    let run_id = resp.headers()["x-graph-run-id"].to_str().unwrap().to_owned();
    let text = resp.text().await.unwrap();
    server.abort();

    let lines: Vec<(char, serde_json::Value)> = text.lines().map(|l| decode_line(l).unwrap()).collect();
    let codes: String = lines.iter().map(|(c, _)| *c).collect();
    assert!(codes.starts_with("e9ae9ae9a0"), "{codes}");
    assert!(codes.ends_with("ed"), "{codes}");
    assert_eq!(codes.matches('d').count(), 1);
    assert_eq!(
        lines.last().unwrap().1,
        json!({"finishReason": "stop", "usage": {"promptTokens": 100, "completionTokens": 10}})
    );
    // Only the newest user message is new input: the thread keeps the history.
    assert_eq!(
        model.requests()[0].messages.last().unwrap().text(),
        "search three times"
    );
    let receipts = h.billing.receipts();
    assert_eq!(receipts.len(), 4);
    assert!(receipts
        .iter()
        .all(|r| r.correlation.request_id == "req-http" && r.correlation.graph_run_id == run_id));

    let bad = reqwest::Client::new()
        .post(&url)
        .json(&json!({"id": "t", "messages": [{"role": "assistant", "content": "hi"}]}))
        .send()
        .await;
    assert!(bad.is_err() || bad.unwrap().status() != 200);
}

#[tokio::test]
async fn a_client_hanging_up_after_the_first_chunk_does_not_stop_the_run_or_billing() {
    let model = loop_model(Duration::from_millis(60));
    let h = harness(Arc::new(model.clone()), vec![knowledge_search()]);
    let (url, server) = serve(router(h.runtime.clone())).await;
    let mut resp = reqwest::Client::new()
        .post(&url)
        .json(&body("t-hangup", "search three times"))
        .send()
        .await
        .unwrap();
    let first = resp.chunk().await.unwrap().unwrap();
    assert!(String::from_utf8_lossy(&first).starts_with("e:"));
    assert!(h.billing.receipts().len() < 4);
    drop(resp); // the client hangs up

    let mut billed = 0;
    for _ in 0..300 {
        billed = h.billing.receipts().len();
        if billed == 4 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    server.abort();
    assert_eq!(billed, 4);
    assert_eq!(model.calls(), 4);
    let tokens: u64 = h
        .billing
        .receipts()
        .iter()
        .map(|r| r.fact.usage.total_tokens)
        .sum();
    assert_eq!(tokens, 110);
    // The run finished and checkpointed its answer.
    let state = h.graph.get_state(&RunConfig::thread("t-hangup")).await.unwrap();
    assert_eq!(
        state.values.messages.last().unwrap().text(),
        "All three searched."
    );
}
