//! `pattern_tool`: known fraud patterns in the transaction and the card's last hour.

use super::{context_signals, input_of, obj, round3, InvestigationTool, ToolFailure, ToolOutcome};
use crate::data::TxSignals;
use crate::state::{Evidence, InvestigationState, InvestigationStateUpdate};
use futures::future::BoxFuture;
use serde_json::{json, Value};
use std::sync::Arc;

/// Every pattern the tool checks, in report order.
pub const PATTERN_NAMES: [&str; 8] = [
    "card_testing",
    "velocity",
    "amount_anomaly",
    "geo_mismatch",
    "impossible_travel",
    "new_device",
    "high_risk_mcc",
    "night_time",
];

/// Checks the transaction against known fraud patterns.
#[derive(Debug, Clone, Copy, Default)]
pub struct PatternTool;

struct Finding {
    name: &'static str,
    detected: bool,
    score: f64,
    detail: String,
}

fn findings(s: &TxSignals, home: &str, country: &str) -> Vec<Finding> {
    let f = |name, detected, score, detail: String| Finding {
        name,
        detected,
        score: if detected { score } else { 0.0 },
        detail,
    };
    let travel = s.impossible_travel.as_ref();
    vec![
        f(
            "card_testing",
            s.small_txn_count_1h >= 2,
            0.9,
            format!(
                "{} charge(s) of at most 2.00 in the hour before",
                s.small_txn_count_1h
            ),
        ),
        f(
            "velocity",
            s.txn_count_1h >= 3,
            0.5,
            format!("{} transactions on the card within one hour", s.txn_count_1h),
        ),
        f(
            "amount_anomaly",
            s.amount_ratio >= 3.0,
            (0.3 + s.amount_ratio / 30.0).min(0.9),
            format!("amount is {:.1}x the account's typical purchase", s.amount_ratio),
        ),
        f(
            "geo_mismatch",
            s.foreign,
            0.45,
            format!("transaction country {country}, cardholder lives in {home}"),
        ),
        f(
            "impossible_travel",
            travel.is_some(),
            0.9,
            travel.map_or_else(
                || "no card-present use abroad in the last 6 hours".to_owned(),
                |(id, c, h)| format!("card-present use in {c} ({id}) only {h} h earlier"),
            ),
        ),
        f(
            "new_device",
            s.device_known == Some(false),
            0.5,
            match s.device_known {
                Some(false) => "online purchase from a device never seen on this card".to_owned(),
                Some(true) => "online purchase from a known device".to_owned(),
                None => "card-present purchase".to_owned(),
            },
        ),
        f(
            "high_risk_mcc",
            s.high_risk_mcc,
            0.35,
            "merchant category is often used to monetise stolen cards".to_owned(),
        ),
        f(
            "night_time",
            s.night,
            0.15,
            "between 00:00 and 06:00 UTC".to_owned(),
        ),
    ]
}

fn hypotheses(detected: &[&str], ecommerce: bool) -> Vec<String> {
    let has = |n: &str| detected.contains(&n);
    let mut h = Vec::new();
    if has("card_testing") {
        h.push("Stolen card details were validated with test charges and then monetised (card testing followed by cash-out)".to_owned());
    }
    if ecommerce && has("new_device") && has("geo_mismatch") {
        h.push("Card-not-present fraud from an unknown device abroad".to_owned());
    }
    if has("impossible_travel") {
        h.push("A counterfeit or cloned card was used in person far from the cardholder".to_owned());
    }
    if has("high_risk_mcc") && has("amount_anomaly") {
        h.push("Purchase of easily resold goods, typical of fraud monetisation".to_owned());
    }
    if h.is_empty() {
        h.push(if detected.is_empty() {
            "Activity consistent with the cardholder's normal behaviour".to_owned()
        } else {
            "Unusual but possibly legitimate purchase by the cardholder".to_owned()
        });
    }
    h
}

impl PatternTool {
    fn run(state: &InvestigationState) -> Result<ToolOutcome, ToolFailure> {
        let signals = context_signals(state)?;
        let home = state
            .context
            .get("account")
            .and_then(|a| a.get("home_country"))
            .and_then(Value::as_str)
            .unwrap_or("?");
        let country = state
            .context
            .get("transaction")
            .and_then(|a| a.get("country"))
            .and_then(Value::as_str)
            .unwrap_or("?");
        let all = findings(&signals, home, country);
        let detected: Vec<&str> = all.iter().filter(|f| f.detected).map(|f| f.name).collect();
        // Noisy-OR: each detected pattern independently explains the case with its score.
        let risk = 1.0 - all.iter().map(|f| 1.0 - f.score).product::<f64>();
        let patterns: Vec<Value> = all
            .iter()
            .map(|f| json!({"name": f.name, "detected": f.detected, "score": round3(f.score), "detail": f.detail}))
            .collect();
        let evidence: Vec<Evidence> = all
            .iter()
            .filter(|f| f.detected)
            .map(|f| Evidence {
                source: super::PATTERN_TOOL.to_owned(),
                kind: f.name.to_owned(),
                detail: f.detail.clone(),
                weight: round3(f.score),
            })
            .collect();
        let hyps = hypotheses(&detected, signals.ecommerce);
        let results = obj(json!({
            "patterns": patterns,
            "detected": detected,
            "risk_score": round3(risk),
        }));
        Ok(ToolOutcome {
            update: InvestigationStateUpdate::new()
                .pattern_results(results)
                .evidence(evidence)
                .hypotheses(hyps.clone()),
            input_summary: input_of(state),
            output_summary: obj(json!({
                "detected": detected,
                "risk_score": round3(risk),
                "hypotheses": hyps.len(),
            })),
        })
    }
}

impl InvestigationTool for PatternTool {
    fn name(&self) -> &str {
        super::PATTERN_TOOL
    }
    fn description(&self) -> &str {
        "Checks the transaction and the card's last hour for fraud patterns: card testing, velocity, amount anomaly, geo mismatch, impossible travel, new device, high-risk merchant category, night time."
    }
    fn execute(
        &self,
        state: Arc<InvestigationState>,
    ) -> BoxFuture<'static, Result<ToolOutcome, ToolFailure>> {
        let out = Self::run(&state);
        Box::pin(async move { out })
    }
}
