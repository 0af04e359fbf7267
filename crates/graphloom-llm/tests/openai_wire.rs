//! The OpenAI-compatible provider against a local server speaking Chat Completions: plain and
//! SSE answers, tool calls split across chunks, usage, retries, and every way a reply can be bad.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![cfg(feature = "openai")]

mod common;

use common::{closed_port, data_frames, MockReply, MockServer};
use futures::StreamExt;
use graphloom_llm::{
    ChatChunk, ChatModel, ChatModelExt, ChatOptions, Error, ErrorKind, Message, MessageExt, OpenAiModel,
    RetryConfig, ToolCall, ToolChoice, ToolSpec, Usage,
};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

fn fast_retry() -> RetryConfig {
    RetryConfig::default()
        .initial_backoff(Duration::from_millis(5))
        .max_backoff(Duration::from_millis(20))
}

fn model(server: &MockServer) -> OpenAiModel {
    OpenAiModel::new("gpt-4o-mini")
        .base_url(server.v1())
        .api_key("test-key")
        .unwrap()
        .retry(fast_retry())
}

fn completion(text: &str) -> Value {
    json!({
        "id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-4o-mini-2024-07-18",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}
    })
}

fn chunk(delta: Value, finish: Option<&str>) -> Value {
    json!({"id": "chatcmpl-s", "object": "chat.completion.chunk", "model": "gpt-4o-mini",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
}

fn usage_chunk(input: u64, output: u64) -> Value {
    json!({"id": "chatcmpl-s", "object": "chat.completion.chunk", "model": "gpt-4o-mini", "choices": [],
        "usage": {"prompt_tokens": input, "completion_tokens": output, "total_tokens": input + output}})
}

fn done() -> String {
    "data: [DONE]\n\n".to_owned()
}

async fn collect(model: &OpenAiModel, msgs: &[Message]) -> (Vec<ChatChunk>, Option<Error>) {
    let mut s = model.stream(msgs, &ChatOptions::new());
    let mut chunks = Vec::new();
    while let Some(c) = s.next().await {
        match c {
            Ok(c) => chunks.push(c),
            Err(e) => return (chunks, Some(e)),
        }
    }
    (chunks, None)
}

#[tokio::test]
async fn invoke_returns_text_usage_metadata_and_sends_the_wire_format() {
    let server = MockServer::start(vec![MockReply::json(completion("Hi there"))]).await;
    let history = vec![
        Message::system("be brief"),
        Message::human("weather?"),
        Message::ai_with_tool_calls(
            "",
            vec![ToolCall {
                id: "call_1".into(),
                name: "weather".into(),
                args: json!({"city": "Oslo"}),
            }],
        ),
        Message::tool("cold", "call_1"),
    ];
    let opts = ChatOptions::new()
        .temperature(0.2)
        .max_tokens(64)
        .stop("END")
        .tools([ToolSpec::new(
            "weather",
            "Weather by city",
            json!({"type": "object"}),
        )])
        .tool_choice(ToolChoice::Named("weather".into()))
        .metadata("request_id", "r-1");
    let m = model(&server).invoke(&history, &opts).await.unwrap();
    assert_eq!(m.text(), "Hi there");
    assert_eq!(m.id.as_deref(), Some("chatcmpl-1"));
    assert_eq!(m.usage(), Some(Usage::new(11, 7)));
    assert_eq!(m.finish_reason(), Some("stop"));
    assert_eq!(
        m.response_metadata().unwrap()["model_name"],
        "gpt-4o-mini-2024-07-18"
    );

    let reqs = server.requests();
    assert_eq!(reqs.len(), 1);
    let r = &reqs[0];
    assert_eq!(r.path, "/v1/chat/completions");
    assert_eq!(r.header("authorization").as_deref(), Some("Bearer test-key"));
    let b = &r.body;
    assert_eq!(b["model"], "gpt-4o-mini");
    assert_eq!(b["temperature"], 0.2);
    assert_eq!(b["max_tokens"], 64);
    assert_eq!(b["stop"], json!(["END"]));
    assert!(b.get("stream").is_none());
    assert!(b.get("request_id").is_none() && !b.to_string().contains("r-1"));
    let roles: Vec<&str> = b["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["system", "user", "assistant", "tool"]);
    assert_eq!(b["messages"][2]["content"], Value::Null);
    assert_eq!(
        b["messages"][2]["tool_calls"][0]["function"]["arguments"],
        r#"{"city":"Oslo"}"#
    );
    assert_eq!(b["messages"][3]["tool_call_id"], "call_1");
    assert_eq!(b["tools"][0]["function"]["name"], "weather");
    assert_eq!(
        b["tool_choice"],
        json!({"type": "function", "function": {"name": "weather"}})
    );
}

#[tokio::test]
async fn invoke_reads_tool_calls_and_keeps_bad_arguments_as_invalid_tool_calls() {
    let body = json!({
        "id": "c", "model": "m",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": null,
            "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "search", "arguments": "{\"q\":\"rust\"}"}},
                {"id": "b", "type": "function", "function": {"name": "search", "arguments": "{\"q\":"}},
                {"id": "c", "type": "function", "function": {"name": "lookup", "arguments": {"k": 1}}}
            ]}}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 2}
    });
    let server = MockServer::start(vec![MockReply::json(body)]).await;
    let m = model(&server)
        .bind_tools([ToolSpec::new("search", "", json!({"type": "object"}))])
        .invoke(&[Message::human("x")], &ChatOptions::new())
        .await
        .unwrap();
    assert_eq!(m.tool_calls.len(), 2);
    assert_eq!(m.tool_calls[0].args, json!({"q": "rust"}));
    assert_eq!(
        m.tool_calls[1].args,
        json!({"k": 1}),
        "arguments sent as an object are accepted"
    );
    let bad = m.invalid_tool_calls();
    assert_eq!(bad.len(), 1);
    assert_eq!(bad[0].id.as_deref(), Some("b"));
    assert_eq!(
        server.requests()[0].body["tools"][0]["function"]["name"],
        "search"
    );
}

