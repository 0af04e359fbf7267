//! `chat` spans around model calls, with the OpenTelemetry GenAI attributes.
//!
//! Every provider of this crate wraps its calls with [`traced_invoke`] and [`traced_stream`];
//! a custom [`ChatModel`](crate::ChatModel) can do the same. The span is named `chat`, and
//! `chat <model>` once exported (its `otel.name`), and carries:
//!
//! | field | value |
//! |---|---|
//! | `gen_ai.operation.name` | `chat` |
//! | `gen_ai.provider.name`, `gen_ai.system` | the provider (`openai`, `anthropic`, `ollama`, `scripted`, ...) |
//! | `gen_ai.request.model` | the model asked for |
//! | `gen_ai.response.model`, `gen_ai.response.id` | what the provider answered, when it says |
//! | `gen_ai.usage.input_tokens`, `gen_ai.usage.output_tokens` | after the answer (or the stream) ends |
//! | `gen_ai.response.finish_reasons` | the finish reason, when known |
//! | `error.type`, `otel.status_code`, `otel.status_description` | on failure |
//!
//! Without a `tracing` subscriber listening, the span is disabled and the wrappers hand the
//! call through untouched.

use crate::chunk::ChatChunk;
use crate::error::{Error, Result};
use crate::message::MessageExt;
use crate::model::ChunkStream;
use futures::StreamExt;
use graphloom_core::Message;
use std::future::Future;
use tracing::field::Empty;
use tracing::{Instrument, Span};

/// A `chat` span for a call to `model` of `provider`, child of the current span.
#[must_use]
pub fn chat_span(provider: &str, model: &str) -> Span {
    let span = tracing::info_span!(
        "chat",
        otel.name = Empty,
        otel.kind = "client",
        otel.status_code = Empty,
        otel.status_description = Empty,
        gen_ai.operation.name = "chat",
        gen_ai.provider.name = provider,
        gen_ai.system = provider,
        gen_ai.request.model = model,
        gen_ai.response.model = Empty,
        gen_ai.response.id = Empty,
        gen_ai.response.finish_reasons = Empty,
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
        error.type = Empty,
    );
    if !span.is_disabled() {
        span.record("otel.name", format!("chat {model}"));
    }
    span
}

/// Record what an answer says about itself: model, id, usage, finish reason.
pub fn record_message(span: &Span, message: &Message) {
    if span.is_disabled() {
        return;
    }
    if let Some(meta) = message.response_metadata() {
        if let Some(model) = meta.get("model_name").and_then(serde_json::Value::as_str) {
            span.record("gen_ai.response.model", model);
        }
    }
    if let Some(id) = &message.id {
        span.record("gen_ai.response.id", id.as_str());
    }
    if let Some(u) = message.usage() {
        span.record("gen_ai.usage.input_tokens", as_i64(u.input_tokens));
        span.record("gen_ai.usage.output_tokens", as_i64(u.output_tokens));
    }
    if let Some(f) = message.finish_reason() {
        span.record("gen_ai.response.finish_reasons", f);
    }
}

/// Record a streamed chunk's model, id, usage and finish reason (whichever it carries).
pub fn record_chunk(span: &Span, chunk: &ChatChunk) {
    if span.is_disabled() {
        return;
    }
    if let Some(model) = &chunk.model {
        span.record("gen_ai.response.model", model.as_str());
    }
    if let Some(id) = &chunk.id {
        span.record("gen_ai.response.id", id.as_str());
    }
    if let Some(u) = &chunk.usage {
        span.record("gen_ai.usage.input_tokens", as_i64(u.input_tokens));
        span.record("gen_ai.usage.output_tokens", as_i64(u.output_tokens));
    }
    if let Some(f) = &chunk.finish_reason {
        span.record("gen_ai.response.finish_reasons", f.as_str());
    }
}

/// Token counts as OpenTelemetry integers (`u64` would be recorded as text).
fn as_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Mark the span failed with `error`.
pub fn record_error(span: &Span, error: &Error) {
    if span.is_disabled() {
        return;
    }
    span.record("otel.status_code", "ERROR");
    span.record("otel.status_description", tracing::field::display(error));
    span.record("error.type", tracing::field::debug(error.kind()));
}

/// Run `call` (one `invoke` of `model` at `provider`) inside a [`chat_span`], and record the
/// answer or the error on it.
///
/// # Errors
/// Whatever `call` returns.
pub async fn traced_invoke<F>(provider: &str, model: &str, call: F) -> Result<Message>
where
    F: Future<Output = Result<Message>>,
{
    let span = chat_span(provider, model);
    if span.is_disabled() {
        return call.await;
    }
    let out = call.instrument(span.clone()).await;
    match &out {
        Ok(m) => record_message(&span, m),
        Err(e) => record_error(&span, e),
    }
    out
}

/// Wrap a chunk stream of `model` at `provider` in a [`chat_span`] that records each chunk's
/// usage and finish reason and ends when the stream ends, fails or is dropped.
///
/// Call it where the stream is created: the span's parent is the span current then.
#[must_use]
pub fn traced_stream(provider: &str, model: &str, stream: ChunkStream) -> ChunkStream {
    let span = chat_span(provider, model);
    if span.is_disabled() {
        return stream;
    }
    Box::pin(futures::stream::unfold(
        (stream, Some(span)),
        |(mut stream, span)| async move {
            // After an error or the end the span is gone: the stream is over.
            let span = span?;
            let next = stream.next().instrument(span.clone()).await?;
            let span = match &next {
                Ok(chunk) => {
                    record_chunk(&span, chunk);
                    Some(span)
                }
                Err(e) => {
                    record_error(&span, e);
                    None
                }
            };
            Some((next, (stream, span)))
        },
    ))
}
