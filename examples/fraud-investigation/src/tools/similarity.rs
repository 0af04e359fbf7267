//! `similarity_tool`: the closed cases most like this transaction, and how many were fraud.
//!
//! With vector search on, every labelled transaction's risk signals become a vector
//! ([`crate::data::TxSignals::vector`]) and the nearest ones by cosine similarity are kept;
//! off, closed cases of the same merchant category and channel are matched exactly.

use super::{context_signals, input_of, obj, round3, InvestigationTool, ToolFailure, ToolOutcome};
use crate::data::Dataset;
use crate::state::{Evidence, InvestigationState, InvestigationStateUpdate};
use futures::future::BoxFuture;
use graphloom_core::store::cosine;
use serde_json::{json, Value};
use std::sync::Arc;

/// How many neighbours are kept.
pub const TOP_K: usize = 5;

/// Finds similar closed cases.
#[derive(Debug, Clone)]
pub struct SimilarityTool {
    data: Arc<Dataset>,
    vector: bool,
}

impl SimilarityTool {
    /// Over `data`; `vector` chooses vector search over exact matching.
    #[must_use]
    pub fn new(data: Arc<Dataset>, vector: bool) -> Self {
        Self { data, vector }
    }

    fn run(&self, state: &InvestigationState) -> Result<ToolOutcome, ToolFailure> {
        let target = context_signals(state)?;
        let ds = &self.data;
        let tx = ds
            .transaction(&state.transaction_id)
            .ok_or_else(|| ToolFailure::new(format!("transaction {} not found", state.transaction_id)))?;
        let category = |id: &str| ds.merchant(id).map_or("?", |m| m.category.as_str()).to_owned();
        let my_category = category(&tx.merchant_id);
        let tv = target.vector();
        let mut scored: Vec<(f64, &crate::data::Transaction)> = ds
            .labelled()
            .filter(|t| t.transaction_id != tx.transaction_id)
            .map(|t| {
                let sim = if self.vector {
                    cosine(&tv, &ds.signals(t).vector())
                } else {
                    let same_cat = category(&t.merchant_id) == my_category;
                    match (same_cat, t.channel == tx.channel) {
                        (true, true) => 1.0,
                        (true, false) => 0.5,
                        _ => 0.0,
                    }
                };
                (sim, t)
            })
            .filter(|(s, _)| *s > 0.0)
            .collect();
        scored.sort_by(|a, b| {
            b.0.total_cmp(&a.0)
                .then_with(|| a.1.transaction_id.cmp(&b.1.transaction_id))
        });
        scored.truncate(TOP_K);
        let total: f64 = scored.iter().map(|(s, _)| s).sum();
        let is_fraud = |t: &crate::data::Transaction| t.label.as_deref() == Some("fraud");
        let fraud_weight: f64 = scored.iter().filter(|(_, t)| is_fraud(t)).map(|(s, _)| s).sum();
        let fraud_ratio = if total > 0.0 { fraud_weight / total } else { 0.0 };
        let frauds = scored.iter().filter(|(_, t)| is_fraud(t)).count();
        let matches: Vec<Value> = scored
            .iter()
            .map(|(s, t)| {
                json!({
                    "transaction_id": t.transaction_id,
                    "label": t.label,
                    "similarity": round3(*s),
                    "merchant_category": category(&t.merchant_id),
                    "channel": t.channel,
                    "amount": t.amount,
                })
            })
            .collect();
        let nearest_fraud = scored
            .iter()
            .find(|(_, t)| is_fraud(t))
            .map(|(_, t)| t.transaction_id.clone());
        let method = if self.vector { "vector" } else { "rules" };
        let detail = format!(
            "{frauds} of the {} most similar closed cases were fraud (similarity-weighted fraud ratio {:.2})",
            scored.len(),
            fraud_ratio
        );
        let results = obj(json!({
            "method": method,
            "k": TOP_K,
            "matches": matches,
            "fraud_ratio": round3(fraud_ratio),
            "fraud_matches": frauds,
            "nearest_fraud_case": nearest_fraud,
        }));
        Ok(ToolOutcome {
            update: InvestigationStateUpdate::new()
                .similarity_results(results)
                .evidence(vec![Evidence {
                    source: super::SIMILARITY_TOOL.to_owned(),
                    kind: "similar_cases".to_owned(),
                    detail,
                    weight: round3(fraud_ratio),
                }]),
            input_summary: input_of(state),
            output_summary: obj(json!({
                "method": method,
                "matches": scored.len(),
                "fraud_matches": frauds,
                "fraud_ratio": round3(fraud_ratio),
            })),
        })
    }
}

impl InvestigationTool for SimilarityTool {
    fn name(&self) -> &str {
        super::SIMILARITY_TOOL
    }
    fn description(&self) -> &str {
        "Finds the closed cases most similar to this transaction and the share of them that were fraud."
    }
    fn execute(
        &self,
        state: Arc<InvestigationState>,
    ) -> BoxFuture<'static, Result<ToolOutcome, ToolFailure>> {
        let out = self.run(&state);
        Box::pin(async move { out })
    }
}
