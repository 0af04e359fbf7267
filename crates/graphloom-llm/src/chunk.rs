//! Streamed pieces of a model's answer, and their assembly into the final message.

use crate::message::AiParts;
use crate::usage::Usage;
use graphloom_core::Message;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

/// A piece of a tool call's streamed arguments. Pieces with the same `index` belong to the
/// same call; `id` and `name` usually arrive with the first piece only.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolCallChunk {
    /// Which call of the message this piece belongs to.
    pub index: usize,
    /// Call id (first piece).
    pub id: Option<String>,
    /// Tool name (first piece).
    pub name: Option<String>,
    /// A piece of the arguments' JSON text.
    pub args: String,
}

/// One streamed piece of an AI message.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatChunk {
    /// Message id (the provider's response id), when known.
    pub id: Option<String>,
    /// Text delta.
    pub text: String,
    /// Tool-call argument deltas.
    pub tool_call_chunks: Vec<ToolCallChunk>,
    /// Token usage; providers send it once, on one of the last chunks.
    pub usage: Option<Usage>,
    /// Why generation stopped (on the last chunks).
    pub finish_reason: Option<String>,
    /// The model that answered (usually on the first chunk).
    pub model: Option<String>,
}

impl ChatChunk {
    /// A text delta.
    #[must_use]
    pub fn text(delta: impl Into<String>) -> Self {
        Self {
            text: delta.into(),
            ..Self::default()
        }
    }
    /// A tool-call delta.
    #[must_use]
    pub fn tool_call(index: usize, id: Option<&str>, name: Option<&str>, args: impl Into<String>) -> Self {
        Self {
            tool_call_chunks: vec![ToolCallChunk {
                index,
                id: id.map(str::to_owned),
                name: name.map(str::to_owned),
                args: args.into(),
            }],
            ..Self::default()
        }
    }
    /// A chunk that reports usage and the finish reason.
    #[must_use]
    pub fn end(usage: Option<Usage>, finish_reason: impl Into<String>) -> Self {
        Self {
            usage,
            finish_reason: Some(finish_reason.into()),
            ..Self::default()
        }
    }
    /// True when the chunk carries nothing.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.text.is_empty()
            && self.tool_call_chunks.is_empty()
            && self.usage.is_none()
            && self.finish_reason.is_none()
    }

    /// The chunk as a LangChain `AIMessageChunk` JSON object, with `id` as its message id:
    /// `{"type":"AIMessageChunk","content":..,"id":..,"tool_call_chunks":[..]}` plus
    /// `usage_metadata` and `response_metadata` when the chunk has them.
    #[must_use]
    pub fn to_langchain_json(&self, id: &str) -> Value {
        let calls: Vec<Value> = self
            .tool_call_chunks
            .iter()
            .map(|c| {
                json!({
                    "type": "tool_call_chunk",
                    "index": c.index,
                    "id": c.id,
                    "name": c.name,
                    "args": c.args,
                })
            })
            .collect();
        let mut obj = Map::new();
        obj.insert("type".into(), json!("AIMessageChunk"));
        obj.insert("content".into(), json!(self.text));
        obj.insert("id".into(), json!(id));
        obj.insert("tool_call_chunks".into(), Value::Array(calls));
        if let Some(u) = &self.usage {
            obj.insert("usage_metadata".into(), json!(u));
        }
        let mut meta = Map::new();
        if let Some(f) = &self.finish_reason {
            meta.insert("finish_reason".into(), json!(f));
        }
        if let Some(m) = &self.model {
            meta.insert("model_name".into(), json!(m));
        }
        obj.insert("response_metadata".into(), Value::Object(meta));
        Value::Object(obj)
    }
}

#[derive(Debug, Default)]
struct PartialCall {
    id: Option<String>,
    name: Option<String>,
    args: String,
}

/// Assembles streamed chunks into the final AI message: text concatenated, tool-call
/// argument pieces joined by index (then parsed), usage summed, the last finish reason kept.
#[derive(Debug, Default)]
pub struct ChunkAssembler {
    id: Option<String>,
    text: String,
    calls: BTreeMap<usize, PartialCall>,
    usage: Option<Usage>,
    finish_reason: Option<String>,
    model: Option<String>,
    provider: String,
    chunks: usize,
}

