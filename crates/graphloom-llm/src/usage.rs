//! Token counts of one model call, in LangChain's `usage_metadata` shape.

use serde::{Deserialize, Serialize};
use std::ops::{Add, AddAssign};

/// Tokens one call consumed. Serialises as LangChain's `usage_metadata`
/// (`input_tokens`, `output_tokens`, `total_tokens`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Usage {
    /// Prompt tokens (cached ones included).
    #[serde(default)]
    pub input_tokens: u64,
    /// Completion tokens.
    #[serde(default)]
    pub output_tokens: u64,
    /// `input_tokens + output_tokens`.
    #[serde(default)]
    pub total_tokens: u64,
}

impl Usage {
    /// Usage from input and output counts (total computed).
    #[must_use]
    pub fn new(input_tokens: u64, output_tokens: u64) -> Self {
        Self {
            input_tokens,
            output_tokens,
            total_tokens: input_tokens.saturating_add(output_tokens),
        }
    }
    /// True when nothing was counted.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.input_tokens == 0 && self.output_tokens == 0 && self.total_tokens == 0
    }
}

impl Add for Usage {
    type Output = Usage;
    fn add(self, rhs: Usage) -> Usage {
        Usage {
            input_tokens: self.input_tokens.saturating_add(rhs.input_tokens),
            output_tokens: self.output_tokens.saturating_add(rhs.output_tokens),
            total_tokens: self.total_tokens.saturating_add(rhs.total_tokens),
        }
    }
}

impl AddAssign for Usage {
    fn add_assign(&mut self, rhs: Usage) {
        *self = *self + rhs;
    }
}

/// Running totals of a tracker.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct UsageTotals {
    /// Model calls started (failed ones included).
    pub calls: u64,
    /// Calls that failed.
    pub failed_calls: u64,
    /// Input tokens.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Cost in USD of the calls whose model has a price.
    pub cost_usd: f64,
}

impl UsageTotals {
    /// Input plus output tokens.
    #[must_use]
    pub fn total_tokens(&self) -> u64 {
        self.input_tokens.saturating_add(self.output_tokens)
    }
}

/// A rough, deterministic token estimate (one token per four bytes, at least one for
/// non-empty text). Used by the scripted model; real providers report real counts.
#[must_use]
pub fn estimate_tokens(text: &str) -> u64 {
    if text.is_empty() {
        0
    } else {
        (text.len() as u64).div_ceil(4)
    }
}
