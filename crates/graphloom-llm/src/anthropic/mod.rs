//! The Anthropic Messages provider (`POST {base}/v1/messages`).

mod wire;

use crate::chunk::{ChatChunk, ToolCallChunk};
use crate::error::{Error, Result};
use crate::http::{error_message, sse_stream, HttpSettings, RetryConfig, SseDecoder};
use crate::message::AiParts;
use crate::model::{ChatModel, ChunkStream};
use crate::options::ChatOptions;
use crate::telemetry::{traced_invoke, traced_stream};
use crate::usage::Usage;
use graphloom_core::Message;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use wire::{WireEvent, WireResponse};

/// Anthropic's API base URL.
pub const ANTHROPIC_BASE_URL: &str = "https://api.anthropic.com";
/// The API version sent in `anthropic-version`.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";
/// `max_tokens` sent when the call sets none (Anthropic requires one).
pub const DEFAULT_MAX_TOKENS: u32 = 4096;

const PROVIDER: &str = "anthropic";

#[derive(Debug, Clone)]
struct Config {
    model: String,
    http: HttpSettings,
    default_max_tokens: u32,
}

/// A Claude model behind the Anthropic Messages API.
///
/// System messages go to the separate `system` field; tool calls and results become
/// `tool_use` / `tool_result` blocks; consecutive turns of one role are merged. Structured
/// output is asked for as a forced tool call whose input is returned as the message text.
#[derive(Debug, Clone)]
pub struct AnthropicModel {
    cfg: Arc<Config>,
}

impl AnthropicModel {
    /// `model` at Anthropic ([`ANTHROPIC_BASE_URL`]), no API key yet.
    #[must_use]
    pub fn new(model: impl Into<String>) -> Self {
        let mut http = HttpSettings::new(ANTHROPIC_BASE_URL);
        // A constant, valid header value.
        let _ = http.set_header("anthropic-version", ANTHROPIC_VERSION, false);
        Self {
            cfg: Arc::new(Config {
                model: model.into(),
                http,
                default_max_tokens: DEFAULT_MAX_TOKENS,
            }),
        }
    }
    fn edit(mut self, f: impl FnOnce(&mut Config)) -> Self {
        f(Arc::make_mut(&mut self.cfg));
        self
    }
    /// Set the base URL (`/v1/messages` is appended).
    #[must_use]
    pub fn base_url(self, url: impl AsRef<str>) -> Self {
        let url = url.as_ref().trim_end_matches('/').to_owned();
        self.edit(|c| c.http.base_url = url)
    }
    /// Authenticate with `x-api-key`.
    pub fn api_key(self, key: impl AsRef<str>) -> Result<Self> {
        let mut err = None;
        let this = self.edit(|c| {
            if let Err(e) = c.http.set_header("x-api-key", key.as_ref(), true) {
                err = Some(e);
            }
        });
        err.map_or(Ok(this), Err)
    }
    /// Send an extra header with every request (for example `anthropic-beta`).
    pub fn header(self, name: &str, value: &str) -> Result<Self> {
        let mut err = None;
        let this = self.edit(|c| {
            if let Err(e) = c.http.set_header(name, value, false) {
                err = Some(e);
            }
        });
        err.map_or(Ok(this), Err)
    }
    /// Set the retry policy.
    #[must_use]
    pub fn retry(self, retry: RetryConfig) -> Self {
        self.edit(|c| c.http.retry = retry)
    }
    /// Set the default time limit of one attempt.
    #[must_use]
    pub fn timeout(self, d: Duration) -> Self {
        self.edit(|c| c.http.timeout = d)
    }
    /// Set the largest response body accepted.
    #[must_use]
    pub fn max_response_bytes(self, n: usize) -> Self {
        self.edit(|c| c.http.max_response_bytes = n)
    }
    /// Set the `max_tokens` used when a call sets none.
    #[must_use]
    pub fn default_max_tokens(self, n: u32) -> Self {
        self.edit(|c| c.default_max_tokens = n)
    }
    /// Use this `reqwest` client.
    #[must_use]
    pub fn http_client(self, client: reqwest::Client) -> Self {
        self.edit(|c| c.http.client = client)
    }
    /// The endpoint requests go to.
    #[must_use]
    pub fn endpoint(&self) -> String {
        self.cfg.http.url("/v1/messages")
    }
}

fn provider_error(err: &Value) -> Error {
    Error::Provider {
        provider: PROVIDER.to_owned(),
        message: error_message(serde_json::json!({ "error": err }).to_string().as_bytes()),
    }
}