impl ChunkAssembler {
    /// An empty assembler.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }
    /// An empty assembler for a provider's chunks (named in `response_metadata`).
    #[must_use]
    pub fn with_provider(provider: impl Into<String>) -> Self {
        Self {
            provider: provider.into(),
            ..Self::default()
        }
    }
    /// Add the next chunk.
    pub fn push(&mut self, chunk: &ChatChunk) {
        self.chunks += 1;
        if self.id.is_none() {
            self.id.clone_from(&chunk.id);
        }
        if self.model.is_none() {
            self.model.clone_from(&chunk.model);
        }
        self.text.push_str(&chunk.text);
        for c in &chunk.tool_call_chunks {
            let p = self.calls.entry(c.index).or_default();
            if p.id.is_none() && c.id.as_deref().is_some_and(|s| !s.is_empty()) {
                p.id.clone_from(&c.id);
            }
            if p.name.is_none() && c.name.as_deref().is_some_and(|s| !s.is_empty()) {
                p.name.clone_from(&c.name);
            }
            p.args.push_str(&c.args);
        }
        if let Some(u) = chunk.usage {
            self.usage = Some(self.usage.unwrap_or_default() + u);
        }
        if chunk.finish_reason.is_some() {
            self.finish_reason.clone_from(&chunk.finish_reason);
        }
    }
    /// How many chunks were added.
    #[must_use]
    pub fn len(&self) -> usize {
        self.chunks
    }
    /// True before the first chunk.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.chunks == 0
    }
    /// The message id chunks carried, if any.
    #[must_use]
    pub fn id(&self) -> Option<&str> {
        self.id.as_deref()
    }
    /// Set the message id (the id chunks were forwarded under).
    pub fn set_id(&mut self, id: impl Into<String>) {
        self.id = Some(id.into());
    }
    /// The final AI message. Tool calls whose arguments are not a JSON object end up in
    /// `invalid_tool_calls`, as LangChain does.
    #[must_use]
    pub fn finish(self) -> Message {
        let mut parts = AiParts {
            id: self.id,
            text: self.text,
            usage: self.usage,
            finish_reason: self.finish_reason,
            model: self.model,
            provider: if self.provider.is_empty() {
                "unknown".to_owned()
            } else {
                self.provider
            },
            ..AiParts::default()
        };
        for (_, c) in self.calls {
            parts.push_raw_call(c.id, c.name, &c.args);
        }
        parts.into_message()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::MessageExt;

    #[test]
    fn assembles_tool_calls_by_index_across_chunks() {
        let mut a = ChunkAssembler::new();
        a.push(&ChatChunk {
            id: Some("m".into()),
            ..ChatChunk::text("Hel")
        });
        a.push(&ChatChunk::text("lo"));
        a.push(&ChatChunk::tool_call(1, Some("c1"), Some("b"), "{\"x\""));
        a.push(&ChatChunk::tool_call(0, Some("c0"), Some("a"), "{}"));
        a.push(&ChatChunk::tool_call(1, None, None, ":1}"));
        a.push(&ChatChunk::end(Some(Usage::new(5, 7)), "tool_calls"));
        let m = a.finish();
        assert_eq!(m.id.as_deref(), Some("m"));
        assert_eq!(m.text(), "Hello");
        assert_eq!(m.tool_calls.len(), 2);
        assert_eq!(m.tool_calls[0].name, "a");
        assert_eq!(m.tool_calls[1].args, json!({"x": 1}));
        assert_eq!(m.usage(), Some(Usage::new(5, 7)));
    }

    #[test]
    fn langchain_chunk_json() {
        let c = ChatChunk::tool_call(0, Some("c"), Some("t"), "{");
        let v = c.to_langchain_json("id1");
        assert_eq!(v["type"], "AIMessageChunk");
        assert_eq!(v["id"], "id1");
        assert_eq!(v["tool_call_chunks"][0]["args"], "{");
        assert_eq!(v["tool_call_chunks"][0]["index"], 0);
    }
}