#[tokio::test]
async fn tool_call_arguments_keep_the_models_key_order_when_read_and_sent_back() {
    let body = json!({
        "id": "c", "model": "m",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": null,
            "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "pay", "arguments": "{\"to\":\"B2\",\"amount\":5}"}}
            ]}}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 2}
    });
    let server = MockServer::start(vec![MockReply::json(body), MockReply::json(completion("paid"))]).await;
    let m = model(&server);
    let ai = m
        .invoke(&[Message::human("pay B2 5")], &ChatOptions::new())
        .await
        .unwrap();
    let keys: Vec<&String> = ai.tool_calls[0].args.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["to", "amount"], "the arguments as the model wrote them");
    let result = Message::tool("ok", "a");
    m.invoke(&[Message::human("pay B2 5"), ai, result], &ChatOptions::new())
        .await
        .unwrap();
    let sent = &server.requests()[1].body["messages"][1]["tool_calls"][0]["function"]["arguments"];
    assert_eq!(sent, &json!("{\"to\":\"B2\",\"amount\":5}"));
}

#[tokio::test]
async fn stream_yields_text_deltas_and_final_usage() {
    let mut frames = data_frames(&[
        chunk(json!({"role": "assistant", "content": ""}), None),
        chunk(json!({"content": "Hel"}), None),
        chunk(json!({"content": "lo, wörld"}), None),
        chunk(json!({}), Some("stop")),
        usage_chunk(9, 3),
    ]);
    frames.push(done());
    let server = MockServer::start(vec![MockReply::sse(frames)]).await;
    let m = model(&server);
    let (chunks, err) = collect(&m, &[Message::human("hi")]).await;
    assert!(err.is_none(), "{err:?}");
    let text: Vec<&str> = chunks
        .iter()
        .map(|c| c.text.as_str())
        .filter(|t| !t.is_empty())
        .collect();
    assert_eq!(text, ["Hel", "lo, wörld"]);
    assert_eq!(chunks.last().unwrap().usage, Some(Usage::new(9, 3)));
    let b = &server.requests()[0].body;
    assert_eq!(b["stream"], true);
    assert_eq!(b["stream_options"], json!({"include_usage": true}));

    let server = MockServer::start(vec![MockReply::sse({
        let mut f = data_frames(&[chunk(json!({"content": "ok"}), Some("stop")), usage_chunk(1, 1)]);
        f.push(done());
        f
    })])
    .await;
    let assembled = model(&server)
        .stream_collect(&[Message::human("hi")], &ChatOptions::new())
        .await
        .unwrap();
    assert_eq!(assembled.text(), "ok");
    assert_eq!(assembled.id.as_deref(), Some("chatcmpl-s"));
    assert_eq!(assembled.usage(), Some(Usage::new(1, 1)));
}

