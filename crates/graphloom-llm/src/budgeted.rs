//! [`BudgetedModel`]: a model that checks a run's [`Budget`] before every call, refuses to
//! call past it, and records every call's usage into a shared [`UsageTracker`].

use crate::budget::Budget;
use crate::chunk::{ChatChunk, ChunkAssembler};
use crate::error::Result;
use crate::message::MessageExt;
use crate::model::{ChatModel, ChunkStream};
use crate::options::ChatOptions;
use crate::prompt_hash::prompt_hash;
use crate::tracker::{UsageEvent, UsageTracker};
use crate::usage::Usage;
use futures::Stream;
use graphloom_core::Message;
use std::pin::Pin;
use std::sync::{Arc, PoisonError, RwLock};
use std::task::{Context, Poll};
use std::time::Instant;

/// A model that checks a run's [`Budget`] before every call and records every call's usage
/// into a shared [`UsageTracker`].
///
/// A call the budget does not allow is not made: it fails with
/// [`Error::BudgetExceeded`](crate::Error::BudgetExceeded), which
/// [`Error::into_node_error`](crate::Error::into_node_error) turns into
/// `NodeError::BudgetExceeded`, ending the run with `graphloom_core::Error::BudgetExceeded`
/// and a resumable checkpoint. Raise the limit
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
