//! Structured output: the type's schema goes out as the response format, the answer is
//! validated against it before it is deserialised, and a bad answer is a typed error with
//! the raw text cut short.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use graphloom_llm::{ChatModelExt, ChatOptions, Error, ErrorKind, Message, Reply, ScriptedModel, ToolCall};
use serde_json::json;

#[derive(Debug, PartialEq, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
enum Action {
    Lookup,
    Escalate,
    Done,
}

/// What the planner decided.
#[derive(Debug, PartialEq, serde::Deserialize, schemars::JsonSchema)]
struct Decision {
    /// The next action.
    action: Action,
    /// Why, in one sentence.
    reason: String,
    /// Tool arguments, when the action needs them.
    #[serde(default)]
    arguments: Option<std::collections::BTreeMap<String, String>>,
    /// Between 0 and 1.
    #[schemars(range(min = 0.0, max = 1.0))]
    confidence: f64,
}

async fn ask(reply: Reply) -> (graphloom_llm::Result<Decision>, ScriptedModel) {
    let model = ScriptedModel::new([reply]);
    let out = model
        .invoke_structured::<Decision>(&[Message::human("decide")], &ChatOptions::new().temperature(0.0))
        .await;
    (out, model)
}

#[tokio::test]
async fn a_valid_answer_is_parsed_and_the_schema_was_sent() {
    let (out, model) = ask(Reply::json(json!({
        "action": "lookup", "reason": "need the order", "arguments": {"order": "A-17"}, "confidence": 0.8
    })))
    .await;
    let d = out.unwrap();
    assert_eq!(d.action, Action::Lookup);
    assert_eq!(d.arguments.unwrap()["order"], "A-17");
    let req = &model.requests()[0];
    assert_eq!(
        req.options.temperature,
        Some(0.0),
        "the caller's options are kept"
    );
    let format = req.options.response_format.as_ref().unwrap();
    assert_eq!(format.name, "Decision");
    assert_eq!(
        format.schema["properties"]["reason"]["description"],
        "Why, in one sentence."
    );
    assert!(format.schema["required"]
        .as_array()
        .unwrap()
        .contains(&json!("confidence")));
}

#[tokio::test]
async fn fenced_json_and_tool_call_answers_are_accepted() {
    let (out, _) = ask(Reply::text(
        "```json\n{\"action\": \"done\", \"reason\": \"ok\", \"confidence\": 1}\n```",
    ))
    .await;
    assert_eq!(out.unwrap().action, Action::Done);
    let (out, _) = ask(Reply::tool_calls(
        "",
        vec![ToolCall {
            id: "c".into(),
            name: "Decision".into(),
            args: json!({"action": "escalate", "reason": "angry customer", "confidence": 0.4}),
        }],
    ))
    .await;
    assert_eq!(out.unwrap().action, Action::Escalate);
}

#[tokio::test]
async fn schema_violations_are_named() {
    let (out, _) = ask(Reply::json(
        json!({"action": "explode", "reason": 3, "confidence": 7}),
    ))
    .await;
    let err = out.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::StructuredOutput);
    let Error::StructuredOutput {
        type_name,
        reason,
        raw,
    } = &err
    else {
        panic!("{err:?}")
    };
    assert_eq!(type_name, "Decision");
    assert!(reason.contains("does not match the schema"), "{reason}");
    assert!(
        reason.contains("/reason") || reason.contains("reason"),
        "{reason}"
    );
    assert!(raw.contains("explode"));
    let (out, _) = ask(Reply::json(json!({"action": "done", "reason": "x"}))).await;
    assert!(out.unwrap_err().to_string().contains("confidence"));
}

#[tokio::test]
async fn garbage_is_a_typed_error_with_the_raw_text_truncated() {
    let garbage = "Sure! Here is what I think you should do next, step by step. ".repeat(200);
    let (out, _) = ask(Reply::text(garbage.clone())).await;
    let err = out.unwrap_err();
    let Error::StructuredOutput { reason, raw, .. } = &err else {
        panic!("{err:?}")
    };
    assert!(reason.starts_with("not valid JSON"), "{reason}");
    assert!(
        raw.len() <= graphloom_llm::RAW_EXCERPT_LIMIT + 40,
        "{}",
        raw.len()
    );
    assert!(raw.ends_with(&format!("({} bytes in all)", garbage.len())));
    assert!(!err.clone().into_node_error().is_retryable());
}
