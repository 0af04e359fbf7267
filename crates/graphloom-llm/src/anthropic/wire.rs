//! The Anthropic Messages wire format: system prompt apart, content blocks, `tool_use` /
//! `tool_result`, strictly alternating roles.

use crate::options::{ChatOptions, ToolChoice};
use crate::usage::Usage;
use graphloom_core::{Message, MessageKind};
use serde::Deserialize;
use serde_json::{json, Map, Value};

/// Description of the forced tool that carries structured output.
const STRUCTURED_TOOL_DESCRIPTION: &str =
    "Give your answer by calling this tool; its input is the answer, matching the schema exactly.";

fn text_of(content: &Value) -> String {
    match content {
        Value::String(_) | Value::Array(_) => graphloom_core::content_text(content),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// An OpenAI `image_url` part as an Anthropic image block: a `data:` URL becomes a base64
/// source, any other URL a URL source.
fn image_block(url: &str) -> Value {
    if let Some(rest) = url.strip_prefix("data:") {
        if let Some((media_type, data)) = rest.split_once(";base64,") {
            return json!({"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}});
        }
    }
    json!({"type": "image", "source": {"type": "url", "url": url}})
}

/// Content blocks of a user message: strings become text blocks, OpenAI `image_url` parts
/// image blocks; LangChain / Anthropic blocks pass through.
fn user_blocks(content: &Value) -> Vec<Value> {
    match content {
        Value::Array(parts) => parts
            .iter()
            .map(|p| match p {
                Value::String(s) => json!({"type": "text", "text": s}),
                Value::Object(o) if o.get("type").and_then(Value::as_str) == Some("image_url") => {
                    let url = o
                        .get("image_url")
                        .and_then(|i| i.get("url").or(Some(i)))
                        .and_then(Value::as_str)
                        .unwrap_or_default();
                    image_block(url)
                }
                other => other.clone(),
            })
            .collect(),
        other => {
            let t = text_of(other);
            if t.is_empty() {
                Vec::new()
            } else {
                vec![json!({"type": "text", "text": t})]
            }
        }
    }
}

fn blocks_of(m: &Message) -> Option<(&'static str, Vec<Value>)> {
    match m.kind {
        MessageKind::System | MessageKind::Remove => None,
        MessageKind::Human => Some(("user", user_blocks(&m.content))),
        MessageKind::Tool => {
            let mut block = json!({
                "type": "tool_result",
                "tool_use_id": m.tool_call_id.clone().unwrap_or_default(),
                "content": text_of(&m.content),
            });
            if m.extra.get("status").and_then(Value::as_str) == Some("error") {
                block["is_error"] = json!(true);
            }
            Some(("user", vec![block]))
        }
        MessageKind::Ai => {
            let mut blocks = Vec::new();
            let text = text_of(&m.content);
            if !text.trim().is_empty() {
                blocks.push(json!({"type": "text", "text": text}));
            }
            for c in &m.tool_calls {
                let input = if c.args.is_object() {
                    c.args.clone()
                } else {
                    json!({})
                };
                blocks.push(json!({"type": "tool_use", "id": c.id, "name": c.name, "input": input}));
            }
            Some(("assistant", blocks))
        }
    }
}

/// The system prompt (every system message, joined) and the alternating turns.
pub(crate) fn split_messages(messages: &[Message]) -> (Option<String>, Vec<Value>) {
    let system: Vec<String> = messages
        .iter()
        .filter(|m| m.kind == MessageKind::System)
        .map(|m| text_of(&m.content))
        .filter(|t| !t.is_empty())
        .collect();
    let mut turns: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for (role, blocks) in messages.iter().filter_map(blocks_of) {
        if blocks.is_empty() {
            continue;
        }
        match turns.last_mut() {
            Some((last, acc)) if *last == role => acc.extend(blocks),
            _ => turns.push((role, blocks)),
        }
    }
    let turns = turns
        .into_iter()
        .map(|(role, blocks)| json!({"role": role, "content": blocks}))
        .collect();
    let system = (!system.is_empty()).then(|| system.join("\n\n"));
    (system, turns)
}

/// The request body. With a response format, the schema becomes a tool the model is made
/// to call (its name is returned so the answer can be read back as text).
pub(crate) fn request_body(
    model: &str,
    messages: &[Message],
    opts: &ChatOptions,
    default_max_tokens: u32,
    stream: bool,
) -> (Value, Option<String>) {
    let (system, turns) = split_messages(messages);
    let mut b = Map::new();
    b.insert("model".into(), json!(model));
    b.insert(
        "max_tokens".into(),
        json!(opts.max_tokens.unwrap_or(default_max_tokens)),
    );
    if let Some(s) = system {
        b.insert("system".into(), json!(s));
    }
    b.insert("messages".into(), Value::Array(turns));
    if let Some(t) = opts.temperature {
        b.insert("temperature".into(), json!(t));
    }
    if !opts.stop.is_empty() {
        b.insert("stop_sequences".into(), json!(opts.stop));
    }
    let mut tools: Vec<Value> = opts
        .tools
        .iter()
        .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.parameters}))
        .collect();
    let mut choice = opts.tool_choice.as_ref().map(|c| match c {
        ToolChoice::Auto => json!({"type": "auto"}),
        ToolChoice::None => json!({"type": "none"}),
        ToolChoice::Required => json!({"type": "any"}),
        ToolChoice::Named(n) => json!({"type": "tool", "name": n}),
    });
    let mut structured = None;
    if let Some(f) = &opts.response_format {
        tools.push(
            json!({"name": f.name, "description": STRUCTURED_TOOL_DESCRIPTION, "input_schema": f.schema}),
        );
        choice = Some(json!({"type": "tool", "name": f.name}));
        structured = Some(f.name.clone());
    }
    if !tools.is_empty() {
        b.insert("tools".into(), Value::Array(tools));
    }
    if let Some(c) = choice {
        b.insert("tool_choice".into(), c);
    }
    if stream {
        b.insert("stream".into(), json!(true));
    }
    (Value::Object(b), structured)
}

#[derive(Debug, Deserialize, Default, Clone, Copy)]
pub(crate) struct WireUsage {
    #[serde(default)]
    pub input_tokens: Option<u64>,
    #[serde(default)]
    pub output_tokens: Option<u64>,
    #[serde(default)]
    pub cache_creation_input_tokens: Option<u64>,
    #[serde(default)]
    pub cache_read_input_tokens: Option<u64>,
}

impl WireUsage {
    /// All input tokens, cache writes and reads included (as LangChain counts them).
    pub fn input(&self) -> Option<u64> {
        let parts = [
            self.input_tokens,
            self.cache_creation_input_tokens,
            self.cache_read_input_tokens,
        ];
        parts
            .iter()
            .any(Option::is_some)
            .then(|| parts.iter().flatten().sum())
    }
    pub fn usage(&self) -> Usage {
        Usage::new(self.input().unwrap_or(0), self.output_tokens.unwrap_or(0))
    }
}

/// A non-streamed response.
#[derive(Debug, Deserialize)]
pub(crate) struct WireResponse {
    pub id: Option<String>,
    pub model: Option<String>,
    #[serde(default, deserialize_with = "crate::serde_util::null_default")]
    pub content: Vec<Value>,
    pub stop_reason: Option<String>,
    pub usage: Option<WireUsage>,
    pub error: Option<Value>,
}

/// One streamed event's data (every event type's fields, all optional).
#[derive(Debug, Deserialize)]
pub(crate) struct WireEvent {
    #[serde(rename = "type")]
    pub kind: String,
    pub message: Option<WireResponse>,
    pub index: Option<usize>,
    pub content_block: Option<Value>,
    pub delta: Option<Value>,
    pub usage: Option<WireUsage>,
    pub error: Option<Value>,
}
