//! The offline model: routes and answers every call from the conversation, so one model
//! serves any number of turns, threads and users (the server compiles the graph once and
//! shares its model between runs), each the same way.
//!
//! - The router (a call with a response format): `FINISH` once the turn has an answer,
//!   else the agent [`classify`] picks for the user's last message.
//! - An agent (a call offered tools): first its lookups (the retrieval agent searches
//!   session facts and long-term knowledge in parallel; the reasoning agent fetches its
//!   context block), then an answer from what they returned.

use crate::supervisor::{classify, Intent};
use graphloom_llm::{ChatOptions, Message, MessageKind, Reply, ScriptedModel, ToolCall};
use serde_json::{json, Value};

/// What the retrieval agent says when nothing was remembered.
pub const NOTHING_SAVED: &str = "I don't have anything saved about that yet.";

/// The offline model.
#[must_use]
pub fn model() -> ScriptedModel {
    ScriptedModel::responding(reply)
}

/// The answer to one call.
#[must_use]
pub fn reply(messages: &[Message], options: &ChatOptions) -> Reply {
    if options.response_format.is_some() {
        return Reply::json(route(messages));
    }
    let tools: Vec<&str> = options.tools.iter().map(|t| t.name.as_str()).collect();
    // What the tools answered since the user's last message.
    let turn_start = messages
        .iter()
        .rposition(|m| m.kind == MessageKind::Human)
        .map_or(0, |i| i + 1);
    let results: Vec<&Message> = messages[turn_start..]
        .iter()
        .filter(|m| m.kind == MessageKind::Tool)
        .collect();
    if results.is_empty() && !tools.is_empty() {
        return lookups(messages, &tools);
    }
    Reply::text(answer(&results))
}

fn last_user_text(messages: &[Message]) -> String {
    messages
        .iter()
        .rev()
        .find(|m| m.kind == MessageKind::Human)
        .map(Message::text)
        .unwrap_or_default()
}

fn route(messages: &[Message]) -> Value {
    let answered = messages
        .iter()
        .rev()
        .find(|m| m.kind != MessageKind::System)
        .is_some_and(|m| m.kind == MessageKind::Ai && m.tool_calls.is_empty());
    if answered {
        return json!({"next": "FINISH", "reason": "the user's request has an answer"});
    }
    let intent = classify(&last_user_text(messages));
    let reason = match intent {
        Intent::Store => "the user asks me to remember something",
        Intent::Recall => "the user asks what I remember",
        Intent::Chat => "a general request",
    };
    json!({"next": intent.agent(), "reason": reason})
}

fn lookups(messages: &[Message], tools: &[&str]) -> Reply {
    let query = last_user_text(messages);
    // Ids by position in the conversation: deterministic, and unique on a thread.
    let n = messages.len();
    let call = |i: usize, name: &str, args: Value| ToolCall {
        id: format!("call_{n}_{i}"),
        name: name.to_owned(),
        args,
    };
    let calls = if tools.contains(&"l2_search_facts") {
        vec![
            call(0, "l2_search_facts", json!({"query": query})),
            call(1, "l3_search_knowledge", json!({"query": query})),
        ]
    } else if tools.contains(&"get_context_block") {
        vec![call(0, "get_context_block", json!({}))]
    } else {
        return Reply::text("I have no tools for that.");
    };
    Reply::tool_calls("", calls)
}

fn answer(results: &[&Message]) -> String {
    let mut facts: Vec<String> = Vec::new();
    let mut add = |f: &str| {
        let f = f.trim();
        if !f.is_empty() && !facts.iter().any(|x| x == f) {
            facts.push(f.to_owned());
        }
    };
    let mut block = false;
    for m in results {
        let text = m.text();
        if m.extra.get("status").and_then(Value::as_str) == Some("error") {
            continue;
        }
        match serde_json::from_str::<Value>(&text) {
            Ok(v) => {
                for hit in v["found"].as_array().into_iter().flatten() {
                    add(hit["content"].as_str().unwrap_or_default());
                }
            }
            // The context block is text: the lines under "Known about the user:".
            Err(_) => {
                block = true;
                text.lines()
                    .skip_while(|l| !l.starts_with("Known about the user:"))
                    .skip(1)
                    .filter_map(|l| l.strip_prefix("- "))
                    .filter(|l| *l != "nothing yet")
                    .for_each(&mut add);
            }
        }
    }
    match (facts.is_empty(), block) {
        (true, false) => NOTHING_SAVED.to_owned(),
        (true, true) => {
            "I don't know much about you yet; tell me something and I will remember it.".to_owned()
        }
        (false, false) => format!("You told me: {}.", facts.join("; ")),
        (false, true) => format!("Here is what I know about you: {}.", facts.join("; ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use graphloom_llm::ToolSpec;

    fn tool_msg(text: &str) -> Message {
        Message::tool(text, "c")
    }

    #[test]
    fn the_router_routes_by_intent_and_finishes_after_an_answer() {
        let ask = [
            Message::system("route"),
            Message::human("What do you remember about my favourite colour?"),
        ];
        assert_eq!(route(&ask)["next"], "recall_agent");
        let mut done = ask.to_vec();
        done.push(Message::ai("You told me: teal."));
        assert_eq!(route(&done)["next"], "FINISH");
        assert_eq!(
            route(&[Message::human("Remember that I like tea.")])["next"],
            "memory_writer"
        );
    }

    #[test]
    fn agents_look_up_then_answer_from_what_they_found() {
        let opts = ChatOptions::new().tools([
            ToolSpec::new("l2_search_facts", "", json!({})),
            ToolSpec::new("l3_search_knowledge", "", json!({})),
        ]);
        let q = [Message::human("What do you remember?")];
        let first = format!("{:?}", reply(&q, &opts));
        assert!(
            first.contains("l2_search_facts") && first.contains("l3_search_knowledge"),
            "{first}"
        );
        let hits = tool_msg(r#"{"tier":"L2","found":[{"content":"my favourite colour is teal"}]}"#);
        let none = tool_msg(r#"{"tier":"L3","found":[]}"#);
        assert_eq!(
            answer(&[&hits, &none]),
            "You told me: my favourite colour is teal."
        );
        assert_eq!(answer(&[&none]), NOTHING_SAVED);
        let block = tool_msg("Recent conversation:\n- user: hi\nKnown about the user:\n- likes teal\n");
        assert_eq!(answer(&[&block]), "Here is what I know about you: likes teal.");
    }
}