#[tokio::test]
async fn stream_assembles_tool_calls_split_across_chunks_by_index() {
    let tc = |index: usize, id: Option<&str>, name: Option<&str>, args: &str| {
        let mut f = json!({"arguments": args});
        if let Some(n) = name {
            f["name"] = json!(n);
        }
        let mut c = json!({"index": index, "function": f});
        if let Some(id) = id {
            c["id"] = json!(id);
            c["type"] = json!("function");
        }
        chunk(json!({"tool_calls": [c]}), None)
    };
    let mut frames = data_frames(&[
        chunk(json!({"role": "assistant", "content": null}), None),
        tc(0, Some("call_a"), Some("weather"), ""),
        tc(0, None, None, "{\"ci"),
        tc(1, Some("call_b"), Some("time"), "{\"tz\":"),
        tc(0, None, None, "ty\": \"Os"),
        tc(1, None, None, "\"CET\"}"),
        tc(0, None, None, "lo\"}"),
        chunk(json!({}), Some("tool_calls")),
        usage_chunk(20, 15),
    ]);
    frames.push(done());
    let server = MockServer::start(vec![MockReply::sse(frames)]).await;
    let m = model(&server)
        .stream_collect(&[Message::human("x")], &ChatOptions::new())
        .await
        .unwrap();
    assert_eq!(m.tool_calls.len(), 2);
    assert_eq!(m.tool_calls[0].id, "call_a");
    assert_eq!(m.tool_calls[0].name, "weather");
    assert_eq!(m.tool_calls[0].args, json!({"city": "Oslo"}));
    assert_eq!(m.tool_calls[1].args, json!({"tz": "CET"}));
    assert_eq!(m.finish_reason(), Some("tool_calls"));
    assert_eq!(m.usage(), Some(Usage::new(20, 15)));
}

