//! `context_tool`: load the transaction, its account, merchant and card history.

use super::{obj, InvestigationTool, ToolFailure, ToolOutcome};
use crate::data::Dataset;
use crate::state::{InvestigationState, InvestigationStateUpdate};
use futures::future::BoxFuture;
use serde_json::json;
use std::collections::BTreeSet;
use std::sync::Arc;

/// History window, in seconds.
const HISTORY_SECS: i64 = 90 * 86_400;
/// "Recent activity" window, in seconds.
const RECENT_SECS: i64 = 86_400;

/// Loads the transaction context from the data set.
#[derive(Debug, Clone)]
pub struct ContextTool {
    data: Arc<Dataset>,
}

impl ContextTool {
    /// A context tool over `data`.
    #[must_use]
    pub fn new(data: Arc<Dataset>) -> Self {
        Self { data }
    }

    fn run(&self, state: &InvestigationState) -> Result<ToolOutcome, ToolFailure> {
        let ds = &self.data;
        let tx = ds
            .transaction(&state.transaction_id)
            .ok_or_else(|| ToolFailure::new(format!("transaction {} not found", state.transaction_id)))?;
        let card = ds
            .card(&tx.card_id)
            .ok_or_else(|| ToolFailure::new(format!("card {} not found", tx.card_id)))?;
        let account = ds
            .account(&card.account_id)
            .ok_or_else(|| ToolFailure::new(format!("account {} not found", card.account_id)))?;
        let merchant = ds
            .merchant(&tx.merchant_id)
            .ok_or_else(|| ToolFailure::new(format!("merchant {} not found", tx.merchant_id)))?;
        let at = tx.epoch();
        let prior = ds.prior_on_card(tx);
        let history: Vec<_> = prior.iter().filter(|t| at - t.epoch() <= HISTORY_SECS).collect();
        #[allow(clippy::cast_precision_loss)]
        let avg = if history.is_empty() {
            0.0
        } else {
            history.iter().map(|t| t.amount).sum::<f64>() / history.len() as f64
        };
        let max = history.iter().map(|t| t.amount).fold(0.0, f64::max);
        let countries: BTreeSet<&str> = history.iter().map(|t| t.country.as_str()).collect();
        let devices: BTreeSet<&str> = history.iter().filter_map(|t| t.device_id.as_deref()).collect();
        let recent: Vec<_> = prior
            .iter()
            .filter(|t| at - t.epoch() <= RECENT_SECS)
            .map(|t| {
                let m = ds.merchant(&t.merchant_id);
                json!({
                    "transaction_id": t.transaction_id,
                    "timestamp": t.timestamp,
                    "amount": t.amount,
                    "currency": t.currency,
                    "merchant_name": m.map(|m| m.name.as_str()),
                    "category": m.map(|m| m.category.as_str()),
                    "channel": t.channel,
                    "country": t.country,
                    "device_id": t.device_id,
                })
            })
            .collect();
        let signals = ds.signals(tx);
        let context = obj(json!({
            "transaction": {
                "transaction_id": tx.transaction_id,
                "card_id": tx.card_id,
                "amount": tx.amount,
                "currency": tx.currency,
                "timestamp": tx.timestamp,
                "channel": tx.channel,
                "country": tx.country,
                "device_id": tx.device_id,
            },
            "merchant": merchant,
            "account": {
                "account_id": account.account_id,
                "home_country": account.home_country,
                "customer_since": account.customer_since,
                "typical_amount": account.typical_amount,
            },
            "card": { "card_id": card.card_id, "known_devices": card.known_devices },
            "card_history": {
                "window_days": HISTORY_SECS / 86_400,
                "prior_count": history.len(),
                "avg_amount": (avg * 100.0).round() / 100.0,
                "max_amount": max,
                "countries": countries,
                "devices": devices,
            },
            "recent_activity": recent,
            "signals": signals,
        }));
        let output_summary = obj(json!({
            "merchant_category": merchant.category,
            "amount": tx.amount,
            "prior_transactions": history.len(),
            "recent_24h": recent.len(),
        }));
        Ok(ToolOutcome {
            update: InvestigationStateUpdate::new().context(context),
            input_summary: obj(json!({ "transaction_id": state.transaction_id })),
            output_summary,
        })
    }
}

impl InvestigationTool for ContextTool {
    fn name(&self) -> &str {
        super::CONTEXT_TOOL
    }
    fn description(&self) -> &str {
        "Loads the transaction, the cardholder's account, the merchant and the card's recent history. Run first."
    }
    fn execute(
        &self,
        state: Arc<InvestigationState>,
    ) -> BoxFuture<'static, Result<ToolOutcome, ToolFailure>> {
        let out = self.run(&state);
        Box::pin(async move { out })
    }
}