fn parse_response(body: &[u8], structured: Option<&str>) -> Result<Message> {
    let text = || String::from_utf8_lossy(body).into_owned();
    let resp: WireResponse = serde_json::from_slice(body)
        .map_err(|e| Error::invalid_response(PROVIDER, format!("not a message: {e}"), &text()))?;
    if let Some(err) = &resp.error {
        return Err(provider_error(err));
    }
    if resp.id.is_none() && resp.content.is_empty() && resp.stop_reason.is_none() {
        return Err(Error::invalid_response(
            PROVIDER,
            "the response has no content",
            &text(),
        ));
    }
    let mut parts = AiParts {
        id: resp.id,
        model: resp.model,
        usage: resp.usage.map(|u| u.usage()),
        finish_reason: resp.stop_reason,
        provider: PROVIDER.to_owned(),
        ..AiParts::default()
    };
    for block in &resp.content {
        match block.get("type").and_then(Value::as_str) {
            Some("text") => parts
                .text
                .push_str(block.get("text").and_then(Value::as_str).unwrap_or("")),
            Some("tool_use") => {
                let name = block.get("name").and_then(Value::as_str).map(str::to_owned);
                let input = block.get("input").cloned().unwrap_or(Value::Null);
                if structured.is_some() && name.as_deref() == structured {
                    parts.text = input.to_string();
                    continue;
                }
                let id = block.get("id").and_then(Value::as_str).map(str::to_owned);
                let args = if input.is_null() {
                    String::new()
                } else {
                    input.to_string()
                };
                parts.push_raw_call(id, name, &args);
            }
            _ => {}
        }
    }
    Ok(parts.into_message())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Block {
    Text,
    Tool,
    /// The forced tool carrying structured output: its input streams as text.
    Structured,
    Other,
}

#[derive(Default)]
struct Decoder {
    structured: Option<String>,
    id: Option<String>,
    model: Option<String>,
    input_tokens: u64,
    blocks: HashMap<usize, Block>,
    started: bool,
    done: bool,
}

impl Decoder {
    fn chunk(&self) -> ChatChunk {
        ChatChunk {
            id: self.id.clone(),
            model: self.model.clone(),
            ..ChatChunk::default()
        }
    }
}

impl SseDecoder for Decoder {
    fn on_event(&mut self, _event: &str, data: &str) -> Result<Vec<ChatChunk>> {
        let ev: WireEvent = serde_json::from_str(data)
            .map_err(|e| Error::invalid_response(PROVIDER, format!("bad stream event: {e}"), data))?;
        let mut out = Vec::new();
        match ev.kind.as_str() {
            "message_start" => {
                self.started = true;
                if let Some(m) = ev.message {
                    self.id = m.id;
                    self.model = m.model;
                    self.input_tokens = m.usage.and_then(|u| u.input()).unwrap_or(0);
                }
            }
            "content_block_start" => {
                let index = ev.index.unwrap_or(self.blocks.len());
                let block = ev.content_block.unwrap_or(Value::Null);
                let kind = match block.get("type").and_then(Value::as_str) {
                    Some("text") => Block::Text,
                    Some("tool_use") => {
                        let name = block.get("name").and_then(Value::as_str);
                        if name.is_some() && name == self.structured.as_deref() {
                            Block::Structured
                        } else {
                            Block::Tool
                        }
                    }
                    _ => Block::Other,
                };
                self.blocks.insert(index, kind);
                let mut c = self.chunk();
                match kind {
                    Block::Text => {
                        c.text = block.get("text").and_then(Value::as_str).unwrap_or("").to_owned();
                    }
                    Block::Tool => {
                        let initial = block
                            .get("input")
                            .filter(|i| i.as_object().is_some_and(|o| !o.is_empty()))
                            .map(Value::to_string)
                            .unwrap_or_default();
                        c.tool_call_chunks.push(ToolCallChunk {
                            index,
                            id: block.get("id").and_then(Value::as_str).map(str::to_owned),
                            name: block.get("name").and_then(Value::as_str).map(str::to_owned),
                            args: initial,
                        });
                    }
                    Block::Structured | Block::Other => {}
                }
                if !c.is_empty() {
                    out.push(c);
                }
            }
            "content_block_delta" => {
                let index = ev.index.unwrap_or(0);
                let delta = ev.delta.unwrap_or(Value::Null);
                let kind = self.blocks.get(&index).copied().unwrap_or(Block::Other);
                let mut c = self.chunk();
                match delta.get("type").and_then(Value::as_str) {
                    Some("text_delta") => {
                        c.text = delta.get("text").and_then(Value::as_str).unwrap_or("").to_owned();
                    }
                    Some("input_json_delta") => {
                        let piece = delta.get("partial_json").and_then(Value::as_str).unwrap_or("");
                        if kind == Block::Structured {
                            c.text = piece.to_owned();
                        } else {
                            c.tool_call_chunks.push(ToolCallChunk {
                                index,
                                id: None,
                                name: None,
                                args: piece.to_owned(),
                            });
                        }
                    }
                    _ => {}
                }
                if !c.is_empty() {
                    out.push(c);
                }
            }
            "message_delta" => {
                let mut c = self.chunk();
                c.finish_reason = ev
                    .delta
                    .as_ref()
                    .and_then(|d| d.get("stop_reason"))
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                let u = ev.usage.unwrap_or_default();
                let input = u.input().unwrap_or(0).max(self.input_tokens);
                c.usage = Some(Usage::new(input, u.output_tokens.unwrap_or(0)));
                out.push(c);
            }
            "message_stop" => self.done = true,
            "error" => {
                return Err(provider_error(&ev.error.unwrap_or(Value::Null)));
            }
            _ => {}
        }
        Ok(out)
    }
    fn is_done(&self) -> bool {
        self.done
    }
    fn on_eof(&mut self) -> Result<Vec<ChatChunk>> {
        if self.done {
            Ok(Vec::new())
        } else if self.started {
            Err(Error::truncated(
                PROVIDER,
                "the stream ended before `message_stop`",
            ))
        } else {
            Err(Error::truncated(
                PROVIDER,
                "the stream ended before `message_start`",
            ))
        }
    }
}

impl ChatModel for AnthropicModel {
    fn model_name(&self) -> &str {
        &self.cfg.model
    }
    fn provider(&self) -> &str {
        PROVIDER
    }
    async fn invoke(&self, messages: &[Message], options: &ChatOptions) -> Result<Message> {
        if let Some(rt) = graphloom_core::message_stream::current() {
            // A node's run streams `messages`: stream, forward the tokens, assemble.
            return crate::stream_into::invoke_forwarded(rt, self, messages, options).await;
        }
        let cfg = &self.cfg;
        traced_invoke(PROVIDER, &cfg.model, async {
            let (body, structured) =
                wire::request_body(&cfg.model, messages, options, cfg.default_max_tokens, false);
            let bytes = cfg
                .http
                .post_json(PROVIDER, &self.endpoint(), &body, options.timeout)
                .await?;
            parse_response(&bytes, structured.as_deref())
        })
        .await
    }
    fn stream(&self, messages: &[Message], options: &ChatOptions) -> ChunkStream {
        if let Some(rt) = graphloom_core::message_stream::current() {
            return crate::stream_into::forwarded(rt, self, messages, options);
        }
        let cfg = &self.cfg;
        let (body, structured) =
            wire::request_body(&cfg.model, messages, options, cfg.default_max_tokens, true);
        let connect = cfg
            .http
            .open_stream(PROVIDER.to_owned(), self.endpoint(), body, options.timeout);
        let decoder = Decoder {
            structured,
            ..Decoder::default()
        };
        let stream = sse_stream(
            PROVIDER.to_owned(),
            connect,
            decoder,
            options.timeout.unwrap_or(cfg.http.timeout),
        );
        traced_stream(PROVIDER, &cfg.model, stream)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::{ResponseFormat, ToolChoice, ToolSpec};
    use graphloom_core::ToolCall;
    use serde_json::json;

    #[test]
    fn system_apart_tool_results_merged_into_one_user_turn() {
        let msgs = vec![
            Message::system("be brief"),
            Message::human("weather in Oslo and Rome?"),
            Message::ai_with_tool_calls(
                "",
                vec![
                    ToolCall {
                        id: "t1".into(),
                        name: "weather".into(),
                        args: json!({"city": "Oslo"}),
                    },
                    ToolCall {
                        id: "t2".into(),
                        name: "weather".into(),
                        args: json!({"city": "Rome"}),
                    },
                ],
            ),
            Message::tool("cold", "t1"),
            Message::tool("warm", "t2"),
        ];
        let opts = ChatOptions::new()
            .tools([ToolSpec::new("weather", "w", json!({"type": "object"}))])
            .tool_choice(ToolChoice::Required);
        let (body, structured) = wire::request_body("claude-x", &msgs, &opts, 100, false);
        assert!(structured.is_none());
        assert_eq!(body["system"], "be brief");
        assert_eq!(body["max_tokens"], 100);
        let turns = body["messages"].as_array().cloned().unwrap_or_default();
        assert_eq!(turns.len(), 3);
        assert_eq!(turns[1]["role"], "assistant");
        assert_eq!(turns[1]["content"][0]["type"], "tool_use");
        assert_eq!(turns[2]["role"], "user");
        assert_eq!(turns[2]["content"].as_array().map(Vec::len), Some(2));
        assert_eq!(turns[2]["content"][1]["tool_use_id"], "t2");
        assert_eq!(body["tool_choice"], json!({"type": "any"}));
        assert_eq!(body["tools"][0]["input_schema"], json!({"type": "object"}));
    }

    #[test]
    fn structured_output_is_a_forced_tool_read_back_as_text() {
        let opts = ChatOptions::new().response_format(ResponseFormat {
            name: "Plan".into(),
            schema: json!({"type": "object"}),
            strict: false,
        });
        let (body, structured) = wire::request_body("c", &[Message::human("x")], &opts, 10, false);
        assert_eq!(structured.as_deref(), Some("Plan"));
        assert_eq!(body["tool_choice"], json!({"type": "tool", "name": "Plan"}));
        let resp = json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "c",
            "content": [{"type": "tool_use", "id": "tu", "name": "Plan", "input": {"a": 1}}],
            "stop_reason": "tool_use", "usage": {"input_tokens": 3, "output_tokens": 4}});
        let m = parse_response(resp.to_string().as_bytes(), Some("Plan"));
        let m = m.unwrap_or_else(|e| panic!("{e}"));
        assert!(m.tool_calls.is_empty());
        assert_eq!(m.text(), r#"{"a":1}"#);
    }
}