#[tokio::test]
async fn rate_limit_is_retried_after_the_wait_the_server_asks_for() {
    let server = MockServer::start(vec![
        MockReply::status(429, json!({"error": {"message": "Rate limit reached"}}))
            .with_header("retry-after", "1"),
        MockReply::json(completion("finally")),
    ])
    .await;
    let started = Instant::now();
    let m = model(&server)
        .invoke(&[Message::human("x")], &ChatOptions::new())
        .await
        .unwrap();
    assert_eq!(m.text(), "finally");
    assert!(
        started.elapsed() >= Duration::from_millis(950),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(server.request_count(), 2);
}

#[tokio::test]
async fn rate_limit_asking_longer_than_allowed_fails_at_once() {
    let server = MockServer::start(vec![
        MockReply::status(429, json!({"error": {"message": "come back tomorrow"}}))
            .with_header("retry-after", "86400"),
        MockReply::json(completion("never")),
    ])
    .await;
    let err = model(&server)
        .invoke(&[Message::human("x")], &ChatOptions::new())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::RateLimited);
    assert!(err.to_string().contains("come back tomorrow"), "{err}");
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn server_errors_exhaust_the_attempts_with_a_typed_error() {
    let err500 = || MockReply::status(500, json!({"error": {"message": "upstream exploded"}}));
    let server = MockServer::start(vec![
        err500(),
        err500(),
        err500(),
        MockReply::json(completion("late")),
    ])
    .await;
    let err = model(&server)
        .invoke(&[Message::human("x")], &ChatOptions::new())
        .await
        .unwrap_err();
    match &err {
        Error::Http {
            status,
            attempts,
            message,
            provider,
        } => {
            assert_eq!((*status, *attempts), (500, 3));
            assert_eq!(message, "upstream exploded");
            assert_eq!(provider, "openai");
        }
        other => panic!("unexpected {other:?}"),
    }
    assert!(err.is_transient());
    assert_eq!(server.request_count(), 3);

    // The same for a stream: retried before the first byte, then a typed error.
    let server = MockServer::start(vec![err500(), err500()]).await;
    let m = model(&server).retry(fast_retry().max_attempts(2));
    let (chunks, err) = collect(&m, &[Message::human("x")]).await;
    assert!(chunks.is_empty());
    assert!(
        matches!(
            err,
            Some(Error::Http {
                status: 500,
                attempts: 2,
                ..
            })
        ),
        "{err:?}"
    );
    assert_eq!(server.request_count(), 2);
}

#[tokio::test]
async fn client_errors_are_not_retried_and_carry_the_provider_message() {
    let server = MockServer::start(vec![MockReply::status(
        400,
        json!({"error": {"message": "Invalid value for 'temperature'", "type": "invalid_request_error"}}),
    )])
    .await;
    let err = model(&server)
        .invoke(&[Message::human("x")], &ChatOptions::new().temperature(9.0))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::Http { status: 400, attempts: 1, message, .. } if message == "Invalid value for 'temperature'"),
        "{err:?}"
    );
    assert_eq!(err.kind(), ErrorKind::Rejected);
    assert!(!err.clone().into_node_error().is_retryable());
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn malformed_json_is_an_invalid_response() {
    let server = MockServer::start(vec![
        MockReply::Raw {
            status: 200,
            body: b"{\"id\": \"x\", \"choices\": [".to_vec(),
        },
        MockReply::json(json!({"id": "x", "choices": []})),
        MockReply::sse(vec!["data: {\"choices\": [oops\n\n".to_owned()]),
    ])
    .await;
    let m = model(&server);
    let err = m
        .invoke(&[Message::human("x")], &ChatOptions::new())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidResponse);
    assert!(
        err.to_string().contains("{\"id\": \"x\""),
        "raw excerpt kept: {err}"
    );
    let err = m
        .invoke(&[Message::human("x")], &ChatOptions::new())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("no choices"), "{err}");
    let (_, err) = collect(&m, &[Message::human("x")]).await;
    assert_eq!(err.map(|e| e.kind()), Some(ErrorKind::InvalidResponse));
    assert_eq!(server.request_count(), 3, "bad bodies are not retried");
}

#[tokio::test]
async fn truncated_streams_are_typed_errors() {
    // Ends cleanly but without [DONE] or a finish reason.
    let server = MockServer::start(vec![
        MockReply::sse(data_frames(&[chunk(json!({"content": "Hel"}), None)])),
        MockReply::sse_abort(data_frames(&[
            chunk(json!({"content": "Hel"}), None),
            chunk(json!({"content": "lo"}), None),
        ])),
    ])
    .await;
    let m = model(&server);
    let (chunks, err) = collect(&m, &[Message::human("x")]).await;
    assert_eq!(chunks.len(), 1);
    let err = err.expect("an error");
    assert_eq!(err.kind(), ErrorKind::Truncated);
    assert!(err.to_string().contains("[DONE]"), "{err}");
    // The connection breaks mid-stream.
    let (chunks, err) = collect(&m, &[Message::human("x")]).await;
    assert_eq!(chunks.len(), 2);
    assert!(matches!(err, Some(Error::StreamTruncated { .. })), "{err:?}");
    assert_eq!(
        server.request_count(),
        2,
        "a stream that started is never retried"
    );
}

