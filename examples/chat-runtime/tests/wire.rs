//! The route's wire format (AI SDK data stream protocol) and the whole path from a local
//! server speaking OpenAI's streaming Chat Completions to data stream lines.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use axum::body::Body;
use axum::extract::State;
use axum::http::header;
use axum::response::Response;
use axum::routing::post;
use axum::{Json, Router};
use chat_runtime::{decode_line, knowledge_search, AiEvent, DataStreamEncoder, UsageFact};
use common::{ask, drain, harness, kinds};
use graphloom_llm::{OpenAiModel, Usage};
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

fn fact(usage: Usage, finish: &str) -> UsageFact {
    UsageFact {
        invocation_id: "inv-1".into(),
        provider: "openai".into(),
        model: "gpt-4o-mini".into(),
        prompt_hash: "0".repeat(64),
        usage,
        finish_reason: Some(finish.into()),
        response_id: None,
        duration_ms: 3,
        error: None,
    }
}

#[test]
fn each_event_encodes_to_its_data_stream_part() {
    let mut enc = DataStreamEncoder::new();
    assert_eq!(
        enc.encode(&AiEvent::TextDelta {
            delta: "He said \"hi\"\n".into()
        }),
        "0:\"He said \\\"hi\\\"\\n\"\n"
    );
    assert_eq!(
        enc.encode(&AiEvent::ToolCallStart {
            tool_call_id: "call_1".into(),
            tool_name: "knowledge_search".into(),
            args: json!({"query": "x"}),
        }),
        "9:{\"toolCallId\":\"call_1\",\"toolName\":\"knowledge_search\",\"args\":{\"query\":\"x\"}}\n"
    );
    assert_eq!(
        enc.encode(&AiEvent::ToolCallResult {
            tool_call_id: "call_1".into(),
            tool_name: "knowledge_search".into(),
            result: json!({"resultCount": 2}),
            is_error: false,
        }),
        "a:{\"toolCallId\":\"call_1\",\"result\":{\"resultCount\":2}}\n"
    );
    let step1 = enc.encode(&AiEvent::UsageReport {
        fact: fact(Usage::new(10, 4), "tool_calls"),
    });
    assert_eq!(
        decode_line(&step1).unwrap(),
        (
            'e',
            json!({"finishReason": "tool-calls", "usage": {"promptTokens": 10, "completionTokens": 4}, "isContinued": false})
        )
    );
    enc.encode(&AiEvent::UsageReport {
        fact: fact(Usage::new(20, 6), "stop"),
    });
    let done = enc.encode(&AiEvent::Done);
    assert!(done.starts_with("d:") && done.ends_with('\n') && done.matches('\n').count() == 1);
    assert_eq!(
        decode_line(&done).unwrap().1,
        json!({"finishReason": "stop", "usage": {"promptTokens": 30, "completionTokens": 10}})
    );
}

#[derive(Default)]
struct Mock {
    replies: Mutex<VecDeque<Vec<Value>>>,
    requests: Mutex<Vec<Value>>,
}

async fn completions(State(mock): State<Arc<Mock>>, Json(body): Json<Value>) -> Response {
    mock.requests.lock().unwrap().push(body);
    let frames = mock.replies.lock().unwrap().pop_front().unwrap_or_default();
    let mut sse: String = frames.iter().map(|f| format!("data: {f}\n\n")).collect();
    sse.push_str("data: [DONE]\n\n");
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .body(Body::from(sse))
        .unwrap()
}

fn delta(d: Value, finish: Option<&str>) -> Value {
    json!({"id": "chatcmpl-w", "object": "chat.completion.chunk", "model": "gpt-4o-mini",
        "choices": [{"index": 0, "delta": d, "finish_reason": finish}]})
}

fn usage(input: u64, output: u64) -> Value {
    json!({"id": "chatcmpl-w", "object": "chat.completion.chunk", "model": "gpt-4o-mini", "choices": [],
        "usage": {"prompt_tokens": input, "completion_tokens": output, "total_tokens": input + output}})
}

#[tokio::test]
async fn openai_stream_from_a_local_server_becomes_data_stream_lines() {
    let mock = Arc::new(Mock::default());
    mock.replies.lock().unwrap().extend([
        vec![
            delta(
                json!({"role": "assistant", "tool_calls": [{"index": 0, "id": "call_srv1", "type": "function",
                "function": {"name": "knowledge_search", "arguments": "{\"query\":"}}]}),
                None,
            ),
            delta(
                json!({"tool_calls": [{"index": 0, "function": {"arguments": "\"refunds\"}"}}]}),
                None,
            ),
            delta(json!({}), Some("tool_calls")),
            usage(21, 9),
        ],
        vec![
            delta(json!({"role": "assistant", "content": "Refunds "}), None),
            delta(json!({"content": "take 5 days."}), None),
            delta(json!({}), Some("stop")),
            usage(40, 6),
        ],
    ]);
    let app = Router::new()
        .route("/v1/chat/completions", post(completions))
        .with_state(mock.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let model = OpenAiModel::new("gpt-4o-mini")
        .base_url(format!("http://{addr}/v1"))
        .api_key("test-key")
        .unwrap();
    let h = harness(Arc::new(model), vec![knowledge_search()]);
    let (events, fin) = drain(ask(&h, "t-wire", "how long do refunds take?")).await;
    let fin = fin.unwrap();
    server.abort();

    assert_eq!(fin.answer, "Refunds take 5 days.");
    assert_eq!(fin.usage, Usage::new(61, 15));
    let reqs = mock.requests.lock().unwrap().clone();
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[0]["stream"], true);
    assert_eq!(reqs[0]["tools"][0]["function"]["name"], "knowledge_search");
    // The model's call id is the stream's toolCallId.
    assert_eq!(
        reqs[1]["messages"].as_array().unwrap().last().unwrap()["tool_call_id"],
        "call_srv1"
    );

    let k = kinds(&events);
    assert_eq!(k.iter().filter(|k| **k == "done").count(), 1);
    let wire = chat_runtime::encode_data_stream(&events);
    let lines: Vec<(char, Value)> = wire.lines().map(|l| decode_line(l).unwrap()).collect();
    let codes: String = lines.iter().map(|(c, _)| *c).collect();
    assert_eq!(codes, "e9a00ed");
    assert_eq!(lines[1].1["toolCallId"], "call_srv1");
    assert_eq!(lines[1].1["args"], json!({"query": "refunds"}));
    assert_eq!(lines[2].1["result"]["topUrl"], "https://kb.example/refunds");
    assert_eq!(
        (lines[3].1.clone(), lines[4].1.clone()),
        (json!("Refunds "), json!("take 5 days."))
    );
    assert_eq!(
        lines[6].1,
        json!({"finishReason": "stop", "usage": {"promptTokens": 61, "completionTokens": 15}})
    );
}
