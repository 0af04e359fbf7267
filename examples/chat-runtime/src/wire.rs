//! The route's half: [`AiEvent`]s to the AI SDK data stream protocol (one `TYPE:JSON\n`
//! line per part). The runtime never encodes; this module never decides anything but the
//! encoding.
//!
//! | event | part |
//! |---|---|
//! | `text_delta` | `0:"<text>"` (text part) |
//! | `tool_call_start` | `9:{"toolCallId","toolName","args"}` (tool call part) |
//! | `tool_call_result` | `a:{"toolCallId","result"}` (tool result part; already redacted) |
//! | `usage_report` | `e:{"finishReason","usage":{"promptTokens","completionTokens"},"isContinued"}` (finish step part) |
//! | `done` | `d:{"finishReason","usage":{"promptTokens","completionTokens"}}` (finish message part, usage summed over the steps) |
//!
//! Responses carrying this format set the header [`DATA_STREAM_HEADER`].

use crate::events::{AiEvent, EventEnvelope};
use graphloom_llm::Usage;
use serde_json::{json, Value};

/// The response header marking a data stream (`x-vercel-ai-data-stream: v1`).
pub const DATA_STREAM_HEADER: (&str, &str) = ("x-vercel-ai-data-stream", "v1");

/// The protocol's finish reason for a model finish reason.
#[must_use]
pub fn finish_reason(reason: Option<&str>, failed: bool) -> &'static str {
    if failed {
        return "error";
    }
    match reason {
        Some("stop" | "end_turn") => "stop",
        Some("tool_calls" | "tool_use") => "tool-calls",
        Some("length" | "max_tokens") => "length",
        Some("content_filter") => "content-filter",
        Some(_) => "other",
        None => "unknown",
    }
}

fn usage_json(u: Usage) -> Value {
    json!({"promptTokens": u.input_tokens, "completionTokens": u.output_tokens})
}

fn line(code: char, value: &Value) -> String {
    format!("{code}:{value}\n")
}

/// Encodes a run's events in order; keeps the usage sum and last finish reason for `d:`.
#[derive(Debug, Default, Clone)]
pub struct DataStreamEncoder {
    usage: Usage,
    last_finish: Option<&'static str>,
}

impl DataStreamEncoder {
    /// A fresh encoder (one per response).
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// The line(s) for one event.
    pub fn encode(&mut self, event: &AiEvent) -> String {
        match event {
            AiEvent::TextDelta { delta } => line('0', &Value::String(delta.clone())),
            AiEvent::ToolCallStart {
                tool_call_id,
                tool_name,
                args,
            } => line(
                '9',
                &json!({"toolCallId": tool_call_id, "toolName": tool_name, "args": args}),
            ),
            AiEvent::ToolCallResult {
                tool_call_id, result, ..
            } => line('a', &json!({"toolCallId": tool_call_id, "result": result})),
            AiEvent::UsageReport { fact } => {
                self.usage += fact.usage;
                let reason = finish_reason(fact.finish_reason.as_deref(), fact.error.is_some());
                self.last_finish = Some(reason);
                line(
                    'e',
                    &json!({
                        "finishReason": reason,
                        "usage": usage_json(fact.usage),
                        "isContinued": false
                    }),
                )
            }
            AiEvent::Done => line(
                'd',
                &json!({
                    "finishReason": self.last_finish.unwrap_or("unknown"),
                    "usage": usage_json(self.usage)
                }),
            ),
        }
    }
}

/// Encode a whole run (for tests and non-streaming callers).
#[must_use]
pub fn encode_data_stream<'a>(events: impl IntoIterator<Item = &'a EventEnvelope>) -> String {
    let mut enc = DataStreamEncoder::new();
    events.into_iter().map(|e| enc.encode(&e.event)).collect()
}

/// Decode one line back into `(type code, JSON value)`; `None` for a malformed line.
#[must_use]
pub fn decode_line(line: &str) -> Option<(char, Value)> {
    let (code, rest) = line.trim_end_matches('\n').split_once(':')?;
    let mut chars = code.chars();
    let c = chars.next()?;
    if chars.next().is_some() {
        return None;
    }
    serde_json::from_str(rest).ok().map(|v| (c, v))
}
