//! The OpenAI-compatible Chat Completions provider: OpenAI, Ollama, vLLM, LiteLLM,
//! OpenRouter, Groq and every other server that speaks `POST {base}/chat/completions`.

mod wire;

pub use wire::MaxTokensField;

use crate::chunk::ChatChunk;
use crate::error::{Error, Result};
use crate::http::{sse_stream, HttpSettings, RetryConfig, SseDecoder};
use crate::message::AiParts;
use crate::model::{ChatModel, ChunkStream};
use crate::options::ChatOptions;
use crate::telemetry::{traced_invoke, traced_stream};
use crate::usage::Usage;
use graphloom_core::Message;
use std::sync::Arc;
use std::time::Duration;
use wire::{WireChunk, WireResponse};

/// OpenAI's API base URL.
pub const OPENAI_BASE_URL: &str = "https://api.openai.com/v1";

#[derive(Debug, Clone)]
struct Config {
    model: String,
    provider: String,
    http: HttpSettings,
    stream_usage: bool,
    max_tokens_field: MaxTokensField,
}

/// A model behind an OpenAI-compatible Chat Completions endpoint.
///
/// ```no_run
/// use graphloom_llm::{ChatModel, ChatOptions, Message, OpenAiModel};
/// # async fn demo() -> graphloom_llm::Result<()> {
/// let model = OpenAiModel::new("llama3.2").base_url("http://127.0.0.1:11434/v1").provider_name("ollama");
/// let answer = model.invoke(&[Message::human("hi")], &ChatOptions::new().temperature(0.0)).await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct OpenAiModel {
    cfg: Arc<Config>,
}

impl OpenAiModel {
    /// `model` at OpenAI ([`OPENAI_BASE_URL`]), no API key yet.
    #[must_use]
    pub fn new(model: impl Into<String>) -> Self {
        Self {
            cfg: Arc::new(Config {
                model: model.into(),
                provider: "openai".into(),
                http: HttpSettings::new(OPENAI_BASE_URL),
                stream_usage: true,
                max_tokens_field: MaxTokensField::MaxTokens,
            }),
        }
    }
    fn edit(mut self, f: impl FnOnce(&mut Config)) -> Self {
        f(Arc::make_mut(&mut self.cfg));
        self
    }
    /// Set the base URL (`.../v1`; `/chat/completions` is appended).
    #[must_use]
    pub fn base_url(self, url: impl AsRef<str>) -> Self {
        let url = url.as_ref().trim_end_matches('/').to_owned();
        self.edit(|c| c.http.base_url = url)
    }
    /// Authenticate with `Authorization: Bearer <key>`.
    pub fn api_key(self, key: impl AsRef<str>) -> Result<Self> {
        let value = format!("Bearer {}", key.as_ref());
        let mut err = None;
        let this = self.edit(|c| {
            if let Err(e) = c.http.set_header("authorization", &value, true) {
                err = Some(e);
            }
        });
        err.map_or(Ok(this), Err)
    }
    /// Send an extra header with every request (for example OpenRouter's `HTTP-Referer`).
    pub fn header(self, name: &str, value: &str) -> Result<Self> {
        let mut err = None;
        let this = self.edit(|c| {
            if let Err(e) = c.http.set_header(name, value, false) {
                err = Some(e);
            }
        });
        err.map_or(Ok(this), Err)
    }
    /// Name the provider in errors, usage events and response metadata (default `openai`).
    #[must_use]
    pub fn provider_name(self, name: impl Into<String>) -> Self {
        let name = name.into();
        self.edit(|c| c.provider = name)
    }
    /// Set the retry policy.
    #[must_use]
    pub fn retry(self, retry: RetryConfig) -> Self {
        self.edit(|c| c.http.retry = retry)
    }
    /// Set the default time limit of one attempt (a call's `timeout` option overrides it).
    #[must_use]
    pub fn timeout(self, d: Duration) -> Self {
        self.edit(|c| c.http.timeout = d)
    }
    /// Set the largest response body accepted.
    #[must_use]
    pub fn max_response_bytes(self, n: usize) -> Self {
        self.edit(|c| c.http.max_response_bytes = n)
    }
    /// Ask for usage in streams (`stream_options.include_usage`, default on). Turn it off
    /// for servers that reject the option.
    #[must_use]
    pub fn stream_usage(self, on: bool) -> Self {
        self.edit(|c| c.stream_usage = on)
    }
    /// How to name the output-token limit in requests.
    #[must_use]
    pub fn max_tokens_field(self, field: MaxTokensField) -> Self {
        self.edit(|c| c.max_tokens_field = field)
    }
    /// Use this `reqwest` client (proxies, custom TLS roots, connection pools).
    #[must_use]
    pub fn http_client(self, client: reqwest::Client) -> Self {
        self.edit(|c| c.http.client = client)
    }
    /// The endpoint requests go to.
    #[must_use]
    pub fn endpoint(&self) -> String {
        self.cfg.http.url("/chat/completions")
    }
}

