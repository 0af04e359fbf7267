//! The `messages` channel: a model's streamed chunks (LangChain `AIMessageChunk`s, as the
//! run's `messages-tuple` events carry them) as content-block events: `message-start`,
//! then per block `content-block-start`, `content-block-delta`s and
//! `content-block-finish` (blocks never interleave), then `message-finish`.
//!
//! A message is keyed by its namespace and node; it finishes when a chunk says it is the
//! last (`chunk_position: "last"`, or a `finish_reason`), when another message starts in
//! the same place, when its node's update or its namespace's values arrive, or when the
//! run ends.

use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

/// Whether a `messages` event (`[message, metadata]`) is a model's chunk (a LangChain
/// `...Chunk`), the only kind this channel reads: a message a node returns whole is not
/// streamed on it (as the reference server does not), it shows in `updates` and `values`.
#[must_use]
pub fn is_model_chunk(event: &Value) -> bool {
    let Some([message, _]) = event.as_array().map(Vec::as_slice) else {
        return false;
    };
    message
        .get("type")
        .and_then(Value::as_str)
        .is_some_and(|t| t.ends_with("Chunk"))
}

/// One block being streamed.
#[derive(Debug)]
// A few per streamed message, each filled in place: boxing would only add allocations.
#[allow(clippy::large_enum_variant)]
enum Block {
    Text {
        index: usize,
        text: String,
    },
    Reasoning {
        index: usize,
        text: String,
    },
    Tool {
        index: usize,
        /// The tool-call chunks' own `index`.
        chunk_index: Value,
        id: Value,
        name: Value,
        args: String,
    },
}

impl Block {
    fn index(&self) -> usize {
        match self {
            Self::Text { index, .. } | Self::Reasoning { index, .. } | Self::Tool { index, .. } => *index,
        }
    }

    /// The finished block, as `content-block-finish` carries it.
    fn finished(&self) -> Value {
        match self {
            Self::Text { text, .. } => json!({"type": "text", "text": text}),
            Self::Reasoning { text, .. } => json!({"type": "reasoning", "reasoning": text}),
            Self::Tool { id, name, args, .. } => {
                let parsed = if args.trim().is_empty() {
                    Some(json!({}))
                } else {
                    serde_json::from_str::<Value>(args).ok().filter(Value::is_object)
                };
                match parsed {
                    Some(args) => json!({"type": "tool_call", "id": id, "name": name, "args": args}),
                    None => json!({
                        "type": "invalid_tool_call", "id": id, "name": name, "args": args, "error": null,
                    }),
                }
            }
        }
    }
}

/// A message being streamed.
#[derive(Debug)]
struct Active {
    id: String,
    blocks: usize,
    current: Option<Block>,
    usage: Option<Map<String, Value>>,
    reason: Option<Value>,
}

/// A finished tool call (for the `tools` channel's inputs).
pub(super) struct FinishedCall {
    pub id: String,
    pub name: String,
    pub args: Value,
}

/// The messages being streamed, by namespace and node.
#[derive(Debug, Default)]
pub(super) struct MessageStreams {
    active: BTreeMap<(Vec<String>, String), Active>,
}

/// What one step of assembly gives: message events (the `data` of `messages` events) and
/// the tool calls that finished.
pub(super) type Out<'a> = (&'a mut Vec<Value>, &'a mut Vec<FinishedCall>);

