//! The offline model: plans and answers every turn from what the call says, so one model
//! serves any number of turns and threads (the server compiles the graph once and shares
//! its model between runs), each the same way.
//!
//! - The planner (`Plan`): look the user's last message up, `order_lookup` when it names an
//!   order number, else `kb_search`; after a failed attempt (a "did not work" note), answer
//!   directly.
//! - The generator: answer from the tool results in the prompt (the first article found,
//!   or the order's status), or say nothing was found and ask a clarifying question.

use graphloom_llm::{ChatOptions, Message, MessageKind, Reply, ScriptedModel};
use serde_json::{json, Value};

/// The offline model.
#[must_use]
pub fn model() -> ScriptedModel {
    ScriptedModel::responding(reply).named("scripted-support")
}

/// What the generator says when the tools found nothing usable.
pub const CLARIFY: &str =
    "I could not find an answer to that. Could you tell me a little more, for example the order number?";

/// The answer to one call.
#[must_use]
pub fn reply(messages: &[Message], options: &ChatOptions) -> Reply {
    if options.response_format.is_some() {
        Reply::json(plan(messages))
    } else {
        Reply::text(answer(messages))
    }
}

fn last_user_text(messages: &[Message]) -> String {
    messages
        .iter()
        .rev()
        .find(|m| m.kind == MessageKind::Human)
        .map(Message::text)
        .unwrap_or_default()
}

fn system_texts(messages: &[Message]) -> impl Iterator<Item = String> + '_ {
    messages
        .iter()
        .filter(|m| m.kind == MessageKind::System)
        .map(Message::text)
}

fn plan(messages: &[Message]) -> Value {
    if system_texts(messages).any(|t| t.contains("did not work")) {
        return json!({"next_step": "generate", "tool_calls": []});
    }
    let asked = last_user_text(messages);
    let has_order_number = asked.chars().any(|c| c.is_ascii_digit());
    let tool = if has_order_number && asked.to_lowercase().contains("order") {
        "order_lookup"
    } else {
        "kb_search"
    };
    json!({"next_step": "tool_use", "tool_calls": [{"tool": tool, "query": asked}]})
}

fn answer(messages: &[Message]) -> String {
    let results: Vec<Value> = system_texts(messages)
        .find_map(|t| {
            t.strip_prefix("Tool results: ")
                .and_then(|r| serde_json::from_str(r).ok())
        })
        .unwrap_or_default();
    for r in results.iter().filter(|r| r["status"] == "ok") {
        let out = &r["output"];
        if let Some(article) = out["articles"].as_array().and_then(|a| a.first()) {
            return format!(
                "{}: {}",
                article["title"].as_str().unwrap_or("Help centre"),
                article["body"].as_str().unwrap_or_default()
            );
        }
        if let Some(order) = out.get("order").filter(|o| !o.is_null()) {
            let order = order.as_str().map_or_else(|| order.to_string(), str::to_owned);
            let status = out["status"].as_str().unwrap_or("in progress");
            return match out["eta_days"].as_u64() {
                Some(days) => format!("Order {order} has {status}; it should arrive within {days} days."),
                None => format!("Order {order} has {status}."),
            };
        }
    }
    CLARIFY.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn results(v: Value) -> Message {
        Message::system(format!("Tool results: {v}"))
    }

    #[test]
    fn plans_follow_the_question_and_give_up_after_a_failed_attempt() {
        let p = plan(&[
            Message::system("plan"),
            Message::human("How do I reset my password?"),
        ]);
        assert_eq!(
            p["tool_calls"][0],
            json!({"tool": "kb_search", "query": "How do I reset my password?"})
        );
        let p = plan(&[Message::human("Where is order 1234?")]);
        assert_eq!(p["tool_calls"][0]["tool"], "order_lookup");
        let p = plan(&[
            Message::human("x"),
            Message::system("Attempt 1 did not work: kb_search found nothing."),
        ]);
        assert_eq!(p["next_step"], "generate");
    }

    #[test]
    fn answers_come_from_the_tool_results() {
        let kb = results(json!([{"tool": "kb_search", "status": "ok",
            "output": {"articles": [{"title": "Reset your password", "body": "Settings > Security > Reset password."}]}}]));
        assert!(answer(&[kb]).contains("Reset password"));
        let order = results(json!([{"tool": "order_lookup", "status": "ok",
            "output": {"order": "1234", "status": "shipped", "eta_days": 2}}]));
        assert_eq!(
            answer(&[order]),
            "Order 1234 has shipped; it should arrive within 2 days."
        );
        let empty = results(json!([{"tool": "kb_search", "status": "empty", "output": {"articles": []}}]));
        assert_eq!(answer(&[empty]), CLARIFY);
        assert_eq!(answer(&[Message::human("hi")]), CLARIFY);
    }
}