fn parse_response(provider: &str, body: &[u8]) -> Result<Message> {
    let text = || String::from_utf8_lossy(body).into_owned();
    let resp: WireResponse = serde_json::from_slice(body)
        .map_err(|e| Error::invalid_response(provider, format!("not a chat completion: {e}"), &text()))?;
    if let Some(err) = resp.error {
        return Err(Error::Provider {
            provider: provider.to_owned(),
            message: crate::http::error_message(err.to_string().as_bytes()),
        });
    }
    let Some(choice) = resp.choices.into_iter().next() else {
        return Err(Error::invalid_response(
            provider,
            "the response has no choices",
            &text(),
        ));
    };
    let mut parts = AiParts {
        id: resp.id,
        model: resp.model,
        usage: resp.usage.as_ref().map(Usage::from),
        finish_reason: choice.finish_reason,
        provider: provider.to_owned(),
        ..AiParts::default()
    };
    if let Some(m) = choice.message {
        parts.text = match m.content {
            Some(serde_json::Value::String(s)) => s,
            Some(serde_json::Value::Array(parts)) => parts
                .iter()
                .filter_map(|p| p.get("text").and_then(serde_json::Value::as_str))
                .collect(),
            _ => m.refusal.unwrap_or_default(),
        };
        for call in m.tool_calls.unwrap_or_default() {
            let args = call.arguments_text();
            let name = call.function.as_ref().and_then(|f| f.name.clone());
            parts.push_raw_call(call.id, name, &args);
        }
    }
    Ok(parts.into_message())
}

struct Decoder {
    provider: String,
    include_usage: bool,
    done: bool,
    saw_finish: bool,
    saw_usage: bool,
}

impl SseDecoder for Decoder {
    fn on_event(&mut self, _event: &str, data: &str) -> Result<Vec<ChatChunk>> {
        let data = data.trim();
        if data == "[DONE]" {
            self.done = true;
            return Ok(Vec::new());
        }
        if data.is_empty() {
            return Ok(Vec::new());
        }
        let chunk: WireChunk = serde_json::from_str(data)
            .map_err(|e| Error::invalid_response(&self.provider, format!("bad stream chunk: {e}"), data))?;
        if let Some(err) = &chunk.error {
            return Err(Error::Provider {
                provider: self.provider.clone(),
                message: crate::http::error_message(err.to_string().as_bytes()),
            });
        }
        let c = chunk.into_chunk();
        self.saw_finish |= c.finish_reason.is_some();
        self.saw_usage |= c.usage.is_some();
        Ok(if c.is_empty() { Vec::new() } else { vec![c] })
    }
    fn is_done(&self) -> bool {
        self.done
    }
    fn on_eof(&mut self) -> Result<Vec<ChatChunk>> {
        if self.done || (self.saw_finish && (self.saw_usage || !self.include_usage)) {
            Ok(Vec::new())
        } else {
            Err(Error::truncated(
                &self.provider,
                "the stream ended before `data: [DONE]`",
            ))
        }
    }
}

impl ChatModel for OpenAiModel {
    fn model_name(&self) -> &str {
        &self.cfg.model
    }
    fn provider(&self) -> &str {
        &self.cfg.provider
    }
    async fn invoke(&self, messages: &[Message], options: &ChatOptions) -> Result<Message> {
        if let Some(rt) = graphloom_core::message_stream::current() {
            // A node's run streams `messages`: stream, forward the tokens, assemble.
            return crate::stream_into::invoke_forwarded(rt, self, messages, options).await;
        }
        let cfg = &self.cfg;
        traced_invoke(&cfg.provider, &cfg.model, async {
            let body = wire::request_body(&cfg.model, messages, options, None, cfg.max_tokens_field);
            let bytes = cfg
                .http
                .post_json(&cfg.provider, &self.endpoint(), &body, options.timeout)
                .await?;
            parse_response(&cfg.provider, &bytes)
        })
        .await
    }
    fn stream(&self, messages: &[Message], options: &ChatOptions) -> ChunkStream {
        if let Some(rt) = graphloom_core::message_stream::current() {
            return crate::stream_into::forwarded(rt, self, messages, options);
        }
        let cfg = &self.cfg;
        let body = wire::request_body(
            &cfg.model,
            messages,
            options,
            Some(cfg.stream_usage),
            cfg.max_tokens_field,
        );
        let connect = cfg
            .http
            .open_stream(cfg.provider.clone(), self.endpoint(), body, options.timeout);
        let decoder = Decoder {
            provider: cfg.provider.clone(),
            include_usage: cfg.stream_usage,
            done: false,
            saw_finish: false,
            saw_usage: false,
        };
        let stream = sse_stream(
            cfg.provider.clone(),
            connect,
            decoder,
            options.timeout.unwrap_or(cfg.http.timeout),
        );
        traced_stream(&cfg.provider, &cfg.model, stream)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lenient_about_what_compatible_servers_leave_out() {
        let mut d = Decoder {
            provider: "vllm".into(),
            include_usage: true,
            done: false,
            saw_finish: false,
            saw_usage: false,
        };
        let none = d
            .on_event("message", r#"{"id":"x","choices":null,"usage":null}"#)
            .unwrap();
        assert!(none.is_empty());
        let c = d
            .on_event(
                "message",
                r#"{"choices":[{"delta":{"tool_calls":[{"id":"a","function":{"name":"f","arguments":"{}"}}]},"finish_reason":null}]}"#,
            )
            .unwrap();
        assert_eq!(
            c[0].tool_call_chunks[0].index, 0,
            "a missing index is the position"
        );
        let u = d
            .on_event(
                "message",
                r#"{"choices":[],"usage":{"prompt_tokens":null,"completion_tokens":3}}"#,
            )
            .unwrap();
        assert_eq!(u[0].usage, Some(Usage::new(0, 3)));
        assert!(d.on_eof().is_err(), "no finish reason and no [DONE]");
        let m = parse_response(
            "ollama",
            br#"{"choices":[{"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":null}"#,
        )
        .unwrap();
        assert_eq!(m.text(), "hi");
        assert!(m.id.as_deref().is_some_and(|id| id.starts_with("run-")));
    }
}
