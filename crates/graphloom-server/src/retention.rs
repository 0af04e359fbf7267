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

use crate::db::{DefaultTtl, ExpiredThread, TtlStrategy};
use crate::state::AppState;
use futures::StreamExt;
use graphloom_core::store::TtlConfig;
use graphloom_server_db::kit::now_micros;
use std::sync::Arc;
use std::time::Duration;

/// Settings of retention.
#[derive(Clone, Debug)]
pub struct RetentionConfig {
    /// Time to live of threads created without a `ttl` of their own (`None`, the default:
    /// they live until deleted).
    pub thread_ttl: Option<DefaultTtl>,
    /// Expiry of store items: a default time to live for items put without one (none by
    /// default) and whether reads refresh it (yes by default).
    pub store_ttl: TtlConfig,
    /// How often the sweeper runs (default 60 s).
    pub sweep_interval: Duration,
    /// Threads handled per batch (default 100).
    pub batch: usize,
    /// How long delivered and given-up webhook deliveries are kept (default 7 days).
    pub webhook_retention: Duration,
}

impl Default for RetentionConfig {
    fn default() -> Self {
        Self {
            thread_ttl: None,
            store_ttl: TtlConfig::default(),
            sweep_interval: Duration::from_secs(60),
            batch: 100,
            webhook_retention: Duration::from_secs(7 * 24 * 3600),
        }
    }
}

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

/// The sweeper's loop, until shutdown.
pub(crate) async fn run(state: Arc<AppState>) {
    let mut shutdown = state.shutdown.subscribe();
    loop {
        tokio::select! {
            () = tokio::time::sleep(state.config.retention.sweep_interval) => {}
            _ = shutdown.changed() => return,
        }
        match sweep(&state).await {
            Ok(s) if s != Swept::default() => tracing::debug!(?s, "retention sweep"),
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "retention sweep failed"),
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

/// One sweep: every expired thread in batches, then the store's expired items and old
/// webhook deliveries.
///
/// # Errors
/// When the database cannot say which threads expired.
pub(crate) async fn sweep(state: &AppState) -> Result<Swept, crate::db::DbError> {
    let cfg = &state.config.retention;
    let batch = cfg.batch.max(1);
    let mut swept = Swept::default();
    loop {
        let now = now_micros();
        let expired = state
            .db
            .expired_threads_for(now, cfg.thread_ttl, i64::try_from(batch).unwrap_or(100))
            .await?;
        let n = expired.len();
        let results: Vec<_> = futures::stream::iter(expired)
            .map(|t| async move { expire(state, &t, now).await })
            .buffer_unordered(16)
            .collect()
            .await;
        let mut progress = 0;
        for r in results {
            match r {
                Ok(TtlStrategy::Delete) => swept.deleted += 1,
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