impl MessageStreams {
    /// Take one chunk streamed by `node` in namespace `ns`.
    pub(super) fn chunk(&mut self, ns: &[String], node: &str, chunk: &Value, out: Out<'_>) {
        let (events, calls) = out;
        let key = (ns.to_vec(), node.to_owned());
        let id = chunk
            .get("id")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_owned);
        if let (Some(active), Some(id)) = (self.active.get(&key), &id) {
            if &active.id != id {
                self.finish_key(&key, (events, calls));
            }
        }
        let msg = self.active.entry(key.clone()).or_insert_with(|| {
            let id = id
                .clone()
                .unwrap_or_else(|| format!("msg-{}", uuid::Uuid::new_v4()));
            events.push(json!({"event": "message-start", "role": "ai", "id": id}));
            Active {
                id,
                blocks: 0,
                current: None,
                usage: None,
                reason: None,
            }
        });
        match chunk.get("content") {
            Some(Value::String(text)) if !text.is_empty() => msg.text(text, false, (events, calls)),
            Some(Value::Array(parts)) => {
                for part in parts {
                    match part.get("type").and_then(Value::as_str) {
                        Some("text") => {
                            if let Some(t) =
                                part.get("text").and_then(Value::as_str).filter(|t| !t.is_empty())
                            {
                                msg.text(t, false, (events, calls));
                            }
                        }
                        Some("reasoning" | "thinking") => {
                            let t = part
                                .get("reasoning")
                                .or_else(|| part.get("thinking"))
                                .and_then(Value::as_str)
                                .unwrap_or("");
                            if !t.is_empty() {
                                msg.text(t, true, (events, calls));
                            }
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        }
        if let Some(Value::Array(tcs)) = chunk.get("tool_call_chunks") {
            for tc in tcs {
                msg.tool_chunk(tc, (events, calls));
            }
        }
        if let Some(Value::Object(u)) = chunk.get("usage_metadata") {
            let acc = msg.usage.get_or_insert_with(Map::new);
            for k in ["input_tokens", "output_tokens", "total_tokens"] {
                let add = u.get(k).and_then(Value::as_u64).unwrap_or(0);
                let cur = acc.get(k).and_then(Value::as_u64).unwrap_or(0);
                acc.insert(k.into(), json!(cur.saturating_add(add)));
            }
        }
        let reason = chunk
            .get("response_metadata")
            .and_then(|m| m.get("finish_reason"))
            .filter(|r| !r.is_null());
        if let Some(r) = reason {
            msg.reason = Some(r.clone());
        }
        let last = chunk.get("chunk_position").and_then(Value::as_str) == Some("last");
        if last || reason.is_some() {
            self.finish_key(&key, (events, calls));
        }
    }

    /// Finish the messages `node` streamed in `ns` (its update arrived).
    pub(super) fn finish_node(&mut self, ns: &[String], node: &str, out: Out<'_>) {
        self.finish_key(&(ns.to_vec(), node.to_owned()), out);
    }

    /// Finish every message streamed in `ns` (a step of it ended).
    pub(super) fn finish_namespace(&mut self, ns: &[String], out: Out<'_>) {
        let (events, calls) = out;
        let keys: Vec<_> = self.active.keys().filter(|(n, _)| n == ns).cloned().collect();
        for k in keys {
            self.finish_key(&k, (events, calls));
        }
    }

    /// Finish every message (the run ended); each with its namespace and node.
    pub(super) fn finish_all(
        &mut self,
        calls: &mut Vec<FinishedCall>,
    ) -> Vec<(Vec<String>, String, Vec<Value>)> {
        let keys: Vec<_> = self.active.keys().cloned().collect();
        let mut out = Vec::new();
        for k in keys {
            let mut events = Vec::new();
            self.finish_key(&k, (&mut events, calls));
            out.push((k.0, k.1, events));
        }
        out
    }

    fn finish_key(&mut self, key: &(Vec<String>, String), out: Out<'_>) {
        let (events, calls) = out;
        let Some(mut msg) = self.active.remove(key) else {
            return;
        };
        msg.close_block((events, calls));
        let mut fin = Map::new();
        fin.insert("event".into(), json!("message-finish"));
        if let Some(reason) = msg.reason {
            fin.insert("reason".into(), reason);
        }
        if let Some(usage) = msg.usage {
            fin.insert("usage".into(), Value::Object(usage));
        }
        events.push(Value::Object(fin));
    }

    /// Whether a message is being streamed.
    #[cfg(test)]
    pub(super) fn is_empty(&self) -> bool {
        self.active.is_empty()
    }
}

impl Active {
    fn text(&mut self, text: &str, reasoning: bool, out: Out<'_>) {
        let (events, calls) = out;
        let same = matches!(
            (&self.current, reasoning),
            (Some(Block::Text { .. }), false) | (Some(Block::Reasoning { .. }), true)
        );
        if !same {
            self.close_block((events, calls));
            let index = self.next_index();
            let (block, content) = if reasoning {
                (
                    Block::Reasoning {
                        index,
                        text: String::new(),
                    },
                    json!({"type": "reasoning", "reasoning": ""}),
                )
            } else {
                (
                    Block::Text {
                        index,
                        text: String::new(),
                    },
                    json!({"type": "text", "text": ""}),
                )
            };
            events.push(json!({"event": "content-block-start", "index": index, "content": content}));
            self.current = Some(block);
        }
        if let Some(Block::Text { index, text: acc } | Block::Reasoning { index, text: acc }) =
            &mut self.current
        {
            acc.push_str(text);
            let delta = if reasoning {
                json!({"type": "reasoning-delta", "reasoning": text})
            } else {
                json!({"type": "text-delta", "text": text})
            };
            events.push(json!({"event": "content-block-delta", "index": *index, "delta": delta}));
        }
    }

    fn tool_chunk(&mut self, tc: &Value, out: Out<'_>) {
        let (events, calls) = out;
        let chunk_index = tc.get("index").cloned().unwrap_or_else(|| json!(0));
        let args = tc.get("args").and_then(Value::as_str).unwrap_or("");
        let same = matches!(&self.current, Some(Block::Tool { chunk_index: c, .. }) if *c == chunk_index);
        if !same {
            self.close_block((events, calls));
            let index = self.next_index();
            let id = tc.get("id").cloned().unwrap_or(Value::Null);
            let name = tc.get("name").cloned().unwrap_or(Value::Null);
            events.push(json!({
                "event": "content-block-start", "index": index,
                "content": {"type": "tool_call_chunk", "id": id, "name": name, "args": "", "index": chunk_index},
            }));
            self.current = Some(Block::Tool {
                index,
                chunk_index,
                id,
                name,
                args: String::new(),
            });
        }
        if let Some(Block::Tool {
            index,
            id,
            name,
            args: acc,
            ..
        }) = &mut self.current
        {
            if id.is_null() {
                *id = tc.get("id").cloned().unwrap_or(Value::Null);
            }
            if name.is_null() {
                *name = tc.get("name").cloned().unwrap_or(Value::Null);
            }
            if !args.is_empty() {
                acc.push_str(args);
                events.push(json!({
                    "event": "content-block-delta", "index": *index,
                    "delta": {"type": "tool-call-delta", "args": args},
                }));
            }
        }
    }

    fn next_index(&mut self) -> usize {
        let i = self.blocks;
        self.blocks += 1;
        i
    }

    fn close_block(&mut self, out: Out<'_>) {
        let (events, calls) = out;
        if let Some(block) = self.current.take() {
            let content = block.finished();
            if content.get("type").and_then(Value::as_str) == Some("tool_call") {
                if let (Some(id), Some(name)) = (
                    content.get("id").and_then(Value::as_str),
                    content.get("name").and_then(Value::as_str),
                ) {
                    calls.push(FinishedCall {
                        id: id.to_owned(),
                        name: name.to_owned(),
                        args: content.get("args").cloned().unwrap_or(Value::Null),
                    });
                }
            }
            events.push(json!({"event": "content-block-finish", "index": block.index(), "content": content}));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(evs: &[Value]) -> Vec<String> {
        evs.iter()
            .map(|e| {
                let ev = e["event"].as_str().unwrap_or_default();
                match e.get("delta") {
                    Some(d) => format!("{ev}:{}", d["type"].as_str().unwrap_or_default()),
                    None => ev.to_owned(),
                }
            })
            .collect()
    }

    #[test]
    fn text_then_a_tool_call_stream_as_two_blocks() {
        let mut m = MessageStreams::default();
        let (mut evs, mut calls) = (Vec::new(), Vec::new());
        let ns: Vec<String> = Vec::new();
        m.chunk(
            &ns,
            "agent",
            &json!({"type": "AIMessageChunk", "id": "m1", "content": "Let me"}),
            (&mut evs, &mut calls),
        );
        m.chunk(
            &ns,
            "agent",
            &json!({"type": "AIMessageChunk", "id": "m1", "content": " look"}),
            (&mut evs, &mut calls),
        );
        m.chunk(
            &ns,
            "agent",
            &json!({"type": "AIMessageChunk", "id": "m1", "content": "",
            "tool_call_chunks": [{"index": 0, "id": "c1", "name": "search", "args": "{\"q\": "}]}),
            (&mut evs, &mut calls),
        );
        m.chunk(
            &ns,
            "agent",
            &json!({"type": "AIMessageChunk", "id": "m1", "content": "",
            "tool_call_chunks": [{"index": 0, "id": null, "name": null, "args": "\"rust\"}"}],
            "usage_metadata": {"input_tokens": 3, "output_tokens": 2, "total_tokens": 5},
            "response_metadata": {"finish_reason": "tool_calls"}}),
            (&mut evs, &mut calls),
        );
        assert_eq!(
            kinds(&evs),
            [
                "message-start",
                "content-block-start",
                "content-block-delta:text-delta",
                "content-block-delta:text-delta",
                "content-block-finish",
                "content-block-start",
                "content-block-delta:tool-call-delta",
                "content-block-delta:tool-call-delta",
                "content-block-finish",
                "message-finish",
            ]
        );
        assert_eq!(evs[4]["content"], json!({"type": "text", "text": "Let me look"}));
        assert_eq!(
            evs[8]["content"],
            json!({"type": "tool_call", "id": "c1", "name": "search", "args": {"q": "rust"}})
        );
        assert_eq!(evs[9]["usage"]["total_tokens"], 5);
        assert_eq!(calls.len(), 1);
        assert!(m.is_empty());
    }

    #[test]
    fn a_message_finishes_when_its_node_updates_or_another_starts() {
        let mut m = MessageStreams::default();
        let (mut evs, mut calls) = (Vec::new(), Vec::new());
        let ns = vec!["sub:1".to_owned()];
        m.chunk(
            &ns,
            "a",
            &json!({"id": "m1", "content": "x"}),
            (&mut evs, &mut calls),
        );
        m.chunk(
            &ns,
            "a",
            &json!({"id": "m2", "content": "y"}),
            (&mut evs, &mut calls),
        );
        assert_eq!(kinds(&evs).iter().filter(|k| *k == "message-finish").count(), 1);
        m.finish_node(&ns, "a", (&mut evs, &mut calls));
        assert_eq!(kinds(&evs).iter().filter(|k| *k == "message-finish").count(), 2);
        assert!(m.is_empty());
    }
}
