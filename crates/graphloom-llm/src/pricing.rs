//! Prices per million tokens by model-name prefix, and the cost of a call.

use crate::budget::{Budget, UnpricedModels};
use crate::error::{Error, Result};
use crate::usage::Usage;

/// USD per million input and output tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ModelPrice {
    /// USD per 1M input tokens.
    pub input_per_million: f64,
    /// USD per 1M output tokens.
    pub output_per_million: f64,
}

impl ModelPrice {
    /// A price.
    #[must_use]
    pub fn new(input_per_million: f64, output_per_million: f64) -> Self {
        Self {
            input_per_million,
            output_per_million,
        }
    }
    /// The cost of `usage` at this price.
    #[must_use]
    pub fn cost(&self, usage: &Usage) -> f64 {
        #[allow(clippy::cast_precision_loss)] // token counts stay far below 2^53
        let (i, o) = (usage.input_tokens as f64, usage.output_tokens as f64);
        (i * self.input_per_million + o * self.output_per_million) / 1_000_000.0
    }
}

/// The environment variable with prices of models the built-in table does not know (or
/// overrides): `model=input/output[,model=input/output]`, USD per million tokens.
pub const PRICES_ENV: &str = "GRAPHLOOM_MODEL_PRICES";

/// List prices (USD per 1M tokens) known when this crate was written. Prices change:
/// override them with [`PriceTable::with_price`].
const BUILTIN: &[(&str, f64, f64)] = &[
    ("gpt-5-nano", 0.05, 0.40),
    ("gpt-5-mini", 0.25, 2.00),
    ("gpt-5", 1.25, 10.00),
    ("gpt-4.1-nano", 0.10, 0.40),
    ("gpt-4.1-mini", 0.40, 1.60),
    ("gpt-4.1", 2.00, 8.00),
    ("gpt-4o-mini", 0.15, 0.60),
    ("gpt-4o", 2.50, 10.00),
    ("gpt-4-turbo", 10.00, 30.00),
    ("gpt-3.5-turbo", 0.50, 1.50),
    ("o4-mini", 1.10, 4.40),
    ("o3-mini", 1.10, 4.40),
    ("o3", 2.00, 8.00),
    ("o1-mini", 1.10, 4.40),
    ("o1", 15.00, 60.00),
    ("claude-opus-4-5", 5.00, 25.00),
    ("claude-opus-4", 15.00, 75.00),
    ("claude-sonnet-4", 3.00, 15.00),
    ("claude-haiku-4", 1.00, 5.00),
    ("claude-3-7-sonnet", 3.00, 15.00),
    ("claude-3-5-sonnet", 3.00, 15.00),
    ("claude-3-5-haiku", 0.80, 4.00),
    ("claude-3-opus", 15.00, 75.00),
    ("claude-3-haiku", 0.25, 1.25),
];

/// Prices by model-name prefix; the longest matching prefix wins, so `gpt-4o-mini-2024-07-18`
/// is priced as `gpt-4o-mini`, not `gpt-4o`. A name with a vendor path (`openai/gpt-4o`, as
/// OpenRouter writes it) is also matched by its last segment. Models not in the table cost
/// nothing (local models) and [`PriceTable::cost`] returns `None` for them.
#[derive(Debug, Clone, PartialEq)]
pub struct PriceTable {
    entries: Vec<(String, ModelPrice)>,
}

impl Default for PriceTable {
    fn default() -> Self {
        Self::builtin()
    }
}

impl PriceTable {
    /// No prices at all.
    #[must_use]
    pub fn empty() -> Self {
        Self { entries: Vec::new() }
    }
    /// The built-in list prices of common OpenAI and Anthropic models.
    #[must_use]
    pub fn builtin() -> Self {
        Self {
            entries: BUILTIN
                .iter()
                .map(|(p, i, o)| ((*p).to_owned(), ModelPrice::new(*i, *o)))
                .collect(),
        }
    }
    /// Add or replace the price of a prefix.
    #[must_use]
    pub fn with_price(
        mut self,
        prefix: impl Into<String>,
        input_per_million: f64,
        output_per_million: f64,
    ) -> Self {
        self.set(prefix, ModelPrice::new(input_per_million, output_per_million));
        self
    }
    /// Add or replace the price of a prefix.
    pub fn set(&mut self, prefix: impl Into<String>, price: ModelPrice) {
        let prefix = prefix.into();
        self.entries.retain(|(p, _)| *p != prefix);
        self.entries.push((prefix, price));
    }
    /// The price of `model`, if a prefix matches.
    #[must_use]
    pub fn price(&self, model: &str) -> Option<ModelPrice> {
        let short = model.rsplit('/').next().unwrap_or(model);
        self.entries
            .iter()
            .filter(|(p, _)| model.starts_with(p.as_str()) || short.starts_with(p.as_str()))
            .max_by_key(|(p, _)| p.len())
            .map(|(_, price)| *price)
    }
    /// These prices and those [`PRICES_ENV`] gives (`model=input/output[,model=...]`, USD per
    /// million tokens; a model matches by prefix, like the built-in entries).
    ///
    /// # Errors
    /// [`Error::Config`] when the variable is set but not in that form.
    pub fn with_env_prices(self) -> Result<Self> {
        match std::env::var(PRICES_ENV) {
            Ok(text) => self.with_prices_text(&text),
            Err(_) => Ok(self),
        }
    }

