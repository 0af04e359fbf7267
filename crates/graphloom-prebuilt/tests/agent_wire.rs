//! `create_agent` against local servers speaking the OpenAI and Anthropic wire formats,
//! answering badly: malformed tool-call JSON, unknown tools, a 10 MB answer, a truncated
//! stream. The agent gets a typed error or an error tool message, never a panic, and the
//! run stays resumable. Structured output over both providers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../../graphloom-llm/tests/common/mod.rs"]
mod common;

use common::{data_frames, event_frames, MockReply, MockServer};
use futures::StreamExt;
use graphloom_core::checkpoint::InMemorySaver;
use graphloom_core::{Message, MessageKind, RunConfig, RunEvent, RunInput, StreamMode, StreamOptions};
use graphloom_llm::{AnthropicModel, ErrorKind, OpenAiModel, RetryConfig};
use graphloom_prebuilt::middleware::retry::{Backoff, ModelRetry};
use graphloom_prebuilt::{create_agent, AgentGraphUpdate, FnTool, StructuredOutput, ToolError};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

fn retry() -> RetryConfig {
    RetryConfig::default()
        .max_attempts(1)
        .initial_backoff(Duration::from_millis(1))
        .max_backoff(Duration::from_millis(2))
}

fn openai(server: &MockServer) -> Arc<OpenAiModel> {
    Arc::new(
        OpenAiModel::new("gpt-4o-mini")
            .base_url(server.v1())
            .api_key("k")
            .unwrap()
            .retry(retry()),
    )
}

fn anthropic(server: &MockServer) -> Arc<AnthropicModel> {
    Arc::new(
        AnthropicModel::new("claude-sonnet-4-5")
            .base_url(&server.base)
            .api_key("k")
            .unwrap()
            .retry(retry()),
    )
}

/// A completion under a fresh id (a provider never reuses one; an agent merges messages
/// by id).
fn completion(message: Value, finish: &str) -> Value {
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let id = format!(
        "chatcmpl-{}",
        N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    );
    json!({
        "id": id, "object": "chat.completion", "model": "gpt-4o-mini",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}
    })
}

fn text(t: &str) -> Value {
    completion(json!({"role": "assistant", "content": t}), "stop")
}

fn anthropic_message(content: Value, stop: &str) -> Value {
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let id = format!("msg_{}", N.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    json!({"id": id, "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
        "content": content, "stop_reason": stop, "stop_sequence": null,
        "usage": {"input_tokens": 12, "output_tokens": 6}})
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Query {
    /// What to look up.
    q: String,
}

fn lookup() -> FnTool {
    FnTool::new("lookup", "Look up", |a: Query, _rt| async move {
        Ok::<_, ToolError>(format!("found {}", a.q))
    })
}

fn input(t: &str) -> AgentGraphUpdate {
    AgentGraphUpdate::new().messages(vec![Message::human(t)])
}

#[tokio::test]
async fn malformed_tool_json_and_unknown_tools_are_answered_with_tool_errors() {
    let server = MockServer::start(vec![
        MockReply::json(completion(
            json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{\"q\": \"a"}},
                {"id": "c2", "type": "function", "function": {"name": "nope", "arguments": "{}"}},
                {"id": "c3", "type": "function", "function": {"name": "lookup", "arguments": "{\"q\": \"b\"}"}}
            ]}),
            "tool_calls",
        )),
        MockReply::json(text("recovered")),
    ])
    .await;
    let agent = create_agent(openai(&server), [lookup().arc()]).build().unwrap();
    let out = agent.invoke(input("go"), RunConfig::default()).await.unwrap();
    let msgs: Vec<&Message> = out.values.messages.iter().collect();
    let tools: Vec<(&str, String, &Value)> = msgs
        .iter()
        .filter(|m| m.kind == MessageKind::Tool)
        .map(|m| (m.tool_call_id.as_deref().unwrap(), m.text(), &m.extra["status"]))
        .collect();
    assert_eq!(tools.len(), 3, "{tools:?}");
    assert!(tools
        .iter()
        .any(|(id, t, s)| *id == "c2" && t.contains("`nope` is not a valid tool") && *s == "error"));
    assert!(tools
        .iter()
        .any(|(id, t, s)| *id == "c1" && t.contains("not valid JSON") && *s == "error"));
    assert!(tools.iter().any(|(id, t, _)| *id == "c3" && t == "found b"));
    assert_eq!(msgs.last().unwrap().text(), "recovered");
    // The model saw every error on its next call.
    let second = &server.requests()[1].body["messages"];
    assert_eq!(
        second
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] == "tool")
            .count(),
        3
    );
}

