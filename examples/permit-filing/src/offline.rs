//! The offline model: the happy path of [`crate::sample_input`] (resolve the well,
//! register the operator, which pauses for approval, select the spacing skill, assess
//! spacing, answer), each step chosen from the conversation, so one model serves any
//! number of runs and threads (the server compiles the graph once and shares its model
//! between runs), each the same way.
//!
//! The step is the first of these the current turn (the messages since the user's last
//! one) has not done: an `entity_resolve` result, a `create_entity` result (or the
//! reviewer's rejection of it), a `SKILL_SELECT:` answer, a `spacing_assessment` result;
//! then the summary. Usage per step is fixed, as a real model would report it.

use graphloom_llm::{ChatOptions, Message, MessageKind, Reply, ScriptedModel, ToolCall, Usage};
use serde_json::{json, Value};

/// The offline model.
#[must_use]
pub fn model() -> ScriptedModel {
    ScriptedModel::responding(reply)
}

/// The five replies of the happy path for the `turn`-th user message (1 for the first),
/// in order.
#[must_use]
pub fn happy_path(turn: usize) -> [Reply; 5] {
    [
        resolve(turn),
        create(turn),
        select_skill(),
        assess(turn),
        // A fixed list cannot read the conversation: its summary is of the spacing the
        // tool computes from the field data for the sample's well.
        summary(&crate::field::spacing("42-329-12345").unwrap_or(Value::Null)),
    ]
}

fn call(id: String, name: &str, args: Value) -> ToolCall {
    ToolCall {
        id,
        name: name.into(),
        args,
    }
}

fn resolve(turn: usize) -> Reply {
    Reply::tool_calls(
        "Resolving the well first.",
        vec![call(
            format!("call_resolve_{turn}"),
            "entity_resolve",
            json!({"query": "Mitchell Ranch 1H"}),
        )],
    )
    .with_usage(Usage::new(900, 40))
}

fn create(turn: usize) -> Reply {
    Reply::tool_calls(
        "The operator is not in the knowledge graph yet; registering it.",
        vec![call(
            format!("call_create_{turn}"),
            "create_entity",
            json!({"kind": "operator", "name": "Permian Basin Energy LLC", "external_id": "op-permian-energy"}),
        )],
    )
    .with_usage(Usage::new(1_100, 60))
}

fn select_skill() -> Reply {
    Reply::text("I need the spacing rules for this filing. SKILL_SELECT:rule37_spacing")
        .with_usage(Usage::new(1_300, 30))
}

fn assess(turn: usize) -> Reply {
    Reply::tool_calls(
        "Assessing spacing against the statewide rule.",
        vec![call(
            format!("call_spacing_{turn}"),
            "spacing_assessment",
            json!({"well_api": "42-329-12345"}),
        )],
    )
    .with_usage(Usage::new(2_400, 70))
}

/// The `spacing_assessment` result of the turn.
fn spacing_result(now: &[Message]) -> Value {
    now.iter()
        .rev()
        .find(|m| m.kind == MessageKind::Tool && m.name.as_deref() == Some("spacing_assessment"))
        .and_then(|m| serde_json::from_str::<Value>(&m.text()).ok())
        .map(|v| v["result"].clone())
        .unwrap_or(Value::Null)
}

/// The spacing summary, written from a spacing assessment result.
fn summary(result: &Value) -> Reply {
    let text = if result["lease_line_distance_ft"].is_number() {
        let ft = |k: &str| {
            result[k]
                .as_f64()
                .map_or_else(|| "unknown".to_owned(), |x| format!("{x:.0}"))
        };
        let required = result["exception_required"] == true;
        format!(
            "Spacing Summary:\n- Distance to nearest lease line: {} ft ({} line; statewide minimum 467 ft)\n- \
             Distance to nearest well: {} ft ({}; minimum 1200 ft)\n- Exception required: {}\n{} The operator \
             Permian Basin Energy LLC is registered. Next: assemble Form W-1.",
            ft("lease_line_distance_ft"),
            result["nearest_lease_line"].as_str().unwrap_or("nearest"),
            ft("nearest_well_distance_ft"),
            result["nearest_well"]["name"].as_str().unwrap_or("none on the reservoir"),
            if required { "yes" } else { "no" },
            if required {
                "A Rule 37 exception is required for Mitchell Ranch 1H."
            } else {
                "Mitchell Ranch 1H is at a regular location."
            },
        )
    } else {
        "Spacing Summary: unavailable; the spacing assessment returned no distances.".to_owned()
    };
    Reply::text(text).with_usage(Usage::new(2_700, 120))
}

/// The answer to one call.
#[must_use]
pub fn reply(messages: &[Message], _options: &ChatOptions) -> Reply {
    let turn = messages
        .iter()
        .filter(|m| m.kind == MessageKind::Human)
        .count()
        .max(1);
    let start = messages
        .iter()
        .rposition(|m| m.kind == MessageKind::Human)
        .map_or(0, |i| i + 1);
    let now = &messages[start..];
    let answered = |tool: &str| {
        now.iter()
            .any(|m| m.kind == MessageKind::Tool && m.name.as_deref() == Some(tool))
    };
    let rejected = |tool: &str| {
        now.iter()
            .any(|m| m.kind == MessageKind::System && m.text().contains(&format!("rejected the {tool} call")))
    };
    let selected = now
        .iter()
        .any(|m| m.kind == MessageKind::Ai && m.text().contains("SKILL_SELECT:"));
    if !answered("entity_resolve") {
        resolve(turn)
    } else if !answered("create_entity") && !rejected("create_entity") {
        create(turn)
    } else if !selected {
        select_skill()
    } else if !answered("spacing_assessment") {
        assess(turn)
    } else {
        summary(&spacing_result(now))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(name: &str) -> Message {
        let mut m = Message::tool("{}", "c");
        m.name = Some(name.into());
        m
    }

    fn step(messages: &[Message]) -> String {
        format!("{:?}", reply(messages, &ChatOptions::new()))
    }

    #[test]
    fn each_step_follows_what_the_turn_has_done() {
        let mut conv = vec![Message::system("s"), Message::human("file it")];
        assert!(step(&conv).contains("entity_resolve"));
        conv.push(result("entity_resolve"));
        assert!(step(&conv).contains("create_entity"));
        conv.push(result("create_entity"));
        assert!(step(&conv).contains("SKILL_SELECT:rule37_spacing"));
        conv.push(Message::ai("SKILL_SELECT:rule37_spacing"));
        assert!(step(&conv).contains("spacing_assessment"));
        conv.push(result("spacing_assessment"));
        assert!(step(&conv).contains("Spacing Summary"));
        // A new user message starts the path again, with ids of its own.
        conv.push(Message::human("again"));
        assert!(step(&conv).contains("call_resolve_2"));
    }

    #[test]
    fn a_rejected_registration_is_not_asked_for_again() {
        let conv = [
            Message::human("file it"),
            result("entity_resolve"),
            Message::system("HITL: the reviewer rejected the create_entity call with arguments {}."),
        ];
        assert!(step(&conv).contains("SKILL_SELECT"));
    }
}
