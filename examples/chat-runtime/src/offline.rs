//! The offline model: answers each call from the conversation, so one model serves any
//! number of runs (the server compiles the graph once and shares its model between runs),
//! each the same way.
//!
//! A user's question gets a `knowledge_search` call for it; the search's result gets an
//! answer from it (the password reset steps for a password question, else the best
//! match); a failed search gets an apology.

use graphloom_llm::{ChatOptions, Message, MessageKind, Reply, ScriptedModel, ToolCall};
use serde_json::{json, Value};

/// The answer to a password question.
pub const RESET_ANSWER: &str =
    "Open Settings, choose Security, then Reset password. A link arrives by email.";

/// The offline model.
#[must_use]
pub fn model() -> ScriptedModel {
    ScriptedModel::responding(reply).named("scripted-support")
}

/// The answer to one call.
#[must_use]
pub fn reply(messages: &[Message], _options: &ChatOptions) -> Reply {
    let Some(last) = messages.iter().rev().find(|m| m.kind != MessageKind::System) else {
        return Reply::text("How can I help?");
    };
    if last.kind == MessageKind::Tool {
        return Reply::text(answer(&last.text()));
    }
    let question = messages
        .iter()
        .rev()
        .find(|m| m.kind == MessageKind::Human)
        .map(Message::text)
        .unwrap_or_default();
    let query = match question.trim() {
        "" => "help".to_owned(),
        q => q.chars().take(200).collect(),
    };
    Reply::tool_calls(
        "",
        vec![ToolCall {
            // One id per position in the conversation: deterministic, unique on a thread.
            id: format!("call_search_{}", messages.len()),
            name: "knowledge_search".into(),
            args: json!({"query": query}),
        }],
    )
}

/// An answer from a `knowledge_search` tool message (its UI-safe payload).
fn answer(payload: &str) -> String {
    let v: Value = serde_json::from_str(payload).unwrap_or(Value::Null);
    if v.get("errorCode").is_some() {
        return "Sorry, the knowledge base is not reachable right now; please try again later.".to_owned();
    }
    let query = v["query"].as_str().unwrap_or_default();
    if query.to_lowercase().contains("password") {
        return RESET_ANSWER.to_owned();
    }
    match (v["resultCount"].as_u64(), v["topUrl"].as_str()) {
        (Some(n), Some(url)) if n > 0 => {
            format!("I found {n} articles about \"{query}\"; the best match is {url}.")
        }
        _ => format!("I found nothing about \"{query}\" in the knowledge base."),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_question_gets_a_search_and_the_search_an_answer() {
        let q = [
            Message::system("s"),
            Message::human("How do I reset my password?"),
        ];
        let r = reply(&q, &ChatOptions::new());
        let call = format!("{r:?}");
        assert!(
            call.contains("knowledge_search") && call.contains("reset my password"),
            "{call}"
        );
        let found = json!({"query": "How do I reset my password?", "resultCount": 2, "topUrl": "https://kb.example/x"});
        assert_eq!(answer(&found.to_string()), RESET_ANSWER);
        let other = json!({"query": "billing", "resultCount": 2, "topUrl": "https://kb.example/billing"});
        assert!(answer(&other.to_string()).contains("https://kb.example/billing"));
        assert!(
            answer(&json!({"errorCode": "timeout", "safeMessage": "x"}).to_string()).starts_with("Sorry")
        );
    }
}
