//! The prompt hash follows seed 003's rules: a canonical SHA-256 of (version, model,
//! messages, temperature, max tokens, tools) that ignores key order and correlation fields
//! and changes with anything that changes the prompt.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use graphloom_llm::{
    canonical_json, prompt_hash, prompt_hash_payload, ChatOptions, Message, ToolCall, ToolSpec,
    PROMPT_HASH_VERSION,
};
use serde_json::json;
use sha2::{Digest, Sha256};
use std::time::Duration;

fn conversation() -> Vec<Message> {
    vec![
        Message::system("You are terse.").with_id("s-1"),
        Message::human("Order A-17?").with_id("h-1"),
        Message::ai_with_tool_calls(
            "",
            vec![ToolCall {
                id: "call_1".into(),
                name: "lookup".into(),
                args: json!({"order": "A-17", "fields": {"status": true, "eta": true}}),
            }],
        )
        .with_id("a-1"),
        Message::tool("shipped", "call_1").with_id("t-1"),
    ]
}

fn options() -> ChatOptions {
    ChatOptions::new()
        .temperature(0.2)
        .max_tokens(256)
        .tools([ToolSpec::new(
            "lookup",
            "Look up an order",
            json!({"type": "object", "properties": {"order": {"type": "string"}}, "required": ["order"]}),
        )])
}

#[test]
fn reordering_object_keys_does_not_change_the_hash() {
    let base = prompt_hash("gpt-4o-mini", &conversation(), &options());
    let mut msgs = conversation();
    msgs[2].tool_calls[0].args =
        serde_json::from_str(r#"{"fields": {"eta": true, "status": true}, "order": "A-17"}"#).unwrap();
    let opts = ChatOptions::new()
        .temperature(0.2)
        .max_tokens(256)
        .tools([ToolSpec::new(
            "lookup",
            "Look up an order",
            serde_json::from_str(
                r#"{"required": ["order"], "properties": {"order": {"type": "string"}}, "type": "object"}"#,
            )
            .unwrap(),
        )]);
    assert_eq!(prompt_hash("gpt-4o-mini", &msgs, &opts), base);
}

#[test]
fn ids_and_correlation_fields_do_not_change_the_hash() {
    let base = prompt_hash("gpt-4o-mini", &conversation(), &options());
    let mut msgs = conversation();
    for (i, m) in msgs.iter_mut().enumerate() {
        m.id = Some(format!("other-{i}"));
        m.extra
            .insert("usage_metadata".into(), json!({"input_tokens": i}));
        m.extra
            .insert("response_metadata".into(), json!({"created": 1_700_000_000 + i}));
    }
    msgs[2].tool_calls[0].id = "call_zzz".into();
    msgs[3].tool_call_id = Some("call_zzz".into());
    msgs[0].id = None;
    let opts = options()
        .metadata("request_id", "req-9")
        .metadata("trace_id", "trace-9")
        .metadata("user", "u-1")
        .timeout(Duration::from_secs(3));
    assert_eq!(prompt_hash("gpt-4o-mini", &msgs, &opts), base);
}

#[test]
fn anything_that_shapes_the_prompt_changes_the_hash() {
    let base = prompt_hash("gpt-4o-mini", &conversation(), &options());
    let mut changed = Vec::new();
    let mut msgs = conversation();
    msgs[1].content = json!("Order A-18?");
    changed.push(prompt_hash("gpt-4o-mini", &msgs, &options()));
    let mut msgs = conversation();
    msgs[2].tool_calls[0].args["order"] = json!("B-1");
    changed.push(prompt_hash("gpt-4o-mini", &msgs, &options()));
    let mut msgs = conversation();
    msgs.swap(0, 1);
    changed.push(prompt_hash("gpt-4o-mini", &msgs, &options()));
    changed.push(prompt_hash("gpt-4o", &conversation(), &options()));
    changed.push(prompt_hash(
        "gpt-4o-mini",
        &conversation(),
        &options().temperature(0.3),
    ));
    changed.push(prompt_hash(
        "gpt-4o-mini",
        &conversation(),
        &options().max_tokens(257),
    ));
    changed.push(prompt_hash(
        "gpt-4o-mini",
        &conversation(),
        &options().tools([ToolSpec::new("other", "", json!({}))]),
    ));
    let mut msgs = conversation();
    msgs.push(Message::human("and B-1?"));
    changed.push(prompt_hash("gpt-4o-mini", &msgs, &options()));
    for (i, h) in changed.iter().enumerate() {
        assert_ne!(h, &base, "change #{i} left the hash unchanged");
    }
    let unique: std::collections::HashSet<_> = changed.iter().collect();
    assert_eq!(unique.len(), changed.len());
}

#[test]
fn text_parts_hash_like_the_joined_string() {
    let a = vec![Message::human("Hello world")];
    let mut b = vec![Message::human("")];
    b[0].content =
        json!([{"type": "text", "text": "Hello "}, {"type": "text", "text": "world", "id": "part-1"}]);
    assert_eq!(
        prompt_hash("m", &a, &ChatOptions::new()),
        prompt_hash("m", &b, &ChatOptions::new())
    );
}

#[test]
fn the_hash_is_sha256_of_the_documented_canonical_payload() {
    let msgs = vec![Message::system("S").with_id("x"), Message::human("Hi")];
    let opts = ChatOptions::new().temperature(0.5).max_tokens(10);
    let payload = prompt_hash_payload("m1", &msgs, &opts);
    let expected_canonical = format!(
        r#"{{"max_tokens":10,"messages":[{{"content":"S","role":"system"}},{{"content":"Hi","role":"user"}}],"model":"m1","prompt_hash_version":"{PROMPT_HASH_VERSION}","temperature":0.5}}"#
    );
    assert_eq!(canonical_json(&payload), expected_canonical);
    let digest = Sha256::digest(expected_canonical.as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(prompt_hash("m1", &msgs, &opts), hex);
    // Pinned: a change here changes every stored hash, so it needs a new version tag.
    assert_eq!(
        hex,
        "a77b6f2c1dee23a02ab919c025ba04d0d8c8fb43b89427cebe8221107c570b44"
    );
    assert_eq!(
        canonical_json(&prompt_hash_payload("m1", &msgs, &ChatOptions::new())),
        r#"{"max_tokens":null,"messages":[{"content":"S","role":"system"},{"content":"Hi","role":"user"}],"model":"m1","prompt_hash_version":"v1","temperature":null}"#
    );
}
