//! `POST /execute` and the SSE stream of node events, over a real socket.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use graphloom_llm::{Reply, ScriptedModel, Usage};
use permit_filing::{sample_input, scripted_model, server};
use serde_json::{json, Value};

async fn serve(model: ScriptedModel) -> String {
    let s = setup(model);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, server::router(s.graph)).await });
    format!("http://{addr}")
}

/// The (event, data) pairs of an SSE body.
fn sse_events(body: &str) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for block in body.split("\n\n") {
        let mut event = String::new();
        let mut data = String::new();
        for line in block.lines() {
            if let Some(e) = line.strip_prefix("event:") {
                event = e.trim().to_owned();
            } else if let Some(d) = line.strip_prefix("data:") {
                data.push_str(d.trim_start());
            }
        }
        if !event.is_empty() {
            out.push((event, serde_json::from_str(&data).unwrap()));
        }
    }
    out
}

async fn post(url: &str, body: Value) -> (u16, String) {
    let resp = reqwest::Client::new().post(url).json(&body).send().await.unwrap();
    let code = resp.status().as_u16();
    (code, resp.text().await.unwrap())
}

#[tokio::test]
async fn execute_runs_to_the_pause_and_a_resume_finishes() {
    let base = serve(scripted_model()).await;
    let (code, body) = post(
        &format!("{base}/execute"),
        json!({"thread_id": "h1", "input": sample_input()}),
    )
    .await;
    assert_eq!(code, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["status"], "awaiting_hitl");
    assert_eq!(v["paused"], true);
    assert_eq!(v["interrupts"][0]["value"]["tool_call"]["name"], "create_entity");
    assert_eq!(v["state"]["pending_mutation"]["status"], "pending");

    let (code, body) = post(
        &format!("{base}/execute"),
        json!({"thread_id": "h1", "resume": "approved"}),
    )
    .await;
    assert_eq!(code, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["status"], "completed");
    assert_eq!(v["paused"], false);
    assert_eq!(v["state"]["injected_skill_ids"], json!(["rule37_spacing"]));
    assert_eq!(v["tokens_used"], 8_720);

    let (code, _) = post(&format!("{base}/execute"), json!({"thread_id": "h1"})).await;
    assert_eq!(code, 400, "neither input nor resume");
    let (code, _) = post(
        &format!("{base}/execute"),
        json!({"thread_id": "h1", "resume": "approved"}),
    )
    .await;
    assert_eq!(code, 400, "nothing left to resume");
}

#[tokio::test]
async fn execute_reports_a_typed_budget_status() {
    let base = serve(scripted_model()).await;
    let mut input = sample_input();
    input["max_tokens"] = json!(500);
    let (code, body) = post(
        &format!("{base}/execute"),
        json!({"thread_id": "b1", "input": input}),
    )
    .await;
    assert_eq!(code, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["status"], "budget_exceeded");
    assert_eq!(v["budget"], "total_tokens");
    assert_eq!(v["node"], "initial_llm_call");
    assert_eq!(v["resumable"], true);
}

#[tokio::test]
async fn the_stream_emits_node_end_events_then_one_done() {
    let base = serve(scripted_model()).await;
    let url = format!("{base}/conversations/conv-1/stream");
    let resp = reqwest::Client::new()
        .post(&url)
        .json(&json!({"input": sample_input()}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    assert!(resp.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/event-stream"));
    let events = sse_events(&resp.text().await.unwrap());
    let nodes: Vec<&str> = events
        .iter()
        .filter(|(e, _)| e == "node_end")
        .map(|(_, d)| d["node"].as_str().unwrap())
        .collect();
    assert_eq!(
        nodes,
        [
            "system_prompt_node",
            "memory_node",
            "resume_guard",
            "initial_llm_call",
            "tool_node",
            "initial_llm_call",
            "tool_node"
        ]
    );
    let first_llm = events
        .iter()
        .find(|(_, d)| d["node"] == "initial_llm_call")
        .unwrap();
    assert_eq!(first_llm.1["event"], "node_end");
    assert_eq!(first_llm.1["data"]["tokens_used"], 940);
    assert_eq!(first_llm.1["data"]["status"], "running");
    assert_eq!(
        first_llm.1["data"]["message"]["tool_calls"][0]["name"],
        "entity_resolve"
    );
    let last_tool = events
        .iter()
        .rev()
        .find(|(_, d)| d["node"] == "tool_node")
        .unwrap();
    assert_eq!(last_tool.1["data"]["status"], "awaiting_hitl");
    let done: Vec<&Value> = events
        .iter()
        .filter(|(e, _)| e == "done")
        .map(|(_, d)| d)
        .collect();
    assert_eq!(done.len(), 1, "exactly one done event");
    assert_eq!(events.last().unwrap().0, "done", "done is last");
    assert_eq!(done[0]["data"]["status"], "awaiting_hitl");
    let pause = events
        .iter()
        .find(|(e, _)| e == "interrupt")
        .expect("an interrupt event");
    assert_eq!(pause.1["data"][0]["value"]["tool_call"]["name"], "create_entity");

    // Resume on the same conversation: the replay turn, the two-phase answer, done.
    let resp = reqwest::Client::new()
        .post(&url)
        .json(&json!({"resume": {"decision": "approved", "reviewer_id": "rev-1"}}))
        .send()
        .await
        .unwrap();
    let events = sse_events(&resp.text().await.unwrap());
    let nodes: Vec<&str> = events
        .iter()
        .filter(|(e, _)| e == "node_end")
        .map(|(_, d)| d["node"].as_str().unwrap())
        .collect();
    assert_eq!(
        nodes,
        [
            "output_format",
            "system_prompt_node",
            "memory_node",
            "resume_guard",
            "tool_node",
            "initial_llm_call",
            "skill_select_node",
            "skill_inject_node",
            "approval_node",
            "synthesis_llm_call",
            "tool_node",
            "synthesis_llm_call",
            "output_format"
        ]
    );
    let (event, done) = events.last().unwrap();
    assert_eq!(event, "done");
    assert_eq!(done["data"]["status"], "completed");
    assert_eq!(done["data"]["tokens_used"], 8_720);
    assert!(done["data"]["execution_id"]
        .as_str()
        .is_some_and(|s| !s.is_empty()));
}

#[tokio::test]
async fn a_model_failure_ends_the_stream_with_a_failed_status() {
    let model = ScriptedModel::new([Reply::failure("upstream 500").with_usage(Usage::new(1, 1))]);
    let base = serve(model).await;
    let resp = reqwest::Client::new()
        .post(format!("{base}/conversations/conv-err/stream"))
        .json(&json!({"input": sample_input()}))
        .send()
        .await
        .unwrap();
    let events = sse_events(&resp.text().await.unwrap());
    let nodes: Vec<&str> = events
        .iter()
        .filter(|(e, _)| e == "node_end")
        .map(|(_, d)| d["node"].as_str().unwrap())
        .collect();
    assert_eq!(
        &nodes[3..],
        ["initial_llm_call", "output_format"],
        "has error -> output_format"
    );
    let (event, done) = events.last().unwrap();
    assert_eq!(event, "done");
    assert_eq!(done["data"]["status"], "failed");
    assert!(done["data"]["error"].as_str().unwrap().contains("upstream 500"));
}
