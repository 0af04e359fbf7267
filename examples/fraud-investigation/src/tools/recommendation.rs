//! `recommendation_tool`: actions for the operations team, by severity and findings.

use super::{input_of, obj, InvestigationTool, ToolFailure, ToolOutcome};
use crate::state::{InvestigationState, InvestigationStateUpdate, Recommendation, Severity};
use futures::future::BoxFuture;
use serde_json::json;
use std::sync::Arc;

/// Recommends actions.
#[derive(Debug, Clone, Copy, Default)]
pub struct RecommendationTool;

fn rec(action: &str, priority: &str, rationale: impl Into<String>) -> Recommendation {
    Recommendation {
        action: action.to_owned(),
        priority: priority.to_owned(),
        rationale: rationale.into(),
    }
}

impl RecommendationTool {
    fn run(state: &InvestigationState) -> ToolOutcome {
        let detected = |name: &str| state.evidence.iter().any(|e| e.kind == name);
        let mut recs = Vec::new();
        if state.reasoning.is_empty() {
            recs.push(rec(
                "MANUAL_REVIEW",
                "P2",
                "automated reasoning is unavailable for this case; an analyst must assess it",
            ));
        } else {
            match state.severity {
                Severity::Critical => {
                    recs.push(rec(
                        "BLOCK_CARD",
                        "P1",
                        "fraud in progress: stop further authorisations on the card",
                    ));
                    recs.push(rec(
                        "CONTACT_CUSTOMER",
                        "P1",
                        "confirm the transactions with the cardholder and reissue the card",
                    ));
                    recs.push(rec(
                        "REVERSE_OR_DISPUTE",
                        "P2",
                        "reverse the authorisation or open a chargeback for the fraudulent charges",
                    ));
                }
                Severity::High => {
                    recs.push(rec(
                        "HOLD_AND_STEP_UP",
                        "P1",
                        "hold the card and require strong customer authentication for the next purchases",
                    ));
                    recs.push(rec(
                        "CONTACT_CUSTOMER",
                        "P2",
                        "confirm the transaction with the cardholder",
                    ));
                }
                Severity::Medium => {
                    recs.push(rec(
                        "MANUAL_REVIEW",
                        "P2",
                        "suspicious but not conclusive: queue for an analyst",
                    ));
                    recs.push(rec("MONITOR_ACCOUNT", "P3", "watch the account for 14 days"));
                }
                Severity::Low => {
                    recs.push(rec(
                        "CLOSE_AS_LEGITIMATE",
                        "P3",
                        "the evidence is consistent with the cardholder's normal behaviour",
                    ));
                }
            }
            if state.severity >= Severity::High && detected("new_device") {
                recs.push(rec(
                    "DENYLIST_DEVICE",
                    "P2",
                    "the purchase came from a device never seen on this card",
                ));
            }
            if state.severity >= Severity::High && detected("card_testing") {
                recs.push(rec(
                    "REVIEW_TEST_MERCHANT",
                    "P3",
                    "the test charges went through one merchant; alert its acquirer",
                ));
            }
        }
        let actions: Vec<&str> = recs.iter().map(|r| r.action.as_str()).collect();
        ToolOutcome {
            output_summary: obj(
                json!({ "count": recs.len(), "actions": actions, "severity": state.severity.as_str() }),
            ),
            update: InvestigationStateUpdate::new().recommendations(recs),
            input_summary: input_of(state),
        }
    }
}

impl InvestigationTool for RecommendationTool {
    fn name(&self) -> &str {
        super::RECOMMENDATION_TOOL
    }
    fn description(&self) -> &str {
        "Recommends actions (block, contact, review, close) from the severity and the findings. Needs reasoning_tool first."
    }
    fn execute(
        &self,
        state: Arc<InvestigationState>,
    ) -> BoxFuture<'static, Result<ToolOutcome, ToolFailure>> {
        let out = Self::run(&state);
        Box::pin(async move { Ok(out) })
    }
}
