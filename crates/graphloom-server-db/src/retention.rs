//! Retention: which threads' time to live has passed, and with what strategy
//! ([`RetentionDb`], a part of [`Db`](crate::Db)).
//!
//! A thread's own `ttl` (`{"strategy": "delete" | "keep_latest", "ttl": minutes}`) counts
//! from its last change (creation, a run's start or end, a patch). A thread without one
//! takes the server's default, when configured, counted the same way. A busy thread is
//! never expired. `keep_latest` keeps the thread and prunes its checkpoints to the latest;
//! the thread is then not picked again until it changes.

use crate::db::DbResult;
use async_trait::async_trait;
use std::time::Duration;

/// What happens to a thread whose time to live has passed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum TtlStrategy {
    /// The thread, its runs and its checkpoints are deleted.
    #[default]
    Delete,
    /// The thread stays; only its latest checkpoint (per namespace) is kept.
    KeepLatest,
}

impl TtlStrategy {
    /// The wire name.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            TtlStrategy::Delete => "delete",
            TtlStrategy::KeepLatest => "keep_latest",
        }
    }
    /// From the wire name.
    #[must_use]
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "delete" => Some(TtlStrategy::Delete),
            "keep_latest" => Some(TtlStrategy::KeepLatest),
            _ => None,
        }
    }
}

/// The server's time to live for threads that set none of their own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DefaultTtl {
    /// What to do when it passes.
    pub strategy: TtlStrategy,
    /// How long after its last change.
    pub ttl: Duration,
}

/// A thread whose time to live has passed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExpiredThread {
    /// The thread.
    pub thread_id: String,
    /// What to do with it.
    pub strategy: TtlStrategy,
}

/// Storage calls of the retention sweeper (see the module docs).
#[async_trait]
pub trait RetentionDb: Send + Sync {
    /// Threads of any owner whose time to live has passed by `now_us` (their own, or
    /// `default` for those without one), not busy, at most `limit`, oldest first.
    async fn expired_threads_for(
        &self,
        now_us: i64,
        default: Option<DefaultTtl>,
        limit: i64,
    ) -> DbResult<Vec<ExpiredThread>>;
    /// Note that a `keep_latest` thread was pruned at `now_us`: it is not picked again
    /// until it changes.
    async fn mark_retained(&self, thread_id: &str, now_us: i64) -> DbResult<()>;
    /// Whether a thread of any owner has this id.
    async fn thread_exists(&self, thread_id: &str) -> DbResult<bool>;
}
