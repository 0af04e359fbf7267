//! The end of a hosted run as the graph's hook hears it: [`RunEnd`], its [`RunOutcome`],
//! and the [`RunEndHook`] a graph may carry.

use futures::future::BoxFuture;
use std::sync::Arc;
use std::time::Duration;

/// The tighter of two time limits (`None`: no limit).
pub(crate) fn tighter(a: Option<Duration>, b: Option<Duration>) -> Option<Duration> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// How long the server waits for a [`RunEndHook`]: past it the hook is abandoned (and
/// logged), and the run's end is recorded.
pub const RUN_END_HOOK_LIMIT: Duration = Duration::from_secs(30);

/// How a hosted run ended, as its [`RunEndHook`] hears it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RunOutcome {
    /// The graph ran to its end (run status `success`).
    Success,
    /// The run paused at an interrupt (run status `interrupted`).
    Interrupted,
    /// A client cancelled the run with the `interrupt` action (run status `interrupted`).
    Cancelled,
    /// The graph failed (run status `error`).
    Error,
    /// The run passed its time limit (run status `timeout`).
    Timeout,
}

impl RunOutcome {
    /// The outcome as a word: `success`, `interrupted`, `cancelled`, `error`, `timeout`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Success => "success",
            Self::Interrupted => "interrupted",
            Self::Cancelled => "cancelled",
            Self::Error => "error",
            Self::Timeout => "timeout",
        }
    }
}

impl std::fmt::Display for RunOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The end of one run, handed to the graph's [`RunEndHook`].
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct RunEnd {
    /// The run.
    pub run_id: String,
    /// Its thread (a stateless run's temporary thread, deleted after the hook).
    pub thread_id: String,
    /// The graph's id.
    pub graph_id: String,
    /// Which attempt of the run this is (from 1; above 1 after a crash took it over).
    pub attempt: i64,
    /// How it ended.
    pub outcome: RunOutcome,
    /// The error's text, for [`RunOutcome::Error`] and [`RunOutcome::Timeout`].
    pub error: Option<String>,
    /// The run's time limit: the smaller of the server's and the graph's
    /// ([`HostedGraph::run_timeout`](super::HostedGraph::run_timeout)); `None` when neither has one.
    pub timeout: Option<Duration>,
}

/// What the server calls when a run of a hosted graph ends; see [`Hosting::on_run_end`].
#[derive(Clone)]
pub struct RunEndHook(Arc<dyn Fn(RunEnd) -> BoxFuture<'static, Result<(), String>> + Send + Sync>);

impl RunEndHook {
    /// A hook running `f`; its error is logged by the server.
    pub fn new<F, Fut, E>(f: F) -> Self
    where
        F: Fn(RunEnd) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<(), E>> + Send + 'static,
        E: std::fmt::Display,
    {
        Self(Arc::new(move |end| {
            let fut = f(end);
            Box::pin(async move { fut.await.map_err(|e| e.to_string()) })
        }))
    }

    /// Run the hook for `end`.
    pub fn call(&self, end: RunEnd) -> BoxFuture<'static, Result<(), String>> {
        (self.0)(end)
    }
}

impl std::fmt::Debug for RunEndHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RunEndHook")
    }
}