#[tokio::test]
async fn a_ten_megabyte_answer_and_a_ten_megabyte_tool_result_do_not_break_the_run() {
    let big = "x".repeat(10 * 1024 * 1024);
    let server = MockServer::start(vec![
        MockReply::json(completion(
            json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "huge", "arguments": "{}"}}
            ]}),
            "tool_calls",
        )),
        MockReply::json(text(&big)),
    ])
    .await;
    let b2 = big.clone();
    let huge = FnTool::new(
        "huge",
        "Returns a lot",
        move |_a: serde_json::Map<String, Value>, _rt| {
            let b = b2.clone();
            async move { Ok::<_, ToolError>(b) }
        },
    );
    let agent = create_agent(openai(&server), [huge.arc()])
        .checkpointer(InMemorySaver::new())
        .build()
        .unwrap();
    let out = agent.invoke(input("go"), RunConfig::thread("big")).await.unwrap();
    // The tool's result is over the cap: the model reads an error, not 10 MB.
    let tool = out.values.messages.get(2).unwrap();
    assert!(
        tool.text().contains("over the limit"),
        "{}",
        &tool.text()[..200.min(tool.text().len())]
    );
    let sent = serde_json::to_string(&server.requests()[1].body).unwrap();
    assert!(sent.len() < 1024 * 1024);
    // The model's own 10 MB answer is kept whole.
    assert_eq!(out.values.messages.last().unwrap().text().len(), big.len());

    // Over a provider's response cap, the answer is a typed error and the run resumable.
    let server = MockServer::start(vec![MockReply::json(text(&big)), MockReply::json(text("small"))]).await;
    let capped = Arc::new(
        OpenAiModel::new("gpt-4o-mini")
            .base_url(server.v1())
            .api_key("k")
            .unwrap()
            .retry(retry())
            .max_response_bytes(1024 * 1024),
    );
    let agent = create_agent(capped, [])
        .checkpointer(InMemorySaver::new())
        .build()
        .unwrap();
    let cfg = RunConfig::thread("capped");
    let err = agent.invoke(input("go"), cfg.clone()).await.unwrap_err();
    let llm = err.find_source::<graphloom_llm::Error>().expect("typed");
    assert_eq!(llm.kind(), ErrorKind::InvalidResponse, "{err}");
    let out = agent.invoke_input(RunInput::Continue, cfg).await.unwrap();
    assert_eq!(out.values.messages.last().unwrap().text(), "small");
}

