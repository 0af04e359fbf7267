//! [`UsageTracker`]: calls, tokens and cost of one run, shared by every model of the run
//! through an `Arc`, with a usage event per call for billing and telemetry.

use crate::budget::Budget;
use crate::error::Result;
use crate::pricing::PriceTable;
use crate::usage::{Usage, UsageTotals};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, Instant};

/// What one model call consumed, with the ids to join it to a request, a trace and a run
/// (seed 003's `usage_report`). Emitted for every call, failed ones included.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UsageEvent {
    /// One per call attempt (UUID v7); unique.
    pub invocation_id: String,
    /// The provider.
    pub provider: String,
    /// The model.
    pub model: String,
    /// The prompt hash ([`crate::prompt_hash`]).
    pub prompt_hash: String,
    /// Tokens counted by the provider (zero for a failed call).
    pub usage: Usage,
    /// Cost in USD, when the model has a price.
    pub cost_usd: Option<f64>,
    /// The provider's id of the response (message id), when it answered.
    pub response_id: Option<String>,
    /// How long the call took.
    pub duration_ms: u64,
    /// The error, for a failed call.
    pub error: Option<String>,
    /// Correlation fields from the call's options (request id, trace id, graph run id, ...).
    pub metadata: Map<String, Value>,
}

type Listener = Arc<dyn Fn(&UsageEvent) + Send + Sync>;

#[derive(Default)]
struct State {
    totals: UsageTotals,
    events: Vec<UsageEvent>,
}

/// Accumulates the usage of one run: calls, tokens, cost, elapsed time.
///
/// Create one per run (or per conversation turn) and share it with `Arc` between the
/// models of the run ([`crate::BudgetedModel`] records into it). Listeners added with
/// [`UsageTracker::on_usage`] see every event, in call order per model.
pub struct UsageTracker {
    prices: PriceTable,
    state: Mutex<State>,
    started: Mutex<Instant>,
    listeners: RwLock<Vec<Listener>>,
}

impl Default for UsageTracker {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for UsageTracker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UsageTracker")
            .field("totals", &self.totals())
            .finish_non_exhaustive()
    }
}

impl UsageTracker {
    /// A tracker with the built-in price table; its clock starts now.
    #[must_use]
    pub fn new() -> Self {
        Self::with_prices(PriceTable::builtin())
    }
    /// A tracker with these prices.
    #[must_use]
    pub fn with_prices(prices: PriceTable) -> Self {
        Self {
            prices,
            state: Mutex::new(State::default()),
            started: Mutex::new(Instant::now()),
            listeners: RwLock::new(Vec::new()),
        }
    }
    /// A new tracker in an `Arc`, ready to share.
    #[must_use]
    pub fn shared() -> Arc<Self> {
        Arc::new(Self::new())
    }
    /// The price table.
    #[must_use]
    pub fn prices(&self) -> &PriceTable {
        &self.prices
    }
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
    /// The totals so far.
    #[must_use]
    pub fn totals(&self) -> UsageTotals {
        self.state().totals
    }
    /// Every event so far, in the order calls finished.
    #[must_use]
    pub fn events(&self) -> Vec<UsageEvent> {
        self.state().events.clone()
    }
    /// Time since the tracker was created (or its clock reset).
    #[must_use]
    pub fn elapsed(&self) -> Duration {
        self.started
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .elapsed()
    }
    /// Restart the wall-time clock (for example when a paused run resumes).
    pub fn reset_clock(&self) {
        *self.started.lock().unwrap_or_else(PoisonError::into_inner) = Instant::now();
    }
    /// Call `f` with every usage event (billing, metrics, a stream writer).
    pub fn on_usage(&self, f: impl Fn(&UsageEvent) + Send + Sync + 'static) {
        self.listeners
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Arc::new(f));
    }

    /// Check `budget` against the totals and, if it allows another call, count the call
    /// started. Check and count happen under one lock, so concurrent callers never start
    /// more calls than the budget allows.
    pub fn try_start_call(&self, budget: &Budget) -> Result<()> {
        let elapsed = self.elapsed();
        let mut st = self.state();
        budget.check(&st.totals, elapsed)?;
        st.totals.calls += 1;
        Ok(())
    }

    /// Record the outcome of a call counted by [`UsageTracker::try_start_call`]: tokens, cost
    /// (filled in from the price table when the event has none), the event itself.
    pub fn finish_call(&self, mut event: UsageEvent) {
        if event.cost_usd.is_none() {
            event.cost_usd = self.prices.cost(&event.model, &event.usage);
        }
        {
            let mut st = self.state();
            st.totals.input_tokens = st.totals.input_tokens.saturating_add(event.usage.input_tokens);
            st.totals.output_tokens = st.totals.output_tokens.saturating_add(event.usage.output_tokens);
            st.totals.cost_usd += event.cost_usd.unwrap_or(0.0);
            if event.error.is_some() {
                st.totals.failed_calls += 1;
            }
            st.events.push(event.clone());
        }
        let listeners: Vec<Listener> = self
            .listeners
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        for l in listeners {
            l(&event);
        }
    }

    /// Count and record a call made outside a [`crate::BudgetedModel`].
    pub fn record(&self, event: UsageEvent) {
        self.state().totals.calls += 1;
        self.finish_call(event);
    }
}
