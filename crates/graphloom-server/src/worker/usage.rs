//! The models' token usage and cost, counted from the updates of a run.

use crate::metrics::{ModelLabel, ModelTokenLabel, TokenLabel};
use crate::state::AppState;
use serde_json::Value;

/// Tokens and cost of AI messages in an update. The cost is the message's own
/// `response_metadata.cost_usd` if it has one, else its tokens at the price of its
/// `response_metadata.model_name` in [`crate::ServerConfig::prices`] (unknown models: none).
pub(super) fn count_usage(state: &AppState, data: &Value) {
    let Some(obj) = data.as_object() else { return };
    for update in obj.values() {
        let Some(msgs) = update.get("messages").and_then(Value::as_array) else {
            continue;
        };
        for m in msgs {
            count_message(state, m);
        }
    }
}

fn count_message(state: &AppState, m: &Value) {
    let Some(u) = m.get("usage_metadata") else {
        return;
    };
    let count = |key: &str| u.get(key).and_then(Value::as_u64);
    let (input, output) = (count("input_tokens"), count("output_tokens"));
    let model = m
        .pointer("/response_metadata/model_name")
        .and_then(Value::as_str)
        .unwrap_or("unknown");
    for (n, kind) in [(input, "input"), (output, "output")] {
        if let Some(n) = n {
            state
                .metrics
                .tokens
                .get_or_create(&TokenLabel { kind: kind.into() })
                .inc_by(n);
            state
                .metrics
                .tokens_by_model
                .get_or_create(&ModelTokenLabel {
                    model: model.into(),
                    kind: kind.into(),
                })
                .inc_by(n);
        }
    }
    let cost = m
        .pointer("/response_metadata/cost_usd")
        .and_then(Value::as_f64)
        .or_else(|| {
            let model = m.pointer("/response_metadata/model_name")?.as_str()?;
            let usage = graphloom_llm::Usage::new(input.unwrap_or(0), output.unwrap_or(0));
            state.config.prices.cost(model, &usage)
        });
    if let Some(c) = cost.filter(|c| c.is_finite() && *c > 0.0) {
        state.metrics.cost.inc_by(c);
        state
            .metrics
            .cost_by_model
            .get_or_create(&ModelLabel { model: model.into() })
            .inc_by(c);
    }
}
