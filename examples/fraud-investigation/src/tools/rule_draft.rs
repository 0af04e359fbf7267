//! `rule_draft_tool`: turn the strongest detected patterns into a detection rule and
//! backtest it on the closed cases of the data set.

use super::{input_of, obj, round3, InvestigationTool, ToolFailure, ToolOutcome};
use crate::data::{Dataset, TxSignals};
use crate::state::{InvestigationState, InvestigationStateUpdate, Severity};
use futures::future::BoxFuture;
use serde_json::{json, Value};
use std::sync::Arc;

/// Most conditions in one drafted rule.
pub const MAX_CONDITIONS: usize = 3;

/// A rule condition on a transaction's signals.
#[derive(Debug, Clone, PartialEq)]
pub enum Condition {
    /// At least this many test charges in the hour before.
    SmallTxnCount(u32),
    /// At least this many transactions in one hour.
    TxnCount(u32),
    /// Amount at least this multiple of the typical amount.
    AmountRatio(f64),
    /// High-risk merchant category.
    HighRiskMcc,
    /// Online purchase from an unknown device.
    UnknownDevice,
    /// Outside the home country.
    Foreign,
    /// Impossible travel.
    ImpossibleTravel,
    /// At night (UTC).
    Night,
}

impl Condition {
    /// The condition for a detected pattern.
    #[must_use]
    pub fn for_pattern(name: &str) -> Option<Self> {
        Some(match name {
            "card_testing" => Self::SmallTxnCount(2),
            "velocity" => Self::TxnCount(3),
            "amount_anomaly" => Self::AmountRatio(3.0),
            "high_risk_mcc" => Self::HighRiskMcc,
            "new_device" => Self::UnknownDevice,
            "geo_mismatch" => Self::Foreign,
            "impossible_travel" => Self::ImpossibleTravel,
            "night_time" => Self::Night,
            _ => return None,
        })
    }
    /// Whether a transaction with `s` meets it.
    #[must_use]
    pub fn matches(&self, s: &TxSignals) -> bool {
        match self {
            Self::SmallTxnCount(n) => s.small_txn_count_1h >= *n,
            Self::TxnCount(n) => s.txn_count_1h >= *n,
            Self::AmountRatio(r) => s.amount_ratio >= *r,
            Self::HighRiskMcc => s.high_risk_mcc,
            Self::UnknownDevice => s.device_known == Some(false),
            Self::Foreign => s.foreign,
            Self::ImpossibleTravel => s.impossible_travel.is_some(),
            Self::Night => s.night,
        }
    }
    /// As `{"feature", "op", "value"}`.
    #[must_use]
    pub fn to_json(&self) -> Value {
        let (f, op, v) = match self {
            Self::SmallTxnCount(n) => ("small_txn_count_1h", ">=", json!(n)),
            Self::TxnCount(n) => ("txn_count_1h", ">=", json!(n)),
            Self::AmountRatio(r) => ("amount_to_typical_ratio", ">=", json!(r)),
            Self::HighRiskMcc => ("merchant_mcc_high_risk", "==", json!(true)),
            Self::UnknownDevice => ("device_known", "==", json!(false)),
            Self::Foreign => ("country_is_home", "==", json!(false)),
            Self::ImpossibleTravel => ("impossible_travel", "==", json!(true)),
            Self::Night => ("utc_hour", "<", json!(6)),
        };
        json!({"feature": f, "op": op, "value": v})
    }
}

/// Drafts detection rules.
#[derive(Debug, Clone)]
pub struct RuleDraftTool {
    data: Arc<Dataset>,
}

impl RuleDraftTool {
    /// Backtesting on `data`.
    #[must_use]
    pub fn new(data: Arc<Dataset>) -> Self {
        Self { data }
    }

