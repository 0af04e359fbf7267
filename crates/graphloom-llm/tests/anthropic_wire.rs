//! The Anthropic provider against a local server speaking the Messages API: content blocks,
//! tool_use / tool_result, input_json_delta streaming, usage from message_start and
//! message_delta, retries and bad replies.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![cfg(feature = "anthropic")]

mod common;

use common::{event_frames, MockReply, MockServer};
use futures::StreamExt;
use graphloom_llm::{
    AnthropicModel, ChatChunk, ChatModel, ChatModelExt, ChatOptions, Error, ErrorKind, Message, MessageExt,
    RetryConfig, ToolCall, ToolSpec, Usage,
};
use serde_json::{json, Value};
use std::time::{Duration, SystemTime};

fn model(server: &MockServer) -> AnthropicModel {
    AnthropicModel::new("claude-sonnet-4-5")
        .base_url(&server.base)
        .api_key("ant-key")
        .unwrap()
        .retry(
            RetryConfig::default()
                .initial_backoff(Duration::from_millis(5))
                .max_backoff(Duration::from_millis(20)),
        )
}

fn message(content: Value, stop: &str) -> Value {
    json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5-20250929",
        "content": content, "stop_reason": stop, "stop_sequence": null,
        "usage": {"input_tokens": 12, "output_tokens": 6, "cache_read_input_tokens": 100}})
}

fn start() -> Value {
    json!({"type": "message_start", "message": {"id": "msg_s", "type": "message", "role": "assistant",
        "model": "claude-sonnet-4-5", "content": [], "stop_reason": null,
        "usage": {"input_tokens": 25, "output_tokens": 1}}})
}

fn block_start(index: usize, block: Value) -> Value {
    json!({"type": "content_block_start", "index": index, "content_block": block})
}

fn text_delta(index: usize, text: &str) -> Value {
    json!({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": text}})
}

fn json_delta(index: usize, partial: &str) -> Value {
    json!({"type": "content_block_delta", "index": index,
        "delta": {"type": "input_json_delta", "partial_json": partial}})
}

fn block_stop(index: usize) -> Value {
    json!({"type": "content_block_stop", "index": index})
}

fn message_delta(stop: &str, output: u64) -> Value {
    json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
        "usage": {"output_tokens": output}})
}

fn stop() -> Value {
    json!({"type": "message_stop"})
}

async fn collect(model: &AnthropicModel, opts: &ChatOptions) -> (Vec<ChatChunk>, Option<Error>) {
    let mut s = model.stream(&[Message::human("hi")], opts);
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
async fn invoke_separates_the_system_prompt_and_sends_tool_results_as_blocks() {
    let server = MockServer::start(vec![MockReply::json(message(
        json!([{"type": "text", "text": "It is cold in Oslo."}]),
        "end_turn",
    ))])
    .await;
    let history = vec![
        Message::system("You are a weather bot."),
        Message::human("Weather in Oslo?"),
        Message::ai_with_tool_calls(
            "Let me check.",
            vec![ToolCall {
                id: "toolu_1".into(),
                name: "weather".into(),
                args: json!({"city": "Oslo"}),
            }],
        ),
        Message::tool("-5C", "toolu_1"),
    ];
    let opts = ChatOptions::new()
        .temperature(0.0)
        .stop("STOP")
        .tools([ToolSpec::new(
            "weather",
            "Weather by city",
            json!({"type": "object"}),
        )]);
    let m = model(&server).invoke(&history, &opts).await.unwrap();
    assert_eq!(m.text(), "It is cold in Oslo.");
    assert_eq!(m.id.as_deref(), Some("msg_1"));
    assert_eq!(m.finish_reason(), Some("end_turn"));
    assert_eq!(m.usage(), Some(Usage::new(112, 6)), "cache reads count as input");
    assert_eq!(m.response_metadata().unwrap()["model_provider"], "anthropic");

    let r = &server.requests()[0];
    assert_eq!(r.path, "/v1/messages");
    assert_eq!(r.header("x-api-key").as_deref(), Some("ant-key"));
    assert_eq!(r.header("anthropic-version").as_deref(), Some("2023-06-01"));
    let b = &r.body;
    assert_eq!(b["system"], "You are a weather bot.");
    assert_eq!(b["max_tokens"], 4096);
    assert_eq!(b["stop_sequences"], json!(["STOP"]));
    assert_eq!(b["tools"][0]["input_schema"], json!({"type": "object"}));
    let turns = b["messages"].as_array().unwrap();
    assert_eq!(turns.len(), 3);
    assert_eq!(turns[0]["role"], "user");
    assert_eq!(
        turns[1]["content"][0],
        json!({"type": "text", "text": "Let me check."})
    );
    assert_eq!(
        turns[1]["content"][1],
        json!({"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Oslo"}})
    );
    assert_eq!(
        turns[2]["content"][0],
        json!({"type": "tool_result", "tool_use_id": "toolu_1", "content": "-5C"})
    );
}

