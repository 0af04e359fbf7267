//! [`Budget`]: the limits of one run (calls, tokens, cost, wall time), checked against a
//! tracker's totals before each model call ([`crate::BudgetedModel`] enforces them).

use crate::error::{Error, Result};
use crate::usage::UsageTotals;
use std::time::Duration;

/// Limits of one run. Unset limits do not apply.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Budget {
    /// Most model calls.
    pub max_calls: Option<u64>,
    /// Most input tokens.
    pub max_input_tokens: Option<u64>,
    /// Most output tokens.
    pub max_output_tokens: Option<u64>,
    /// Most input plus output tokens.
    pub max_total_tokens: Option<u64>,
    /// Most cost in USD (of models with a price).
    pub max_cost_usd: Option<f64>,
    /// Longest wall time since the tracker's clock started.
    pub max_wall_time: Option<Duration>,
    /// What a cost limit means for a model without a price.
    pub unpriced: UnpricedModels,
}

/// What a cost limit means for a model the price table does not know.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum UnpricedModels {
    /// Refuse the budget: its cost limit could never trigger.
    #[default]
    Refuse,
    /// Such a model costs nothing; only the token and call limits apply to it.
    TokensOnly,
}

impl Budget {
    /// No limits.
    #[must_use]
    pub fn unlimited() -> Self {
        Self::default()
    }
    /// Limit model calls.
    #[must_use]
    pub fn calls(mut self, n: u64) -> Self {
        self.max_calls = Some(n);
        self
    }
    /// Limit input tokens.
    #[must_use]
    pub fn input_tokens(mut self, n: u64) -> Self {
        self.max_input_tokens = Some(n);
        self
    }
    /// Limit output tokens.
    #[must_use]
    pub fn output_tokens(mut self, n: u64) -> Self {
        self.max_output_tokens = Some(n);
        self
    }
    /// Limit input plus output tokens.
    #[must_use]
    pub fn total_tokens(mut self, n: u64) -> Self {
        self.max_total_tokens = Some(n);
        self
    }
    /// Limit the cost in USD.
    #[must_use]
    pub fn cost_usd(mut self, usd: f64) -> Self {
        self.max_cost_usd = Some(usd);
        self
    }
    /// Let a model without a price run under this budget: only its token and call limits
    /// apply to it.
    #[must_use]
    pub fn tokens_only_when_unpriced(mut self) -> Self {
        self.unpriced = UnpricedModels::TokensOnly;
        self
    }
    /// Limit the wall time.
    #[must_use]
    pub fn wall_time(mut self, d: Duration) -> Self {
        self.max_wall_time = Some(d);
        self
    }

    /// `Ok` if another call may start given `totals` and `elapsed`; otherwise the first
    /// exhausted budget as [`Error::BudgetExceeded`].
    pub fn check(&self, totals: &UsageTotals, elapsed: Duration) -> Result<()> {
        fn over(budget: &str, limit: impl std::fmt::Display, used: impl std::fmt::Display) -> Error {
            Error::BudgetExceeded {
                budget: budget.to_owned(),
                message: format!("limit {limit}, used {used}; raise the budget and continue the run"),
            }
        }
        let counts = [
            ("model_calls", self.max_calls, totals.calls),
            ("input_tokens", self.max_input_tokens, totals.input_tokens),
            ("output_tokens", self.max_output_tokens, totals.output_tokens),
            ("total_tokens", self.max_total_tokens, totals.total_tokens()),
        ];
        for (name, limit, used) in counts {
            if let Some(limit) = limit {
                if used >= limit {
                    return Err(over(name, limit, used));
                }
            }
        }
        if let Some(limit) = self.max_cost_usd {
            if totals.cost_usd >= limit {
                return Err(over(
                    "cost_usd",
                    format!("${limit:.4}"),
                    format!("${:.4}", totals.cost_usd),
                ));
            }
        }
        if let Some(limit) = self.max_wall_time {
            if elapsed >= limit {
                return Err(over(
                    "wall_time",
                    format!("{} ms", limit.as_millis()),
                    format!("{} ms", elapsed.as_millis()),
                ));
            }
        }
        Ok(())
    }

    /// Output tokens still allowed (by the output and total token limits), if limited.
    #[must_use]
    pub fn remaining_output(&self, totals: &UsageTotals) -> Option<u64> {
        let by_out = self
            .max_output_tokens
            .map(|l| l.saturating_sub(totals.output_tokens));
        let by_total = self
            .max_total_tokens
            .map(|l| l.saturating_sub(totals.total_tokens()));
        match (by_out, by_total) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checks_each_limit() {
        let t = UsageTotals {
            calls: 2,
            failed_calls: 0,
            input_tokens: 10,
            output_tokens: 5,
            cost_usd: 0.5,
        };
        assert!(Budget::unlimited().check(&t, Duration::ZERO).is_ok());
        let name = |b: Budget| match b.check(&t, Duration::from_secs(2)) {
            Err(Error::BudgetExceeded { budget, .. }) => budget,
            _ => String::new(),
        };
        assert_eq!(name(Budget::unlimited().calls(2)), "model_calls");
        assert_eq!(
            name(Budget::unlimited().calls(3).input_tokens(10)),
            "input_tokens"
        );
        assert_eq!(name(Budget::unlimited().output_tokens(5)), "output_tokens");
        assert_eq!(name(Budget::unlimited().total_tokens(15)), "total_tokens");
        assert_eq!(name(Budget::unlimited().cost_usd(0.5)), "cost_usd");
        assert_eq!(
            name(Budget::unlimited().wall_time(Duration::from_secs(1))),
            "wall_time"
        );
        assert_eq!(name(Budget::unlimited().calls(3).total_tokens(16)), "");
        assert_eq!(Budget::unlimited().output_tokens(8).remaining_output(&t), Some(3));
        assert_eq!(
            Budget::unlimited()
                .output_tokens(8)
                .total_tokens(16)
                .remaining_output(&t),
            Some(1)
        );
    }
}
