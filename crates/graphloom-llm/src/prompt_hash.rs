//! The prompt hash: a canonical SHA-256 of what decides a model's answer, for drift
//! detection and caching keys. Computed here and nowhere else.
//!
//! The hashed payload (version `v1`) is a JSON object with
//!
//! | field | value |
//! |---|---|
//! | `prompt_hash_version` | `"v1"` |
//! | `model` | the model name |
//! | `messages` | `[{role, content, name?, tool_calls?: [{name, args}]}]` |
//! | `temperature` | number or `null` |
//! | `max_tokens` | integer or `null` |
//! | `tools` | `[{name, description, parameters}]`, only when tools are offered |
//!
//! Left out, because they identify a call rather than shape the prompt: message ids, tool
//! call ids (`id`, `tool_call_id`, `tool_use_id`, also inside content parts), everything in
//! a message's `extra` (usage, response metadata, timestamps), and the correlation fields of
//! [`ChatOptions::metadata`] (request id, trace id, user, ...). Timeouts, stop sequences,
//! tool choice and response format are not part of `v1` either.
//!
//! Canonical JSON: object keys sorted by byte order at every depth, no whitespace, numbers
//! and strings as `serde_json` writes them. Content given as a list of text parts hashes the
//! same as the joined string.

use crate::options::ChatOptions;
use graphloom_core::{Message, MessageKind};
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};
use std::fmt::Write as _;

/// Version tag embedded in every hashed payload.
pub const PROMPT_HASH_VERSION: &str = "v1";

/// Keys dropped from content parts: they correlate, they do not prompt.
const CORRELATION_KEYS: &[&str] = &["id", "tool_call_id", "tool_use_id"];

fn role(kind: MessageKind) -> Option<&'static str> {
    match kind {
        MessageKind::System => Some("system"),
        MessageKind::Human => Some("user"),
        MessageKind::Ai => Some("assistant"),
        MessageKind::Tool => Some("tool"),
        MessageKind::Remove => None,
    }
}

fn strip_correlation(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| !CORRELATION_KEYS.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), strip_correlation(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(strip_correlation).collect()),
        other => other.clone(),
    }
}

fn canonical_content(content: &Value) -> Value {
    if let Value::Array(parts) = content {
        let all_text = parts
            .iter()
            .all(|p| p.get("type").and_then(Value::as_str) == Some("text") && p.get("text").is_some());
        if all_text {
            let joined: String = parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect();
            return Value::String(joined);
        }
        return strip_correlation(content);
    }
    if content.is_null() {
        return Value::String(String::new());
    }
    strip_correlation(content)
}

/// The payload [`prompt_hash`] hashes (before canonical encoding).
#[must_use]
pub fn prompt_hash_payload(model: &str, messages: &[Message], options: &ChatOptions) -> Value {
    let msgs: Vec<Value> = messages
        .iter()
        .filter_map(|m| {
            let role = role(m.kind)?;
            let mut o = Map::new();
            o.insert("role".into(), json!(role));
            o.insert("content".into(), canonical_content(&m.content));
            if let Some(n) = &m.name {
                o.insert("name".into(), json!(n));
            }
            if !m.tool_calls.is_empty() {
                let calls: Vec<Value> = m
                    .tool_calls
                    .iter()
                    .map(|c| json!({"name": c.name, "args": c.args}))
                    .collect();
                o.insert("tool_calls".into(), Value::Array(calls));
            }
            Some(Value::Object(o))
        })
        .collect();
    let mut payload = Map::new();
    payload.insert("prompt_hash_version".into(), json!(PROMPT_HASH_VERSION));
    payload.insert("model".into(), json!(model));
    payload.insert("messages".into(), Value::Array(msgs));
    payload.insert("temperature".into(), json!(options.temperature));
    payload.insert("max_tokens".into(), json!(options.max_tokens));
    if !options.tools.is_empty() {
        let tools: Vec<Value> = options
            .tools
            .iter()
            .map(|t| json!({"name": t.name, "description": t.description, "parameters": t.parameters}))
            .collect();
        payload.insert("tools".into(), Value::Array(tools));
    }
    Value::Object(payload)
}

/// Write `v` as canonical JSON: keys sorted at every depth, no whitespace.
#[must_use]
pub fn canonical_json(v: &Value) -> String {
    let mut out = String::new();
    write_canonical(v, &mut out);
    out
}

fn write_canonical(v: &Value, out: &mut String) {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                if let Some(val) = m.get(k) {
                    write_canonical(val, out);
                }
            }
            out.push('}');
        }
        Value::Array(a) => {
            out.push('[');
            for (i, item) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// The prompt hash of a call: lowercase hex SHA-256 of the canonical `v1` payload.
#[must_use]
pub fn prompt_hash(model: &str, messages: &[Message], options: &ChatOptions) -> String {
    let canonical = canonical_json(&prompt_hash_payload(model, messages, options));
    let digest = Sha256::digest(canonical.as_bytes());
    let mut hex = String::with_capacity(64);
    for b in digest {
        let _ = write!(hex, "{b:02x}");
    }
    hex
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_json_sorts_keys_at_every_depth() {
        let v = json!({"b": 1, "a": {"d": [1, {"z": 0, "y": "é"}], "c": null}});
        assert_eq!(
            canonical_json(&v),
            r#"{"a":{"c":null,"d":[1,{"y":"é","z":0}]},"b":1}"#
        );
    }

    #[test]
    fn empty_hash_is_stable_hex() {
        let h = prompt_hash("m", &[], &ChatOptions::new());
        assert_eq!(h.len(), 64);
        assert!(h
            .chars()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
        assert_eq!(h, prompt_hash("m", &[], &ChatOptions::new()));
    }
}