fn stream_chunk(delta: Value, finish: Option<&str>) -> Value {
    json!({"id": "s", "object": "chat.completion.chunk", "model": "gpt-4o-mini",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
}

async fn run_streaming(
    agent: &graphloom_core::CompiledGraph<graphloom_prebuilt::AgentGraphState>,
    input: RunInput<graphloom_prebuilt::AgentGraphState>,
    cfg: RunConfig,
) -> (String, Option<graphloom_core::Error>) {
    let mut s = agent.stream(
        input,
        cfg,
        StreamOptions::modes([StreamMode::Messages, StreamMode::Values]),
    );
    let mut tokens = String::new();
    let mut error = None;
    while let Some(ev) = s.next().await {
        match ev {
            RunEvent::Part(p) if p.mode == StreamMode::Messages => {
                tokens.push_str(p.data_json().unwrap()[0]["content"].as_str().unwrap_or_default());
            }
            RunEvent::End(Err(e)) => error = Some(e),
            _ => {}
        }
    }
    (tokens, error)
}

#[tokio::test]
async fn a_truncated_stream_is_a_typed_error_and_the_run_resumes() {
    let cut = data_frames(&[
        stream_chunk(json!({"role": "assistant", "content": "Hel"}), None),
        stream_chunk(json!({"content": "lo"}), None),
    ]);
    let mut whole = data_frames(&[
        stream_chunk(json!({"role": "assistant", "content": "Hello"}), None),
        stream_chunk(json!({}), Some("stop")),
    ]);
    whole.push("data: [DONE]\n\n".to_owned());
    let server = MockServer::start(vec![MockReply::sse_abort(cut), MockReply::sse(whole.clone())]).await;
    let agent = create_agent(openai(&server), [])
        .checkpointer(InMemorySaver::new())
        .build()
        .unwrap();
    let cfg = RunConfig::thread("cut");
    let (_, error) = run_streaming(&agent, RunInput::Update(input("hi")), cfg.clone()).await;
    let error = error.expect("the run fails");
    let llm = error.find_source::<graphloom_llm::Error>().expect("typed");
    assert_eq!(llm.kind(), ErrorKind::Truncated, "{error}");
    let snap = agent.get_state(&cfg).await.unwrap();
    assert_eq!(snap.next, vec!["model".to_owned()]);
    let (tokens, error) = run_streaming(&agent, RunInput::Continue, cfg.clone()).await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(tokens, "Hello");
    let snap = agent.get_state(&cfg).await.unwrap();
    assert_eq!(snap.values.messages.len(), 2);

    // With ModelRetry, the cut is retried inside the run.
    let cut = data_frames(&[stream_chunk(json!({"role": "assistant", "content": "Hel"}), None)]);
    let server = MockServer::start(vec![MockReply::sse_abort(cut), MockReply::sse(whole)]).await;
    let agent = create_agent(openai(&server), [])
        .middleware(ModelRetry::new().backoff(Backoff::none()))
        .build()
        .unwrap();
    let (_, error) = run_streaming(&agent, RunInput::Update(input("hi")), RunConfig::default()).await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(server.request_count(), 2);
}

#[tokio::test]
async fn anthropic_truncated_stream_and_malformed_tool_input() {
    let frames = event_frames(&[
        json!({"type": "message_start", "message": {"id": "m", "type": "message", "role": "assistant",
            "model": "claude-sonnet-4-5", "content": [], "stop_reason": null, "usage": {"input_tokens": 5, "output_tokens": 1}}}),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "t1", "name": "lookup", "input": {}}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "{\"q\": \"un"}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null}, "usage": {"output_tokens": 3}}),
        json!({"type": "message_stop"}),
    ]);
    let cut = event_frames(&[
        json!({"type": "message_start", "message": {"id": "m", "type": "message",
        "role": "assistant", "model": "claude-sonnet-4-5", "content": [], "stop_reason": null,
        "usage": {"input_tokens": 5, "output_tokens": 1}}}),
    ]);
    let fine = event_frames(&[
        json!({"type": "message_start", "message": {"id": "m2", "type": "message", "role": "assistant",
            "model": "claude-sonnet-4-5", "content": [], "stop_reason": null, "usage": {"input_tokens": 5, "output_tokens": 1}}}),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "sorry"}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": null}, "usage": {"output_tokens": 2}}),
        json!({"type": "message_stop"}),
    ]);
    let server = MockServer::start(vec![
        MockReply::sse(frames),
        MockReply::sse_abort(cut),
        MockReply::sse(fine),
    ])
    .await;
    let agent = create_agent(anthropic(&server), [lookup().arc()])
        .checkpointer(InMemorySaver::new())
        .build()
        .unwrap();
    let cfg = RunConfig::thread("ant");
    let (_, error) = run_streaming(&agent, RunInput::Update(input("go")), cfg.clone()).await;
    let error = error.expect("the second call is cut");
    assert_eq!(
        error.find_source::<graphloom_llm::Error>().unwrap().kind(),
        ErrorKind::Truncated
    );
    // The malformed tool input was answered with an error before the cut.
    let snap = agent.get_state(&cfg).await.unwrap();
    let tool = snap
        .values
        .messages
        .iter()
        .find(|m| m.kind == MessageKind::Tool)
        .unwrap();
    assert!(tool.text().contains("not valid JSON"), "{}", tool.text());
    let (tokens, error) = run_streaming(&agent, RunInput::Continue, cfg).await;
    assert!(error.is_none());
    assert_eq!(tokens, "sorry");
}

