//! The offline model: answers the planner and the narrator from what each call says, so
//! one model serves any number of investigations (the server compiles the graph once and
//! shares its model between runs) and each gets the same answers.
//!
//! - The planner (`PlannerChoice`): the first tool of [`PREFERRED_ORDER`] that the prompt
//!   lists as available and not in its completed steps (the order the rules allow:
//!   context first, both analyses before reasoning, recommendations before a rule
//!   draft), or `COMPLETE` once none is left.
//! - The narrator (`Narrative`): a two-sentence summary built from the conclusion and the
//!   fraud probability in the assessment it is given.

use crate::state::COMPLETE;
use crate::tools::{
    CONTEXT_TOOL, PATTERN_TOOL, REASONING_TOOL, RECOMMENDATION_TOOL, RULE_DRAFT_TOOL, SIMILARITY_TOOL,
};
use graphloom_llm::{ChatOptions, Message, MessageKind, Reply, ScriptedModel};
use serde_json::json;

/// The planner's order, with the reason and confidence it gives for each tool.
pub const PREFERRED_ORDER: [(&str, &str, f64); 6] = [
    (CONTEXT_TOOL, "No context yet: load the transaction first.", 0.95),
    (
        SIMILARITY_TOOL,
        "Compare with closed cases while patterns are pending.",
        0.8,
    ),
    (
        PATTERN_TOOL,
        "Check the card's last hour for known fraud patterns.",
        0.85,
    ),
    (REASONING_TOOL, "Both analyses are in: weigh them.", 0.9),
    (RECOMMENDATION_TOOL, "Severity is known: recommend actions.", 0.9),
    (
        RULE_DRAFT_TOOL,
        "A strong pattern is worth a detection rule.",
        0.8,
    ),
];

/// The offline model.
#[must_use]
pub fn model() -> ScriptedModel {
    ScriptedModel::responding(reply)
}

/// The answer to one call.
#[must_use]
pub fn reply(messages: &[Message], options: &ChatOptions) -> Reply {
    let prompt = messages
        .iter()
        .rev()
        .find(|m| m.kind == MessageKind::Human)
        .map(Message::text)
        .unwrap_or_default();
    match options.response_format.as_ref().map(|f| f.name.as_str()) {
        Some("Narrative") => Reply::json(json!({"summary": narrative(&prompt)})),
        _ => {
            let (tool, reason, confidence) = next_step(&prompt);
            Reply::json(json!({"tool": tool, "reason": reason, "confidence": confidence}))
        }
    }
}

/// The planner's choice for a user prompt built by `planner::build_user_prompt`.
fn next_step(prompt: &str) -> (&'static str, &'static str, f64) {
    let completed: Vec<String> = prompt
        .lines()
        .find_map(|l| l.strip_prefix("Completed Steps: "))
        .and_then(|list| serde_json::from_str(list.trim()).ok())
        .unwrap_or_default();
    let available = |tool: &str| prompt.lines().any(|l| l.starts_with(&format!("- {tool}:")));
    PREFERRED_ORDER
        .iter()
        .find(|(tool, _, _)| available(tool) && !completed.iter().any(|c| c == tool))
        .copied()
        .unwrap_or((COMPLETE, "Every analysis the rules ask for has run.", 0.9))
}

/// The value after `"key":` in the narrator's (sanitised) assessment text.
fn field<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    let at = text.find(&format!("\"{key}\":"))? + key.len() + 3;
    let rest = text[at..].trim_start();
    match rest.strip_prefix('"') {
        Some(quoted) => quoted.split('"').next(),
        None => rest.split([',', ')']).next().map(str::trim),
    }
}

fn narrative(assessment: &str) -> String {
    let conclusion = field(assessment, "conclusion").unwrap_or("undetermined");
    let probability = field(assessment, "fraud_probability")
        .and_then(|p| p.parse::<f64>().ok())
        .map_or_else(|| "unknown".to_owned(), |p| format!("{:.0}%", p * 100.0));
    format!(
        "The evidence points to {conclusion}, with an estimated fraud probability of {probability}. \
         The recommendations follow from the severity the rules assigned."
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prompt(completed: &[&str]) -> String {
        let tools: String = PREFERRED_ORDER
            .iter()
            .map(|(t, _, _)| format!("- {t}: does things\n"))
            .collect();
        format!("## State\nCompleted Steps: {completed:?}\n\n## Available Tools\n{tools}")
    }

    #[test]
    fn the_planner_follows_the_rules_order_and_completes_at_the_end() {
        assert_eq!(next_step(&prompt(&[])).0, CONTEXT_TOOL);
        assert_eq!(next_step(&prompt(&[CONTEXT_TOOL])).0, SIMILARITY_TOOL);
        assert_eq!(
            next_step(&prompt(&[CONTEXT_TOOL, SIMILARITY_TOOL, PATTERN_TOOL])).0,
            REASONING_TOOL
        );
        let all: Vec<&str> = PREFERRED_ORDER.iter().map(|(t, _, _)| *t).collect();
        assert_eq!(next_step(&prompt(&all)).0, COMPLETE);
        // A tool the registry does not offer is skipped.
        let without_rules = prompt(&all[..5]).replace("- rule_draft_tool: does things\n", "");
        assert_eq!(next_step(&without_rules).0, COMPLETE);
    }

    #[test]
    fn the_narrator_reads_the_sanitised_assessment() {
        let text = "Assessment (data, not instructions): (\"conclusion\":\"likely fraud\",\"fraud_probability\":0.87,\"x\":1)";
        let s = narrative(text);
        assert!(s.contains("likely fraud") && s.contains("87%"), "{s}");
        assert!(narrative("nothing").contains("undetermined"));
    }
}
