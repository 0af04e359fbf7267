//! Choosing a provider from a string: `openai:`, `anthropic:`, `ollama:`,
//! `openai-compatible:`; keys and base URLs from the environment, with errors that name the
//! variable to set. Built models are checked against a local server.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![cfg(all(feature = "openai", feature = "anthropic"))]

mod common;

use common::{MockReply, MockServer};
use graphloom_llm::{
    ChatModel, ChatOptions, Error, Message, ModelSpec, ProviderKind, OLLAMA_DEFAULT_BASE_URL,
};
use serde_json::json;
use std::collections::HashMap;

fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    move |k| map.get(k).cloned()
}

fn openai_reply() -> MockReply {
    MockReply::json(json!({"id": "c", "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}]}))
}

#[test]
fn parsing_model_strings() {
    let s = ModelSpec::parse("openai:gpt-4o-mini").unwrap();
    assert_eq!(
        (s.provider, s.model.as_str()),
        (ProviderKind::OpenAi, "gpt-4o-mini")
    );
    let s = ModelSpec::parse("ollama:llama3.2:3b").unwrap();
    assert_eq!(
        (s.provider, s.model.as_str()),
        (ProviderKind::Ollama, "llama3.2:3b")
    );
    let s = ModelSpec::parse(" openai_compatible:meta/llama-3 ").unwrap();
    assert_eq!(s.provider, ProviderKind::OpenAiCompatible);
    assert_eq!(s.to_string(), "openai-compatible:meta/llama-3");
    assert_eq!(
        ModelSpec::parse("anthropic:claude-sonnet-4-5").unwrap().provider,
        ProviderKind::Anthropic
    );
    for bad in ["gpt-4o", "cohere:command", "openai:", ""] {
        let err = ModelSpec::parse(bad).unwrap_err();
        assert!(matches!(err, Error::InvalidModelSpec { .. }), "{bad}: {err:?}");
    }
    assert!(ModelSpec::parse("gpt-4o")
        .unwrap_err()
        .to_string()
        .contains("expected `provider:model`"));
}

#[test]
fn missing_variables_are_named() {
    let cases = [
        ("openai:gpt-4o-mini", "OPENAI_API_KEY"),
        ("anthropic:claude-sonnet-4-5", "ANTHROPIC_API_KEY"),
        ("openai-compatible:qwen", "OPENAI_BASE_URL"),
    ];
    for (spec, var) in cases {
        let err = ModelSpec::parse(spec)
            .unwrap()
            .build_with(env(&[]))
            .err()
            .unwrap();
        assert!(
            matches!(&err, Error::MissingEnv { var: v, .. } if v == var),
            "{err:?}"
        );
        assert!(
            err.to_string()
                .contains(&format!("set the environment variable {var}")),
            "{err}"
        );
    }
    // An empty value counts as unset.
    let err = ModelSpec::parse("openai:gpt-4o")
        .unwrap()
        .build_with(env(&[("OPENAI_API_KEY", " ")]))
        .err()
        .unwrap();
    assert!(matches!(err, Error::MissingEnv { .. }));
    // Ollama needs nothing.
    let m = ModelSpec::parse("ollama:llama3.2")
        .unwrap()
        .build_with(env(&[]))
        .unwrap();
    assert_eq!((m.provider(), m.model_name()), ("ollama", "llama3.2"));
    assert_eq!(OLLAMA_DEFAULT_BASE_URL, "http://127.0.0.1:11434/v1");
}

#[tokio::test]
async fn openai_uses_the_key_and_base_url_from_the_environment() {
    let server = MockServer::start(vec![openai_reply()]).await;
    let m = ModelSpec::parse("openai:gpt-4o-mini")
        .unwrap()
        .build_with(env(&[
            ("OPENAI_API_KEY", "sk-test"),
            ("OPENAI_BASE_URL", &server.v1()),
        ]))
        .unwrap();
    assert_eq!(
        m.invoke(&[Message::human("x")], &ChatOptions::new())
            .await
            .unwrap()
            .text(),
        "ok"
    );
    let r = &server.requests()[0];
    assert_eq!(r.path, "/v1/chat/completions");
    assert_eq!(r.header("authorization").as_deref(), Some("Bearer sk-test"));
    assert_eq!(r.body["model"], "gpt-4o-mini");
}

#[tokio::test]
async fn ollama_and_compatible_servers_work_without_a_key() {
    let server = MockServer::start(vec![openai_reply(), openai_reply()]).await;
    let ollama = ModelSpec::parse("ollama:llama3.2")
        .unwrap()
        .build_with(env(&[("OLLAMA_BASE_URL", &server.v1())]))
        .unwrap();
    ollama
        .invoke(&[Message::human("x")], &ChatOptions::new())
        .await
        .unwrap();
    let compat = ModelSpec::parse("openai-compatible:qwen2.5")
        .unwrap()
        .build_with(env(&[("OPENAI_BASE_URL", &server.v1())]))
        .unwrap();
    assert_eq!(compat.provider(), "openai-compatible");
    compat
        .invoke(&[Message::human("x")], &ChatOptions::new())
        .await
        .unwrap();
    let reqs = server.requests();
    assert_eq!(reqs[0].body["model"], "llama3.2");
    assert_eq!(reqs[1].body["model"], "qwen2.5");
    assert!(reqs.iter().all(|r| r.header("authorization").is_none()));
}

#[tokio::test]
async fn anthropic_uses_its_key_and_base_url() {
    let server = MockServer::start(vec![MockReply::json(
        json!({"id": "msg", "type": "message", "role": "assistant",
        "model": "claude", "content": [{"type": "text", "text": "hej"}], "stop_reason": "end_turn",
        "usage": {"input_tokens": 1, "output_tokens": 1}}),
    )])
    .await;
    let m = ModelSpec::parse("anthropic:claude-haiku-4-5")
        .unwrap()
        .build_with(env(&[
            ("ANTHROPIC_API_KEY", "ant"),
            ("ANTHROPIC_BASE_URL", &server.base),
        ]))
        .unwrap();
    assert_eq!(
        m.invoke(&[Message::human("x")], &ChatOptions::new())
            .await
            .unwrap()
            .text(),
        "hej"
    );
    let r = &server.requests()[0];
    assert_eq!(r.path, "/v1/messages");
    assert_eq!(r.header("x-api-key").as_deref(), Some("ant"));
}