#[derive(Debug, serde::Deserialize, schemars::JsonSchema, PartialEq)]
struct Verdict {
    /// Whether the claim holds.
    valid: bool,
    /// Why.
    reason: String,
}

#[tokio::test]
async fn structured_output_over_openai_json_schema_and_anthropic_tool_use() {
    // Provider strategy over OpenAI: `response_format: json_schema`.
    let server = MockServer::start(vec![MockReply::json(text(
        r#"{"valid": true, "reason": "checked"}"#,
    ))])
    .await;
    let agent = create_agent(openai(&server), [])
        .response_format(StructuredOutput::provider::<Verdict>())
        .build()
        .unwrap();
    let out = agent.invoke(input("is it?"), RunConfig::default()).await.unwrap();
    assert_eq!(
        out.values.structured::<Verdict>(),
        Some(Verdict {
            valid: true,
            reason: "checked".into()
        })
    );
    let body = &server.requests()[0].body;
    assert_eq!(body["response_format"]["type"], "json_schema");
    assert_eq!(body["response_format"]["json_schema"]["name"], "Verdict");
    // A bad answer with the provider strategy is a typed error.
    let server = MockServer::start(vec![MockReply::json(text(r#"{"valid": "yes"}"#))]).await;
    let agent = create_agent(openai(&server), [])
        .response_format(StructuredOutput::provider::<Verdict>())
        .build()
        .unwrap();
    let err = agent
        .invoke(input("is it?"), RunConfig::default())
        .await
        .unwrap_err();
    assert_eq!(
        err.find_source::<graphloom_llm::Error>().unwrap().kind(),
        ErrorKind::StructuredOutput
    );

    // Tool strategy over Anthropic: a wrong answer is sent back with the error, then fixed.
    let server = MockServer::start(vec![
        MockReply::json(anthropic_message(
            json!([{"type": "tool_use", "id": "s1", "name": "Verdict", "input": {"valid": "maybe"}}]),
            "tool_use",
        )),
        MockReply::json(anthropic_message(
            json!([{"type": "tool_use", "id": "s2", "name": "Verdict", "input": {"valid": false, "reason": "no source"}}]),
            "tool_use",
        )),
    ])
    .await;
    let agent = create_agent(anthropic(&server), [lookup().arc()])
        .response_format(StructuredOutput::tool::<Verdict>())
        .build()
        .unwrap();
    let out = agent.invoke(input("is it?"), RunConfig::default()).await.unwrap();
    assert_eq!(
        out.values.structured::<Verdict>(),
        Some(Verdict {
            valid: false,
            reason: "no source".into()
        })
    );
    let reqs = server.requests();
    assert_eq!(reqs[0].body["tool_choice"], json!({"type": "any"}));
    let tools: Vec<&str> = reqs[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(tools, vec!["lookup", "Verdict"]);
    let retry = out.values.messages.get(2).unwrap();
    assert!(
        retry
            .text()
            .starts_with("Error: Failed to parse structured output for tool 'Verdict'"),
        "{}",
        retry.text()
    );
    assert!(retry.text().ends_with("\n Please fix your mistakes."));
    let last = out.values.messages.last().unwrap();
    assert_eq!(last.kind, MessageKind::Tool);
    assert!(last.text().starts_with("Returning structured response: "));
}