#[tokio::test]
async fn an_error_event_inside_a_stream_is_a_provider_error() {
    let server = MockServer::start(vec![MockReply::sse(data_frames(&[
        chunk(json!({"content": "partial"}), None),
        json!({"error": {"message": "model overloaded", "type": "server_error"}}),
    ]))])
    .await;
    let (_, err) = collect(&model(&server), &[Message::human("x")]).await;
    assert!(
        matches!(&err, Some(Error::Provider { message, .. }) if message == "model overloaded"),
        "{err:?}"
    );
}

#[tokio::test]
async fn a_reply_of_one_hundred_tool_calls() {
    let calls: Vec<Value> = (0..100)
        .map(|i| {
            json!({"id": format!("call_{i}"), "type": "function",
            "function": {"name": format!("tool_{}", i % 7), "arguments": json!({"i": i}).to_string()}})
        })
        .collect();
    let body = json!({"id": "c", "model": "m", "choices": [{"index": 0, "finish_reason": "tool_calls",
        "message": {"role": "assistant", "content": null, "tool_calls": calls}}]});
    let mut frames = vec![chunk(json!({"role": "assistant"}), None)];
    for i in 0..100usize {
        let args = json!({"i": i}).to_string();
        let (a, b) = args.split_at(3);
        frames.push(chunk(
            json!({"tool_calls": [{"index": i, "id": format!("call_{i}"), "type": "function",
                "function": {"name": format!("tool_{}", i % 7), "arguments": a}}]}),
            None,
        ));
        frames.push(chunk(
            json!({"tool_calls": [{"index": i, "function": {"arguments": b}}]}),
            None,
        ));
    }
    frames.push(chunk(json!({}), Some("tool_calls")));
    frames.push(usage_chunk(5, 500));
    let mut frames = data_frames(&frames);
    frames.push(done());
    let server = MockServer::start(vec![MockReply::json(body), MockReply::sse(frames)]).await;
    let m = model(&server);
    for msg in [
        m.invoke(&[Message::human("x")], &ChatOptions::new())
            .await
            .unwrap(),
        m.stream_collect(&[Message::human("x")], &ChatOptions::new())
            .await
            .unwrap(),
    ] {
        assert_eq!(msg.tool_calls.len(), 100);
        assert!(msg.invalid_tool_calls().is_empty());
        for (i, c) in msg.tool_calls.iter().enumerate() {
            assert_eq!(c.id, format!("call_{i}"));
            assert_eq!(c.args, json!({"i": i}));
        }
    }
}

#[tokio::test]
async fn a_ten_megabyte_response_body() {
    let big = "x".repeat(10 * 1024 * 1024);
    let server = MockServer::start(vec![
        MockReply::json(completion(&big)),
        MockReply::json(completion(&big)),
    ])
    .await;
    let m = model(&server)
        .invoke(&[Message::human("x")], &ChatOptions::new())
        .await
        .unwrap();
    assert_eq!(m.text().len(), big.len());
    let err = model(&server)
        .max_response_bytes(1024 * 1024)
        .invoke(&[Message::human("x")], &ChatOptions::new())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidResponse);
    assert!(err.to_string().contains("larger than"), "{err}");
}

#[tokio::test]
async fn a_slow_attempt_times_out_and_the_retry_succeeds() {
    let server = MockServer::start(vec![
        MockReply::json(completion("slow")).after(Duration::from_secs(5)),
        MockReply::json(completion("fast")),
    ])
    .await;
    let m = model(&server)
        .invoke(
            &[Message::human("x")],
            &ChatOptions::new().timeout(Duration::from_millis(300)),
        )
        .await
        .unwrap();
    assert_eq!(m.text(), "fast");
    assert_eq!(server.request_count(), 2);

    let server = MockServer::start(vec![
        MockReply::json(completion("slow")).after(Duration::from_secs(5))
    ])
    .await;
    let err = model(&server)
        .retry(RetryConfig::none())
        .invoke(
            &[Message::human("x")],
            &ChatOptions::new().timeout(Duration::from_millis(200)),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::Timeout {
                after_ms: 200,
                attempts: 1,
                ..
            }
        ),
        "{err:?}"
    );
}