    /// These prices and those `text` gives in [`PRICES_ENV`]'s form.
    fn with_prices_text(mut self, text: &str) -> Result<Self> {
        for item in text.split([',', ';']).map(str::trim).filter(|i| !i.is_empty()) {
            let parsed = item.split_once('=').and_then(|(model, price)| {
                let (i, o) = price.split_once('/')?;
                let (i, o) = (i.trim().parse::<f64>().ok()?, o.trim().parse::<f64>().ok()?);
                (i >= 0.0 && o >= 0.0 && !model.trim().is_empty()).then(|| (model.trim(), i, o))
            });
            match parsed {
                Some((model, i, o)) => self.set(model, ModelPrice::new(i, o)),
                None => {
                    return Err(Error::Config(format!(
                        "{PRICES_ENV}: `{item}` is not model=input/output (USD per million tokens), e.g. llama3.2=0.15/0.60"
                    )))
                }
            }
        }
        Ok(self)
    }

    /// Whether `budget` can be kept on `model`: a cost limit on a model without a price
    /// could never trigger, so it is refused, unless the budget says such a model counts
    /// tokens only ([`UnpricedModels::TokensOnly`]).
    ///
    /// # Errors
    /// [`Error::Config`] naming the model, the limit and how to give a price.
    pub fn check_budget(&self, model: &str, budget: &Budget) -> Result<()> {
        match budget.max_cost_usd {
            Some(limit) if self.price(model).is_none() && budget.unpriced == UnpricedModels::Refuse => {
                let name = model.rsplit('/').next().unwrap_or(model);
                Err(Error::Config(format!(
                    "model `{model}` has no price, so the cost budget of ${limit:.2} could never stop it. \
                     Give it a price (USD per million input/output tokens), e.g. {PRICES_ENV}='{name}=0.15/0.60', \
                     or budget tokens only (`Budget::tokens_only_when_unpriced`)"
                )))
            }
            _ => Ok(()),
        }
    }

    /// The cost in USD of `usage` on `model`, if the model has a price.
    #[must_use]
    pub fn cost(&self, model: &str, usage: &Usage) -> Option<f64> {
        self.price(model).map(|p| p.cost(usage))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn longest_prefix_wins_and_users_extend() {
        let t = PriceTable::builtin();
        let mini = t
            .price("gpt-4o-mini-2024-07-18")
            .unwrap_or(ModelPrice::new(0.0, 0.0));
        assert!((mini.input_per_million - 0.15).abs() < 1e-12);
        let full = t.price("gpt-4o-2024-08-06").unwrap_or(ModelPrice::new(0.0, 0.0));
        assert!((full.input_per_million - 2.5).abs() < 1e-12);
        assert!(t.price("openai/gpt-4o-mini").is_some());
        assert!(t.price("llama3.2").is_none());
        let t = t
            .with_price("llama", 0.0, 0.0)
            .with_price("gpt-4o-mini", 1.0, 2.0);
        assert_eq!(t.cost("llama3.2", &Usage::new(10, 10)), Some(0.0));
        let c = t
            .cost("gpt-4o-mini", &Usage::new(1_000_000, 500_000))
            .unwrap_or(0.0);
        assert!((c - 2.0).abs() < 1e-9);
    }

    #[test]
    fn prices_from_the_environment_form() {
        let t = PriceTable::builtin()
            .with_prices_text("llama3.2=0.1/0.2; qwen = 1/2")
            .unwrap_or_else(|_| PriceTable::empty());
        let p = t.price("llama3.2:latest").unwrap_or(ModelPrice::new(9.0, 9.0));
        assert!((p.output_per_million - 0.2).abs() < 1e-12);
        assert!(t.price("qwen2.5").is_some() && t.price("gpt-4o").is_some());
        for bad in ["llama3.2", "llama3.2=0.1", "=1/2", "x=a/b", "x=-1/2"] {
            let e = PriceTable::builtin()
                .with_prices_text(bad)
                .err()
                .map(|e| e.to_string());
            assert!(e.is_some_and(|e| e.contains(PRICES_ENV)), "{bad}");
        }
    }

    #[test]
    fn a_cost_budget_on_an_unpriced_model_is_refused_unless_it_counts_tokens() {
        let t = PriceTable::builtin();
        let cost = Budget::unlimited().cost_usd(10.0);
        let e = t
            .check_budget("llama3.2", &cost)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            e.contains("llama3.2") && e.contains("$10.00") && e.contains(PRICES_ENV),
            "{e}"
        );
        assert!(t.check_budget("gpt-4o-mini", &cost).is_ok());
        assert!(t
            .check_budget("llama3.2", &Budget::unlimited().total_tokens(5))
            .is_ok());
        assert!(t
            .check_budget("llama3.2", &cost.tokens_only_when_unpriced())
            .is_ok());
    }
}
