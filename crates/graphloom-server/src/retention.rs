//! Retention: the sweeper that expires threads (their own `ttl`, or the server's
//! [`RetentionConfig::thread_ttl`]), drops expired store items, and forgets old webhook
//! deliveries, every [`RetentionConfig::sweep_interval`], in bounded batches.
//!
//! A thread's time to live counts from its last change (creation, a run's start or end, a
//! patch); a busy thread never expires. Strategy `delete` deletes the thread, its runs and
//! its checkpoints; `keep_latest` keeps the thread and its current state but prunes its
//! checkpoints to the latest of each namespace (its history), once per change. Each batch
//! of at most [`RetentionConfig::batch`] threads is handled before the next is read, so the
//! sweeper never holds more than a batch and the database sees short transactions.
//!
//! A write that was already on its way when its thread was deleted (a state update that
//! started before the thread expired, a run claimed as it was swept) can land after the
//! deletion. So a deleted thread is remembered for a while, and its checkpoints are
//! deleted again once [`TOMBSTONE_GRACE`] has passed, unless a thread of that id exists
//! again by then: no checkpoint outlives its thread.

pub use crate::config::RetentionConfig;
use crate::db::{ExpiredThread, TtlStrategy};
use crate::state::AppState;
use futures::StreamExt;
use graphloom_server_db::kit::now_micros;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long after deleting a thread its checkpoints are deleted once more (the writes in
/// flight at its deletion have landed by then).
pub const TOMBSTONE_GRACE: Duration = Duration::from_secs(5);

/// At most this many deleted threads are remembered; past it the oldest are cleaned
/// early.
const MAX_TOMBSTONES: usize = 100_000;

/// Threads deleted by the sweeper, and when.
#[derive(Default)]
pub(crate) struct Tombstones(VecDeque<(String, Instant)>);

/// What one sweep did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Swept {
    /// Threads deleted.
    pub deleted: usize,
    /// Threads pruned to their latest checkpoint.
    pub pruned: usize,
    /// Store items deleted.
    pub store_items: usize,
}

/// Sweeps: one log line when they start failing, one when they work again.
static SWEEPS: crate::outage::Outage = crate::outage::Outage::new("the retention sweep");

/// The sweeper's loop, until shutdown.
pub(crate) async fn run(state: Arc<AppState>) {
    let mut shutdown = state.shutdown.subscribe();
    let mut tombstones = Tombstones::default();
    loop {
        tokio::select! {
            () = tokio::time::sleep(state.config.retention.sweep_interval) => {}
            _ = shutdown.changed() => return,
        }
        match sweep(&state, &mut tombstones).await {
            Ok(s) => {
                SWEEPS.worked();
                if s != Swept::default() {
                    tracing::debug!(?s, "retention sweep");
                }
            }
            Err(e) => {
                SWEEPS.failed(&e);
            }
        }
    }
}

/// Handle one expired thread.
async fn expire(state: &AppState, t: &ExpiredThread, now: i64) -> Result<TtlStrategy, String> {
    match t.strategy {
        TtlStrategy::Delete => {
            // Checkpoints first: a crash between leaves the thread row, and the next sweep
            // finishes the job, instead of leaving checkpoints no thread names.
            state
                .checkpointer
                .delete_thread(&t.thread_id)
                .await
                .map_err(|e| e.to_string())?;
            state
                .db
                .delete_thread_any(&t.thread_id)
                .await
                .map_err(|e| e.to_string())?;
        }
        TtlStrategy::KeepLatest => {
            state
                .checkpointer
                .prune_to_latest(&t.thread_id)
                .await
                .map_err(|e| e.to_string())?;
            state
                .db
                .mark_retained(&t.thread_id, now)
                .await
                .map_err(|e| e.to_string())?;
        }
    }
    Ok(t.strategy)
}

/// Delete again the checkpoints of threads deleted at least [`TOMBSTONE_GRACE`] ago (or
/// the oldest, past [`MAX_TOMBSTONES`]) whose id names no thread now.
async fn clean_tombstones(state: &AppState, tombstones: &mut Tombstones) {
    let mut due = Vec::new();
    while let Some((_, at)) = tombstones.0.front() {
        if at.elapsed() < TOMBSTONE_GRACE && tombstones.0.len() <= MAX_TOMBSTONES {
            break;
        }
        if let Some((id, _)) = tombstones.0.pop_front() {
            due.push(id);
        }
    }
    futures::stream::iter(due)
        .for_each_concurrent(16, |id| async move {
            match state.db.thread_exists(&id).await {
                Ok(false) => {
                    if let Err(e) = state.checkpointer.delete_thread(&id).await {
                        tracing::warn!(thread_id = %id, error = %e, "deleting a swept thread's late checkpoints failed");
                    }
                }
                Ok(true) => {}
                Err(e) => tracing::warn!(thread_id = %id, error = %e, "checking a swept thread failed"),
            }
        })
        .await;
}

/// One sweep: the late checkpoints of threads deleted before, every expired thread in
/// batches, then the store's expired items and old webhook deliveries.
///
/// # Errors
/// When the database cannot say which threads expired.
pub(crate) async fn sweep(
    state: &AppState,
    tombstones: &mut Tombstones,
) -> Result<Swept, crate::db::DbError> {
    let cfg = &state.config.retention;
    let batch = cfg.batch.max(1);
    let mut swept = Swept::default();
    clean_tombstones(state, tombstones).await;
    loop {
        let now = now_micros();
        let expired = state
            .db
            .expired_threads_for(now, cfg.thread_ttl, i64::try_from(batch).unwrap_or(100))
            .await?;
        let n = expired.len();
        let results: Vec<_> = futures::stream::iter(expired)
            .map(|t| async move {
                let done = expire(state, &t, now).await;
                (t.thread_id, done)
            })
            .buffer_unordered(16)
            .collect()
            .await;
        let mut progress = 0;
        for (thread_id, r) in results {
            match r {
                Ok(TtlStrategy::Delete) => {
                    swept.deleted += 1;
                    tombstones.0.push_back((thread_id, Instant::now()));
                }
                Ok(TtlStrategy::KeepLatest) => swept.pruned += 1,
                Err(e) => {
                    tracing::warn!(error = %e, "expiring a thread failed");
                    continue;
                }
            }
            progress += 1;
        }
        if n < batch || progress == 0 || state.shutting_down() {
            break;
        }
        tokio::task::yield_now().await;
    }
    match state.store.sweep_expired().await {
        Ok(n) => swept.store_items = n,
        Err(e) => tracing::warn!(error = %e, "sweeping expired store items failed"),
    }
    let keep = i64::try_from(cfg.webhook_retention.as_micros()).unwrap_or(i64::MAX);
    if let Err(e) = state
        .db
        .prune_webhooks(now_micros().saturating_sub(keep), 1000)
        .await
    {
        tracing::warn!(error = %e, "pruning old webhook deliveries failed");
    }
    state.broker.sweep_now();
    Ok(swept)
}