#[tokio::test]
async fn connection_failures_are_retried_then_typed() {
    let port = closed_port().await;
    let m = OpenAiModel::new("m")
        .base_url(format!("http://127.0.0.1:{port}/v1"))
        .retry(fast_retry().max_attempts(2));
    let err = m
        .invoke(&[Message::human("x")], &ChatOptions::new())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Connection { attempts: 2, .. }), "{err:?}");
    let (_, err) = {
        let mut s = m.stream(&[Message::human("x")], &ChatOptions::new());
        let first = s.next().await;
        ((), first.and_then(Result::err))
    };
    assert_eq!(err.map(|e| e.kind()), Some(ErrorKind::Connection));
}

#[derive(Debug, serde::Deserialize, schemars::JsonSchema, PartialEq)]
struct Plan {
    /// The tool to run next.
    tool: String,
    /// How sure the planner is, 0 to 1.
    confidence: f64,
}

#[tokio::test]
async fn structured_output_sends_the_schema_and_validates_the_answer() {
    let server = MockServer::start(vec![
        MockReply::json(completion(r#"{"tool": "lookup", "confidence": 0.9}"#)),
        MockReply::json(completion(r#"{"tool": 42}"#)),
        MockReply::json(completion(&"I think you should lookup things. ".repeat(100))),
    ])
    .await;
    let m = model(&server);
    let plan: Plan = m
        .invoke_structured(&[Message::human("plan")], &ChatOptions::new())
        .await
        .unwrap();
    assert_eq!(
        plan,
        Plan {
            tool: "lookup".into(),
            confidence: 0.9
        }
    );
    let rf = &server.requests()[0].body["response_format"];
    assert_eq!(rf["type"], "json_schema");
    assert_eq!(rf["json_schema"]["name"], "Plan");
    assert_eq!(
        rf["json_schema"]["schema"]["properties"]["tool"]["description"],
        "The tool to run next."
    );
    let err = m
        .invoke_structured::<Plan>(&[Message::human("plan")], &ChatOptions::new())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::StructuredOutput);
    assert!(err.to_string().contains("does not match the schema"), "{err}");
    let err = m
        .invoke_structured::<Plan>(&[Message::human("plan")], &ChatOptions::new())
        .await
        .unwrap_err();
    let Error::StructuredOutput { raw, reason, .. } = &err else {
        panic!("{err:?}")
    };
    assert!(reason.starts_with("not valid JSON"), "{reason}");
    assert!(raw.len() < 700, "raw text truncated: {} bytes", raw.len());
    assert!(raw.starts_with("I think you should lookup"));
}

#[tokio::test]
async fn content_part_lists_are_sent_as_parts_and_read_as_text() {
    let server = MockServer::start(vec![MockReply::json(completion("A cat."))]).await;
    // A user message in OpenAI's own form, as a client would post it.
    let user: Message = serde_json::from_value(json!({"role": "user", "content": [
        {"type": "text", "text": "What is this? "},
        {"type": "image_url", "image_url": {"url": "https://x.example/cat.png"}},
        "Be brief."
    ]}))
    .unwrap();
    let system: Message = serde_json::from_value(
        json!({"role": "system", "content": [{"type": "text", "text": "You see images."}]}),
    )
    .unwrap();
    model(&server)
        .invoke(&[system, user], &ChatOptions::new())
        .await
        .unwrap();
    let b = &server.requests()[0].body;
    assert_eq!(
        b["messages"][0],
        json!({"role": "system", "content": "You see images."})
    );
    assert_eq!(
        b["messages"][1]["content"],
        json!([
            {"type": "text", "text": "What is this? "},
            {"type": "image_url", "image_url": {"url": "https://x.example/cat.png"}},
            {"type": "text", "text": "Be brief."}
        ])
    );
}