#[tokio::test]
async fn invoke_reads_tool_use_blocks() {
    let server = MockServer::start(vec![MockReply::json(message(
        json!([
            {"type": "text", "text": "Checking both."},
            {"type": "tool_use", "id": "toolu_a", "name": "weather", "input": {"city": "Oslo"}},
            {"type": "tool_use", "id": "toolu_b", "name": "weather", "input": {"city": "Rome"}}
        ]),
        "tool_use",
    ))])
    .await;
    let m = model(&server)
        .invoke(&[Message::human("x")], &ChatOptions::new().max_tokens(50))
        .await
        .unwrap();
    assert_eq!(m.text(), "Checking both.");
    assert_eq!(m.tool_calls.len(), 2);
    assert_eq!(m.tool_calls[1].id, "toolu_b");
    assert_eq!(m.tool_calls[1].args, json!({"city": "Rome"}));
    assert_eq!(server.requests()[0].body["max_tokens"], 50);
}

#[tokio::test]
async fn stream_text_tool_input_deltas_and_usage() {
    let frames = event_frames(&[
        start(),
        block_start(0, json!({"type": "text", "text": ""})),
        text_delta(0, "Let me "),
        text_delta(0, "look."),
        block_stop(0),
        block_start(
            1,
            json!({"type": "tool_use", "id": "toolu_x", "name": "weather", "input": {}}),
        ),
        json_delta(1, ""),
        json_delta(1, "{\"city\": "),
        json_delta(1, "\"Os"),
        json_delta(1, "lo\"}"),
        block_stop(1),
        json!({"type": "ping"}),
        message_delta("tool_use", 42),
        stop(),
    ]);
    let server = MockServer::start(vec![MockReply::sse(frames.clone()), MockReply::sse(frames)]).await;
    let m = model(&server);
    let (chunks, err) = collect(&m, &ChatOptions::new()).await;
    assert!(err.is_none(), "{err:?}");
    assert!(chunks.iter().all(|c| c.id.as_deref() == Some("msg_s")));
    let text: String = chunks.iter().map(|c| c.text.as_str()).collect();
    assert_eq!(text, "Let me look.");
    let pieces: Vec<&str> = chunks
        .iter()
        .flat_map(|c| &c.tool_call_chunks)
        .map(|t| t.args.as_str())
        .collect();
    assert_eq!(pieces.concat(), "{\"city\": \"Oslo\"}");
    assert_eq!(
        chunks.iter().filter_map(|c| c.usage).collect::<Vec<_>>(),
        [Usage::new(25, 42)]
    );
    assert_eq!(server.requests()[0].body["stream"], true);

    let msg = m
        .stream_collect(&[Message::human("x")], &ChatOptions::new())
        .await
        .unwrap();
    assert_eq!(msg.tool_calls.len(), 1);
    assert_eq!(msg.tool_calls[0].id, "toolu_x");
    assert_eq!(msg.tool_calls[0].args, json!({"city": "Oslo"}));
    assert_eq!(msg.usage(), Some(Usage::new(25, 42)));
    assert_eq!(msg.finish_reason(), Some("tool_use"));
}

