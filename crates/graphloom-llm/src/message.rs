//! Helpers on core's [`Message`] for what models add to it: usage, response metadata,
//! tool calls whose arguments were not valid JSON.
//!
//! graphloom has one message type, `graphloom_core::Message`, in LangChain's JSON shape;
//! model responses keep their extra fields where LangChain keeps them
//! (`usage_metadata`, `response_metadata`, `invalid_tool_calls`), in `Message::extra`.

use crate::usage::Usage;
use graphloom_core::{Message, MessageKind, ToolCall};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A tool call whose arguments did not parse as a JSON object (LangChain's
/// `invalid_tool_calls` entry).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InvalidToolCall {
    /// Call id, if the model gave one.
    pub id: Option<String>,
    /// Tool name, if the model gave one.
    pub name: Option<String>,
    /// The arguments text as received.
    pub args: Option<String>,
    /// Why it is invalid.
    pub error: Option<String>,
}

/// What models add to a [`Message`].
pub trait MessageExt {
    /// Token usage (`usage_metadata`), if the message came from a model that reported it.
    fn usage(&self) -> Option<Usage>;
    /// Provider details (`response_metadata`: `model_name`, `finish_reason`, ...).
    fn response_metadata(&self) -> Option<&Map<String, Value>>;
    /// Tool calls whose arguments were not valid JSON.
    fn invalid_tool_calls(&self) -> Vec<InvalidToolCall>;
    /// True for an AI message that calls at least one tool.
    fn has_tool_calls(&self) -> bool;
    /// The finish reason (`stop`, `length`, `tool_calls`, `end_turn`, ...), if known.
    fn finish_reason(&self) -> Option<&str>;
}

impl MessageExt for Message {
    fn usage(&self) -> Option<Usage> {
        self.extra
            .get("usage_metadata")
            .and_then(|v| serde_json::from_value(v.clone()).ok())
    }
    fn response_metadata(&self) -> Option<&Map<String, Value>> {
        self.extra.get("response_metadata").and_then(Value::as_object)
    }
    fn invalid_tool_calls(&self) -> Vec<InvalidToolCall> {
        self.extra
            .get("invalid_tool_calls")
            .and_then(|v| serde_json::from_value(v.clone()).ok())
            .unwrap_or_default()
    }
    fn has_tool_calls(&self) -> bool {
        self.kind == MessageKind::Ai && !self.tool_calls.is_empty()
    }
    fn finish_reason(&self) -> Option<&str> {
        self.response_metadata()?.get("finish_reason")?.as_str()
    }
}

/// What a provider parsed out of one response, turned into an AI [`Message`].
#[derive(Debug, Clone, Default)]
pub(crate) struct AiParts {
    pub id: Option<String>,
    pub text: String,
    pub tool_calls: Vec<ToolCall>,
    pub invalid_tool_calls: Vec<InvalidToolCall>,
    pub usage: Option<Usage>,
    pub finish_reason: Option<String>,
    pub model: Option<String>,
    pub provider: String,
}

impl AiParts {
    /// Add a tool call whose arguments arrived as JSON text.
    pub fn push_raw_call(&mut self, id: Option<String>, name: Option<String>, args: &str) {
        let trimmed = args.trim();
        let parsed = if trimmed.is_empty() {
            Ok(Value::Object(Map::new()))
        } else {
            serde_json::from_str::<Value>(trimmed)
        };
        match (parsed, name) {
            (Ok(v), Some(name)) if v.is_object() => self.tool_calls.push(ToolCall {
                id: id.unwrap_or_else(new_call_id),
                name,
                args: v,
            }),
            (parsed, name) => self.invalid_tool_calls.push(InvalidToolCall {
                id,
                name: name.clone(),
                args: Some(args.to_owned()),
                error: Some(match (parsed, name) {
                    (Err(e), _) => format!("arguments are not valid JSON: {e}"),
                    (Ok(_), None) => "tool call without a name".to_owned(),
                    (Ok(_), Some(_)) => "arguments are not a JSON object".to_owned(),
                }),
            }),
        }
    }

    pub fn into_message(self) -> Message {
        let mut m = Message::ai_with_tool_calls(self.text, self.tool_calls);
        m.id = Some(self.id.unwrap_or_else(new_message_id));
        if let Some(u) = self.usage {
            if let Ok(v) = serde_json::to_value(u) {
                m.extra.insert("usage_metadata".into(), v);
            }
        }
        let mut meta = Map::new();
        if let Some(model) = self.model {
            meta.insert("model_name".into(), Value::String(model));
        }
        if let Some(f) = self.finish_reason {
            meta.insert("finish_reason".into(), Value::String(f));
        }
        meta.insert("model_provider".into(), Value::String(self.provider));
        m.extra.insert("response_metadata".into(), Value::Object(meta));
        if !self.invalid_tool_calls.is_empty() {
            let list: Vec<Value> = self
                .invalid_tool_calls
                .iter()
                .map(|c| {
                    serde_json::json!({
                        "type": "invalid_tool_call",
                        "id": c.id, "name": c.name, "args": c.args, "error": c.error,
                    })
                })
                .collect();
            m.extra.insert("invalid_tool_calls".into(), Value::Array(list));
        }
        m
    }
}

/// A fresh message id in LangChain's style for model output (`run-<uuid>`).
#[must_use]
pub fn new_message_id() -> String {
    format!("run-{}", uuid::Uuid::new_v4())
}

/// A fresh tool call id, for providers that send none.
#[must_use]
pub fn new_call_id() -> String {
    format!("call_{}", uuid::Uuid::new_v4().simple())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_become_a_langchain_ai_message() {
        let mut p = AiParts {
            id: Some("m1".into()),
            text: "hi".into(),
            usage: Some(Usage::new(3, 2)),
            finish_reason: Some("tool_calls".into()),
            model: Some("gpt-x".into()),
            provider: "openai".into(),
            ..AiParts::default()
        };
        p.push_raw_call(Some("c1".into()), Some("search".into()), r#"{"q":"x"}"#);
        p.push_raw_call(Some("c2".into()), Some("search".into()), r#"{"q":"#);
        p.push_raw_call(Some("c3".into()), Some("noargs".into()), "");
        let m = p.into_message();
        assert_eq!(m.tool_calls.len(), 2);
        assert_eq!(m.tool_calls[1].args, serde_json::json!({}));
        assert_eq!(m.usage(), Some(Usage::new(3, 2)));
        assert_eq!(m.finish_reason(), Some("tool_calls"));
        let bad = m.invalid_tool_calls();
        assert_eq!(bad.len(), 1);
        assert_eq!(bad[0].id.as_deref(), Some("c2"));
        let json = serde_json::to_value(&m).unwrap_or_default();
        assert_eq!(json["type"], "ai");
        assert_eq!(json["usage_metadata"]["total_tokens"], 5);
        assert_eq!(json["invalid_tool_calls"][0]["type"], "invalid_tool_call");
    }
}
