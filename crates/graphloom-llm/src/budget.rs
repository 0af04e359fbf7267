//! Run budgets, and [`BudgetedModel`]: a model that refuses to call past them.

use crate::chunk::{ChatChunk, ChunkAssembler};
use crate::error::{Error, Result};
use crate::message::MessageExt;
use crate::model::{ChatModel, ChunkStream};
use crate::options::ChatOptions;
use crate::prompt_hash::prompt_hash;
use crate::tracker::{UsageEvent, UsageTotals, UsageTracker};
use crate::usage::Usage;
use futures::Stream;
use graphloom_core::Message;
use std::pin::Pin;
use std::sync::{Arc, PoisonError, RwLock};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

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

/// A model that checks a run's [`Budget`] before every call and records every call's usage
/// into a shared [`UsageTracker`].
///
/// A call the budget does not allow is not made: it fails with [`Error::BudgetExceeded`],
/// which [`Error::into_node_error`] turns into `NodeError::BudgetExceeded`, ending the run
/// with `graphloom_core::Error::BudgetExceeded` and a resumable checkpoint. Raise the limit
/// ([`BudgetedModel::set_budget`], shared by every clone) and continue the run.
///
/// Token and cost limits are checked against what earlier calls consumed (a call's size is
/// only known afterwards); the output-token limits also cap the call's `max_tokens` to
/// what is left.
pub struct BudgetedModel<M> {
    inner: M,
    tracker: Arc<UsageTracker>,
    budget: Arc<RwLock<Budget>>,
}

impl<M: Clone> Clone for BudgetedModel<M> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            tracker: Arc::clone(&self.tracker),
            budget: Arc::clone(&self.budget),
        }
    }
}

impl<M> std::fmt::Debug for BudgetedModel<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BudgetedModel")
            .field("budget", &self.budget())
            .field("tracker", &self.tracker)
            .finish_non_exhaustive()
    }
}

impl<M> BudgetedModel<M> {
    /// Wrap `inner`: calls count against `budget` and record into `tracker`.
    pub fn new(inner: M, tracker: Arc<UsageTracker>, budget: Budget) -> Self {
        Self {
            inner,
            tracker,
            budget: Arc::new(RwLock::new(budget)),
        }
    }
    /// The budget in force.
    #[must_use]
    pub fn budget(&self) -> Budget {
        self.budget.read().unwrap_or_else(PoisonError::into_inner).clone()
    }
    /// Replace the budget (for every clone of this model).
    pub fn set_budget(&self, budget: Budget) {
        *self.budget.write().unwrap_or_else(PoisonError::into_inner) = budget;
    }
    /// The tracker.
    #[must_use]
    pub fn tracker(&self) -> &Arc<UsageTracker> {
        &self.tracker
    }
    /// The wrapped model.
    #[must_use]
    pub fn inner(&self) -> &M {
        &self.inner
    }
}

impl<M: ChatModel> BudgetedModel<M> {
    /// Count the call against the budget; the options to call with and the event to fill.
    fn start(&self, messages: &[Message], options: &ChatOptions) -> Result<(ChatOptions, Pending)> {
        let budget = self.budget();
        self.tracker.try_start_call(&budget)?;
        let mut opts = options.clone();
        if let Some(left) = budget.remaining_output(&self.tracker.totals()) {
            let left = u32::try_from(left.max(1)).unwrap_or(u32::MAX);
            opts.max_tokens = Some(opts.max_tokens.map_or(left, |m| m.min(left)));
        }
        let event = UsageEvent {
            invocation_id: uuid::Uuid::now_v7().to_string(),
            provider: self.inner.provider().to_owned(),
            model: self.inner.model_name().to_owned(),
            prompt_hash: prompt_hash(self.inner.model_name(), messages, &opts),
            usage: Usage::default(),
            cost_usd: None,
            response_id: None,
            duration_ms: 0,
            error: None,
            metadata: options.metadata.clone(),
        };
        Ok((
            opts,
            Pending {
                event,
                started: Instant::now(),
                tracker: Arc::clone(&self.tracker),
            },
        ))
    }
}

/// A started call whose event is not recorded yet.
struct Pending {
    event: UsageEvent,
    started: Instant,
    tracker: Arc<UsageTracker>,
}

impl Pending {
    fn finish(mut self, usage: Option<Usage>, response_id: Option<String>, error: Option<String>) {
        self.event.usage = usage.unwrap_or_default();
        self.event.response_id = response_id;
        self.event.error = error;
        self.event.duration_ms = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.tracker.finish_call(self.event);
    }
}

impl<M: ChatModel> ChatModel for BudgetedModel<M> {
    fn model_name(&self) -> &str {
        self.inner.model_name()
    }
    fn provider(&self) -> &str {
        self.inner.provider()
    }
    async fn invoke(&self, messages: &[Message], options: &ChatOptions) -> Result<Message> {
        let (opts, pending) = self.start(messages, options)?;
        match self.inner.invoke(messages, &opts).await {
            Ok(msg) => {
                pending.finish(msg.usage(), msg.id.clone(), None);
                Ok(msg)
            }
            Err(e) => {
                pending.finish(None, None, Some(e.to_string()));
                Err(e)
            }
        }
    }
    fn stream(&self, messages: &[Message], options: &ChatOptions) -> ChunkStream {
        match self.start(messages, options) {
            Err(e) => Box::pin(futures::stream::once(async move { Err(e) })),
            Ok((opts, pending)) => Box::pin(TrackedStream {
                inner: self.inner.stream(messages, &opts),
                asm: ChunkAssembler::new(),
                pending: Some(pending),
                error: None,
            }),
        }
    }
}

/// Forwards a stream and records its usage when it ends, fails, or is dropped early.
struct TrackedStream {
    inner: ChunkStream,
    asm: ChunkAssembler,
    pending: Option<Pending>,
    error: Option<String>,
}

impl TrackedStream {
    fn record(&mut self) {
        if let Some(p) = self.pending.take() {
            let asm = std::mem::take(&mut self.asm);
            let id = asm.id().map(str::to_owned);
            let usage = asm.finish().usage();
            p.finish(usage, id, self.error.take());
        }
    }
}

impl Stream for TrackedStream {
    type Item = Result<ChatChunk>;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let polled = self.inner.as_mut().poll_next(cx);
        match &polled {
            Poll::Ready(Some(Ok(chunk))) => self.asm.push(chunk),
            Poll::Ready(Some(Err(e))) => {
                self.error = Some(e.to_string());
                self.record();
            }
            Poll::Ready(None) => self.record(),
            Poll::Pending => {}
        }
        polled
    }
}

impl Drop for TrackedStream {
    fn drop(&mut self) {
        if self.pending.is_some() && self.error.is_none() {
            self.error = Some("stream dropped before its end".to_owned());
        }
        self.record();
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