#[tokio::test]
async fn rate_limit_with_an_http_date_then_success() {
    let at = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(1));
    let server = MockServer::start(vec![
        MockReply::status(
            429,
            json!({"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}),
        )
        .with_header("retry-after", &at),
        MockReply::json(message(json!([{"type": "text", "text": "ok"}]), "end_turn")),
    ])
    .await;
    let m = model(&server)
        .invoke(&[Message::human("x")], &ChatOptions::new())
        .await
        .unwrap();
    assert_eq!(m.text(), "ok");
    assert_eq!(server.request_count(), 2);
}

#[tokio::test]
async fn overloaded_exhausts_the_attempts() {
    let overloaded = || {
        MockReply::status(
            529,
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        )
    };
    let server = MockServer::start(vec![overloaded(), overloaded(), overloaded()]).await;
    let err = model(&server)
        .invoke(&[Message::human("x")], &ChatOptions::new())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::Http { status: 529, attempts: 3, message, .. } if message == "Overloaded"),
        "{err:?}"
    );
    assert_eq!(err.kind(), ErrorKind::Server);
    assert_eq!(server.request_count(), 3);
}

#[tokio::test]
async fn bad_requests_are_not_retried() {
    let server = MockServer::start(vec![MockReply::status(
        400,
        json!({"type": "error", "error": {"type": "invalid_request_error", "message": "messages: roles must alternate"}}),
    )])
    .await;
    let err = model(&server)
        .invoke(&[Message::human("x")], &ChatOptions::new())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("roles must alternate"), "{err}");
    assert_eq!(err.kind(), ErrorKind::Rejected);
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn malformed_bodies_and_events_are_invalid_responses() {
    let server = MockServer::start(vec![
        MockReply::Raw {
            status: 200,
            body: b"<html>gateway</html>".to_vec(),
        },
        MockReply::sse(vec![
            "event: message_start\ndata: {\"type\": \"message_start\", \n\n".to_owned(),
        ]),
    ])
    .await;
    let m = model(&server);
    let err = m
        .invoke(&[Message::human("x")], &ChatOptions::new())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidResponse);
    assert!(err.to_string().contains("<html>gateway</html>"), "{err}");
    let (_, err) = collect(&m, &ChatOptions::new()).await;
    assert_eq!(err.map(|e| e.kind()), Some(ErrorKind::InvalidResponse));
}

#[tokio::test]
async fn truncated_streams_and_error_events() {
    let server = MockServer::start(vec![
        MockReply::sse(event_frames(&[
            start(),
            block_start(0, json!({"type": "text", "text": ""})),
            text_delta(0, "Hel"),
        ])),
        MockReply::sse_abort(event_frames(&[
            start(),
            block_start(0, json!({"type": "text", "text": ""})),
        ])),
        MockReply::sse(event_frames(&[
            start(),
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        ])),
    ])
    .await;
    let m = model(&server);
    let (chunks, err) = collect(&m, &ChatOptions::new()).await;
    assert_eq!(chunks.len(), 1);
    let err = err.unwrap();
    assert_eq!(err.kind(), ErrorKind::Truncated);
    assert!(err.to_string().contains("message_stop"), "{err}");
    let (_, err) = collect(&m, &ChatOptions::new()).await;
    assert_eq!(err.map(|e| e.kind()), Some(ErrorKind::Truncated));
    let (_, err) = collect(&m, &ChatOptions::new()).await;
    assert!(
        matches!(&err, Some(Error::Provider { message, .. }) if message == "Overloaded"),
        "{err:?}"
    );
}

