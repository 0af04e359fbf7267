//! [`RunExecution`]: one claimed run taken up by this worker, as its steps (in
//! `steps.rs` and `finish.rs`) pass it along.

use super::sink::EventSink;
use crate::host::HostedGraph;
use crate::models::Run;
use crate::run::RunKwargs;
use crate::state::{AppState, LocalRun};
use std::sync::Arc;

/// A claimed run taken up by this worker: what every step reads.
pub(super) struct RunExecution {
    pub state: Arc<AppState>,
    /// The run row as claimed.
    pub run: Run,
    /// Attempt number, from 1.
    pub attempt: i64,
    /// Its request, typed.
    pub kwargs: RunKwargs,
    pub graph: Arc<dyn HostedGraph>,
    /// Its entry among the runs executing here (cancel token, cancel action).
    pub local: Arc<LocalRun>,
    pub sink: EventSink,
}

impl RunExecution {
    /// The run's id.
    pub(super) fn run_id(&self) -> &str {
        &self.run.run_id
    }

    /// The run's time limit: the smaller of the server's and its graph's.
    pub(super) fn run_limit(&self) -> Option<std::time::Duration> {
        crate::host::tighter(self.state.config.run_timeout, self.graph.run_timeout())
    }
}
