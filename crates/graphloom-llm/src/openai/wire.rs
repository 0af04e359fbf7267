//! The Chat Completions wire format: requests built as JSON, responses read into serde
//! types holding only the fields we use, all optional or defaulted, because the servers
//! that speak this protocol (OpenAI, Ollama, vLLM, LiteLLM, OpenRouter, Groq) differ in
//! what they leave out.

use crate::chunk::{ChatChunk, ToolCallChunk};
use crate::options::{ChatOptions, ToolChoice};
use crate::usage::Usage;
use graphloom_core::{Message, MessageKind};
use serde::Deserialize;
use serde_json::{json, Map, Value};

/// How the request names the output-token limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MaxTokensField {
    /// `max_tokens`: understood by every compatible server.
    #[default]
    MaxTokens,
    /// `max_completion_tokens`: what OpenAI's reasoning models require.
    MaxCompletionTokens,
}

fn content_text(content: &Value) -> String {
    match content {
        Value::String(_) | Value::Array(_) => graphloom_core::content_text(content),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// A user message's content parts as Chat Completions takes them: bare strings become
/// text parts; OpenAI's own parts (`text`, `image_url`, `input_audio`, ...) pass through.
fn user_parts(parts: &[Value]) -> Value {
    Value::Array(
        parts
            .iter()
            .map(|p| match p {
                Value::String(s) => json!({"type": "text", "text": s}),
                other => other.clone(),
            })
            .collect(),
    )
}

fn message_json(m: &Message) -> Option<Value> {
    let mut o = Map::new();
    match m.kind {
        MessageKind::Remove => return None,
        MessageKind::System => {
            o.insert("role".into(), json!("system"));
            o.insert("content".into(), json!(content_text(&m.content)));
        }
        MessageKind::Human => {
            o.insert("role".into(), json!("user"));
            let content = match &m.content {
                Value::Array(parts) => user_parts(parts),
                other => json!(content_text(other)),
            };
            o.insert("content".into(), content);
        }
        MessageKind::Ai => {
            o.insert("role".into(), json!("assistant"));
            let text = content_text(&m.content);
            if text.is_empty() && !m.tool_calls.is_empty() {
                o.insert("content".into(), Value::Null);
            } else {
                o.insert("content".into(), json!(text));
            }
            if !m.tool_calls.is_empty() {
                let calls: Vec<Value> = m
                    .tool_calls
                    .iter()
                    .map(|c| {
                        json!({
                            "id": c.id,
                            "type": "function",
                            "function": {"name": c.name, "arguments": c.args.to_string()},
                        })
                    })
                    .collect();
                o.insert("tool_calls".into(), Value::Array(calls));
            }
        }
        MessageKind::Tool => {
            o.insert("role".into(), json!("tool"));
            o.insert("content".into(), json!(content_text(&m.content)));
            o.insert(
                "tool_call_id".into(),
                json!(m.tool_call_id.clone().unwrap_or_default()),
            );
        }
    }
    if let (Some(name), MessageKind::Human | MessageKind::System | MessageKind::Ai) = (&m.name, m.kind) {
        o.insert("name".into(), json!(name));
    }
    Some(Value::Object(o))
}

/// The request body.
pub(crate) fn request_body(
    model: &str,
    messages: &[Message],
    opts: &ChatOptions,
    stream: Option<bool>,
    max_tokens_field: MaxTokensField,
) -> Value {
    let mut b = Map::new();
    b.insert("model".into(), json!(model));
    b.insert(
        "messages".into(),
        Value::Array(messages.iter().filter_map(message_json).collect()),
    );
    if let Some(t) = opts.temperature {
        b.insert("temperature".into(), json!(t));
    }
    if let Some(n) = opts.max_tokens {
        let key = match max_tokens_field {
            MaxTokensField::MaxTokens => "max_tokens",
            MaxTokensField::MaxCompletionTokens => "max_completion_tokens",
        };
        b.insert(key.into(), json!(n));
    }
    if !opts.stop.is_empty() {
        b.insert("stop".into(), json!(opts.stop));
    }
    if !opts.tools.is_empty() {
        let tools: Vec<Value> = opts
            .tools
            .iter()
            .map(|t| {
                json!({
                    "type": "function",
                    "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
                })
            })
            .collect();
        b.insert("tools".into(), Value::Array(tools));
    }
    if let Some(choice) = &opts.tool_choice {
        let v = match choice {
            ToolChoice::Auto => json!("auto"),
            ToolChoice::None => json!("none"),
            ToolChoice::Required => json!("required"),
            ToolChoice::Named(n) => json!({"type": "function", "function": {"name": n}}),
        };
        b.insert("tool_choice".into(), v);
    }
    if let Some(f) = &opts.response_format {
        b.insert(
            "response_format".into(),
            json!({
                "type": "json_schema",
                "json_schema": {"name": f.name, "schema": f.schema, "strict": f.strict},
            }),
        );
    }
    if let Some(include_usage) = stream {
        b.insert("stream".into(), json!(true));
        if include_usage {
            b.insert("stream_options".into(), json!({"include_usage": true}));
        }
    }
    Value::Object(b)
}

#[derive(Debug, Deserialize, Default)]
pub(crate) struct WireUsage {
    #[serde(default, deserialize_with = "crate::serde_util::null_default")]
    pub prompt_tokens: u64,
    #[serde(default, deserialize_with = "crate::serde_util::null_default")]
    pub completion_tokens: u64,
}

impl From<&WireUsage> for Usage {
    fn from(u: &WireUsage) -> Self {
        Usage::new(u.prompt_tokens, u.completion_tokens)
    }
}

#[derive(Debug, Deserialize)]
pub(crate) struct WireFunction {
    pub name: Option<String>,
    /// A JSON string per the spec; some servers send the object itself.
    pub arguments: Option<Value>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct WireToolCall {
    pub id: Option<String>,
    pub function: Option<WireFunction>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct WireMessage {
    pub content: Option<Value>,
    #[serde(default)]
    pub tool_calls: Option<Vec<WireToolCall>>,
    pub refusal: Option<String>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct WireChoice {
    pub message: Option<WireMessage>,
    pub finish_reason: Option<String>,
}

/// A non-streamed response.
#[derive(Debug, Deserialize)]
pub(crate) struct WireResponse {
    pub id: Option<String>,
    pub model: Option<String>,
    #[serde(default, deserialize_with = "crate::serde_util::null_default")]
    pub choices: Vec<WireChoice>,
    pub usage: Option<WireUsage>,
    pub error: Option<Value>,
}

impl WireToolCall {
    pub fn arguments_text(&self) -> String {
        match self.function.as_ref().and_then(|f| f.arguments.as_ref()) {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
        }
    }
}

#[derive(Debug, Deserialize)]
pub(crate) struct DeltaFunction {
    pub name: Option<String>,
    pub arguments: Option<String>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct DeltaToolCall {
    pub index: Option<usize>,
    pub id: Option<String>,
    pub function: Option<DeltaFunction>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct Delta {
    pub content: Option<String>,
    #[serde(default)]
    pub tool_calls: Option<Vec<DeltaToolCall>>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct StreamChoice {
    pub delta: Option<Delta>,
    pub finish_reason: Option<String>,
}

/// One streamed chunk.
#[derive(Debug, Deserialize)]
pub(crate) struct WireChunk {
    pub id: Option<String>,
    pub model: Option<String>,
    #[serde(default, deserialize_with = "crate::serde_util::null_default")]
    pub choices: Vec<StreamChoice>,
    pub usage: Option<WireUsage>,
    pub error: Option<Value>,
}

impl WireChunk {
    pub fn into_chunk(self) -> ChatChunk {
        let mut c = ChatChunk {
            id: self.id,
            model: self.model,
            usage: self.usage.as_ref().map(Usage::from),
            ..ChatChunk::default()
        };
        if let Some(choice) = self.choices.into_iter().next() {
            c.finish_reason = choice.finish_reason;
            if let Some(delta) = choice.delta {
                c.text = delta.content.unwrap_or_default();
                for (pos, tc) in delta.tool_calls.unwrap_or_default().into_iter().enumerate() {
                    let (name, args) = match tc.function {
                        Some(f) => (f.name, f.arguments.unwrap_or_default()),
                        None => (None, String::new()),
                    };
                    c.tool_call_chunks.push(ToolCallChunk {
                        index: tc.index.unwrap_or(pos),
                        id: tc.id,
                        name,
                        args,
                    });
                }
            }
        }
        c
    }
}