#[tokio::test]
async fn one_hundred_tool_calls_streamed_and_whole() {
    let blocks: Vec<Value> = (0..100)
        .map(|i| json!({"type": "tool_use", "id": format!("toolu_{i}"), "name": "t", "input": {"i": i}}))
        .collect();
    let mut events = vec![start()];
    for i in 0..100usize {
        events.push(block_start(
            i,
            json!({"type": "tool_use", "id": format!("toolu_{i}"), "name": "t", "input": {}}),
        ));
        events.push(json_delta(i, "{\"i\":"));
        events.push(json_delta(i, &format!("{i}}}")));
        events.push(block_stop(i));
    }
    events.push(message_delta("tool_use", 900));
    events.push(stop());
    let server = MockServer::start(vec![
        MockReply::json(message(Value::Array(blocks), "tool_use")),
        MockReply::sse(event_frames(&events)),
    ])
    .await;
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
        for (i, c) in msg.tool_calls.iter().enumerate() {
            assert_eq!(c.id, format!("toolu_{i}"));
            assert_eq!(c.args, json!({"i": i}));
        }
    }
}

#[tokio::test]
async fn a_ten_megabyte_response_body() {
    let big = "y".repeat(10 * 1024 * 1024);
    let server = MockServer::start(vec![MockReply::json(message(
        json!([{"type": "text", "text": big}]),
        "max_tokens",
    ))])
    .await;
    let m = model(&server)
        .invoke(&[Message::human("x")], &ChatOptions::new())
        .await
        .unwrap();
    assert_eq!(m.text().len(), 10 * 1024 * 1024);
    assert_eq!(m.finish_reason(), Some("max_tokens"));
}

#[derive(Debug, serde::Deserialize, schemars::JsonSchema, PartialEq)]
struct Route {
    /// Which specialist handles the request.
    next: String,
}

#[tokio::test]
async fn structured_output_as_a_forced_tool_whole_and_streamed() {
    let server = MockServer::start(vec![
        MockReply::json(message(
            json!([{"type": "tool_use", "id": "toolu_s", "name": "Route", "input": {"next": "billing"}}]),
            "tool_use",
        )),
        MockReply::sse(event_frames(&[
            start(),
            block_start(
                0,
                json!({"type": "tool_use", "id": "toolu_s", "name": "Route", "input": {}}),
            ),
            json_delta(0, "{\"next\""),
            json_delta(0, ": \"support\"}"),
            block_stop(0),
            message_delta("tool_use", 9),
            stop(),
        ])),
    ])
    .await;
    let m = model(&server);
    let r: Route = m
        .invoke_structured(&[Message::human("route")], &ChatOptions::new())
        .await
        .unwrap();
    assert_eq!(r.next, "billing");
    let b = &server.requests()[0].body;
    assert_eq!(b["tool_choice"], json!({"type": "tool", "name": "Route"}));
    assert_eq!(
        b["tools"][0]["input_schema"]["properties"]["next"]["type"],
        "string"
    );

    let (format, validator) = graphloom_llm::prepare_structured::<Route>();
    let streamed = m
        .stream_collect(
            &[Message::human("route")],
            &ChatOptions::new().response_format(format),
        )
        .await
        .unwrap();
    assert!(streamed.tool_calls.is_empty());
    let r: Route = graphloom_llm::parse_structured(&streamed, &validator.unwrap()).unwrap();
    assert_eq!(r.next, "support");
}

#[tokio::test]
async fn openai_content_parts_become_anthropic_blocks() {
    let server = MockServer::start(vec![MockReply::json(message(
        json!([{"type": "text", "text": "Two cats."}]),
        "end_turn",
    ))])
    .await;
    let user: Message = serde_json::from_value(json!({"role": "user", "content": [
        {"type": "text", "text": "Compare"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
        {"type": "image_url", "image_url": {"url": "https://x.example/cat.png"}},
    ]}))
    .unwrap();
    let system: Message =
        serde_json::from_value(json!({"role": "system", "content": [{"type": "text", "text": "Be brief."}]}))
            .unwrap();
    let m = model(&server)
        .invoke(&[system, user], &ChatOptions::new())
        .await
        .unwrap();
    assert_eq!(m.text(), "Two cats.");
    let b = &server.requests()[0].body;
    assert_eq!(b["system"], "Be brief.");
    assert_eq!(
        b["messages"][0]["content"],
        json!([
            {"type": "text", "text": "Compare"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
            {"type": "image", "source": {"type": "url", "url": "https://x.example/cat.png"}},
        ])
    );
}
