//! Node timeouts: a hard cap on one attempt and an idle limit that progress refreshes.
//!
//! A [`TimeoutPolicy`] bounds each attempt of a node two ways: `run`, a wall-clock cap no
//! progress extends, and `idle`, the longest the attempt may go without a sign of life.
//! Signs of life are [`Runtime::heartbeat`](crate::Runtime::heartbeat) and, unless the
//! policy asks for heartbeats only ([`RefreshOn::Heartbeat`]), what the node visibly does:
//! a `custom` stream write, a model token, a message or event it reports. A timeout is a
//! [`NodeError::TimedOut`](crate::NodeError::TimedOut), which the default retry predicate
//! retries; once the retries are spent the run fails with
//! [`Error::NodeTimeout`](crate::Error::NodeTimeout) naming which limit fired.

use crate::types::NodeError;
use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::time::Instant;

/// Which signals refresh a node's idle timeout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum RefreshOn {
    /// Explicit heartbeats and the node's visible progress: `custom` stream writes, model
    /// tokens, messages and events it reports.
    #[default]
    Auto,
    /// Only [`Runtime::heartbeat`](crate::Runtime::heartbeat).
    Heartbeat,
}

/// Which limit of a [`TimeoutPolicy`] an attempt ran past.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TimeoutKind {
    /// The hard cap on one attempt.
    Run,
    /// The attempt went this long without progress.
    Idle,
}

impl fmt::Display for TimeoutKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TimeoutKind::Run => "timed out after",
            TimeoutKind::Idle => "made no progress for",
        })
    }
}

/// How long one attempt of a node may take, set with
/// [`StateGraph::node_timeout`](crate::StateGraph::node_timeout) (a bare [`Duration`] is
/// a hard run timeout).
///
/// ```
/// use graphloom_core::{RefreshOn, TimeoutPolicy};
/// use std::time::Duration;
///
/// // At most two minutes, and never 10 s without a token, a stream write or a heartbeat.
/// let p = TimeoutPolicy::run(Duration::from_secs(120)).with_idle(Duration::from_secs(10));
/// assert_eq!(p.idle_timeout(), Some(Duration::from_secs(10)));
/// // Only explicit heartbeats count as progress.
/// let strict = TimeoutPolicy::idle(Duration::from_secs(5)).refresh_on(RefreshOn::Heartbeat);
/// assert_eq!(strict.refresh(), RefreshOn::Heartbeat);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TimeoutPolicy {
    run: Option<Duration>,
    idle: Option<Duration>,
    refresh_on: RefreshOn,
}

impl TimeoutPolicy {
    /// A hard cap on each attempt, never extended by progress.
    #[must_use]
    pub fn run(timeout: Duration) -> Self {
        Self {
            run: Some(timeout),
            ..Self::default()
        }
    }
    /// An idle limit: each attempt fails once it goes `timeout` without progress.
    #[must_use]
    pub fn idle(timeout: Duration) -> Self {
        Self {
            idle: Some(timeout),
            ..Self::default()
        }
    }
    /// This policy with a hard cap too.
    #[must_use]
    pub fn with_run(mut self, timeout: Duration) -> Self {
        self.run = Some(timeout);
        self
    }
    /// This policy with an idle limit too.
    #[must_use]
    pub fn with_idle(mut self, timeout: Duration) -> Self {
        self.idle = Some(timeout);
        self
    }
    /// Choose which signals refresh the idle limit (default [`RefreshOn::Auto`]).
    #[must_use]
    pub fn refresh_on(mut self, refresh: RefreshOn) -> Self {
        self.refresh_on = refresh;
        self
    }
    /// The hard cap, if any.
    #[must_use]
    pub fn run_timeout(&self) -> Option<Duration> {
        self.run
    }
    /// The idle limit, if any.
    #[must_use]
    pub fn idle_timeout(&self) -> Option<Duration> {
        self.idle
    }
    /// Which signals refresh the idle limit.
    #[must_use]
    pub fn refresh(&self) -> RefreshOn {
        self.refresh_on
    }
    /// Whether the node's visible progress (not only heartbeats) refreshes the idle limit.
    pub(crate) fn auto_progress(&self) -> bool {
        self.idle.is_some() && self.refresh_on == RefreshOn::Auto
    }
}

impl From<Duration> for TimeoutPolicy {
    fn from(run: Duration) -> Self {
        Self::run(run)
    }
}

/// When an attempt last made progress, shared between the attempt's runtime (which
/// records it) and its watchdog (which reads it).
#[derive(Debug)]
pub(crate) struct Progress {
    start: Instant,
    /// Nanoseconds from `start` to the latest progress.
    last: AtomicU64,
    /// Whether the node's visible progress counts, or only heartbeats.
    auto: bool,
}

impl Progress {
    pub fn new(auto: bool) -> Self {
        Self {
            start: Instant::now(),
            last: AtomicU64::new(0),
            auto,
        }
    }
    /// Record progress now.
    pub fn heartbeat(&self) {
        let since = u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.last.fetch_max(since, Ordering::Relaxed);
    }
    /// Record the node's visible progress, when the policy counts it.
    pub fn touch(&self) {
        if self.auto {
            self.heartbeat();
        }
    }
    fn last(&self) -> Instant {
        self.start + Duration::from_nanos(self.last.load(Ordering::Relaxed))
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Run one attempt under `policy`: its result, or `TimedOut` once a limit is passed (the
/// attempt is dropped then). A result ready at the same instant as a limit wins.
pub(crate) async fn run_timed<T, F>(
    fut: F,
    policy: &TimeoutPolicy,
    progress: &Progress,
) -> Result<T, NodeError>
where
    F: Future<Output = Result<T, NodeError>>,
{
    let run_deadline = policy.run.map(|d| progress.start + d);
    tokio::pin!(fut);
    loop {
        let idle_deadline = policy.idle.map(|d| progress.last() + d);
        let deadline = match (run_deadline, idle_deadline) {
            (Some(a), Some(b)) => a.min(b),
            (Some(a), None) | (None, Some(a)) => a,
            (None, None) => return fut.await,
        };
        tokio::select! {
            biased;
            r = &mut fut => return r,
            () = tokio::time::sleep_until(deadline) => {}
        }
        let now = Instant::now();
        if let Some(d) = run_deadline.filter(|d| now >= *d).and(policy.run) {
            return Err(NodeError::TimedOut {
                after_ms: millis(d),
                kind: TimeoutKind::Run,
            });
        }
        if let Some(idle) = policy.idle.filter(|i| now >= progress.last() + *i) {
            return Err(NodeError::TimedOut {
                after_ms: millis(idle),
                kind: TimeoutKind::Idle,
            });
        }
        // Progress came in while the watchdog slept: wait for the new idle deadline.
    }
}