    fn run(&self, state: &InvestigationState) -> Result<ToolOutcome, ToolFailure> {
        if state.recommendations.is_empty() {
            return Err(ToolFailure::new(
                "rule_draft_tool needs recommendations; run recommendation_tool first",
            ));
        }
        if state.severity == Severity::Low {
            return Ok(ToolOutcome {
                update: InvestigationStateUpdate::new().rule_draft(None),
                input_summary: input_of(state),
                output_summary: obj(
                    json!({"drafted": false, "reason": "severity LOW: nothing worth a rule"}),
                ),
            });
        }
        let mut detected: Vec<(String, f64)> = state
            .pattern_results
            .get("patterns")
            .and_then(Value::as_array)
            .map(|ps| {
                ps.iter()
                    .filter(|p| p.get("detected").and_then(Value::as_bool) == Some(true))
                    .filter_map(|p| {
                        Some((
                            p.get("name")?.as_str()?.to_owned(),
                            p.get("score").and_then(Value::as_f64).unwrap_or(0.0),
                        ))
                    })
                    .collect()
            })
            .unwrap_or_default();
        if detected.is_empty() {
            return Err(ToolFailure::new("no detected patterns to draft a rule from"));
        }
        detected.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        let conditions: Vec<(String, Condition)> = detected
            .iter()
            .filter_map(|(n, _)| Condition::for_pattern(n).map(|c| (n.clone(), c)))
            .take(MAX_CONDITIONS)
            .collect();
        // Backtest on every closed case.
        let (mut tp, mut fp, mut frauds, mut labelled) = (0u32, 0u32, 0u32, 0u32);
        for t in self.data.labelled() {
            let s = self.data.signals(t);
            let fraud = t.label.as_deref() == Some("fraud");
            labelled += 1;
            frauds += u32::from(fraud);
            if conditions.iter().all(|(_, c)| c.matches(&s)) {
                if fraud {
                    tp += 1;
                } else {
                    fp += 1;
                }
            }
        }
        let ratio = |a: u32, b: u32| {
            if b == 0 {
                0.0
            } else {
                round3(f64::from(a) / f64::from(b))
            }
        };
        // The end of the id: UUID v7 ids share their (timestamp) start.
        let alnum: Vec<char> = state
            .investigation_id
            .chars()
            .filter(char::is_ascii_alphanumeric)
            .collect();
        let short_id: String = alnum[alnum.len().saturating_sub(12)..].iter().collect();
        let names: Vec<&str> = conditions.iter().map(|(n, _)| n.as_str()).collect();
        let draft = obj(json!({
            "rule_id": format!("RD-{short_id}"),
            "name": format!("Auto-draft: {}", names.join(" + ")),
            "conditions": conditions.iter().map(|(_, c)| c.to_json()).collect::<Vec<_>>(),
            "action": if state.severity == Severity::Critical { "DECLINE" } else { "REVIEW" },
            "status": "DRAFT",
            "source_transaction": state.transaction_id,
            "backtest": {
                "labelled_transactions": labelled,
                "fraud_cases": frauds,
                "flagged": tp + fp,
                "true_positives": tp,
                "false_positives": fp,
                "precision": ratio(tp, tp + fp),
                "recall": ratio(tp, frauds),
            },
        }));
        Ok(ToolOutcome {
            update: InvestigationStateUpdate::new().rule_draft(Some(draft)),
            input_summary: input_of(state),
            output_summary: obj(json!({
                "drafted": true,
                "conditions": names,
                "true_positives": tp,
                "false_positives": fp,
            })),
        })
    }
}

impl InvestigationTool for RuleDraftTool {
    fn name(&self) -> &str {
        super::RULE_DRAFT_TOOL
    }
    fn description(&self) -> &str {
        "Drafts a detection rule from the strongest detected patterns and backtests it on closed cases. Needs recommendation_tool first."
    }
    fn execute(
        &self,
        state: Arc<InvestigationState>,
    ) -> BoxFuture<'static, Result<ToolOutcome, ToolFailure>> {
        let out = self.run(&state);
        Box::pin(async move { out })
    }
}
