//! What watches a run while it executes: the heartbeat that keeps its lease (and learns of
//! cancels and of losing the run), and the graceful shutdown that drains it (it stops at
//! its next step boundary) or, past the grace period, stops it.

use crate::db::Lease;
use crate::state::{AppState, LocalRun};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tokio::task::JoinHandle;

/// The watchers of one run; [`stop`](Self::stop) them when the run's stream has ended.
pub(super) struct Watch {
    heartbeat: JoinHandle<()>,
    stopper: JoinHandle<()>,
    lost: Arc<AtomicBool>,
}

impl Watch {
    /// Start watching run `run_id`, executing here as `local`.
    pub(super) fn start(state: &Arc<AppState>, run_id: &str, local: &Arc<LocalRun>) -> Self {
        let lost = Arc::new(AtomicBool::new(false));
        Self {
            heartbeat: tokio::spawn(heartbeat(
                Arc::clone(state),
                run_id.to_owned(),
                Arc::clone(local),
                Arc::clone(&lost),
            )),
            stopper: tokio::spawn(stop_at_shutdown(Arc::clone(state), Arc::clone(local))),
            lost,
        }
    }

    /// Whether the lease was lost: another worker owns the run now.
    pub(super) fn lost(&self) -> bool {
        self.lost.load(Ordering::SeqCst)
    }

    /// Stop watching.
    pub(super) fn stop(&self) {
        self.heartbeat.abort();
        self.stopper.abort();
    }
}

/// Heartbeats of every run here: one log line when they start failing, one when they work
/// again.
static HEARTBEATS: crate::outage::Outage = crate::outage::Outage::new("renewing run leases");

/// Renew the lease every heartbeat interval: a requested cancel stops the run with its
/// action; a lost lease stops it and marks it `lost`.
async fn heartbeat(state: Arc<AppState>, run_id: String, local: Arc<LocalRun>, lost: Arc<AtomicBool>) {
    let every = state.config.heartbeat_interval();
    loop {
        tokio::time::sleep(every).await;
        match state
            .db
            .heartbeat(&run_id, &state.worker_id, state.config.lease)
            .await
        {
            Ok(Lease::Held) => {
                HEARTBEATS.worked();
            }
            Ok(Lease::Cancel(a)) => local.cancel(a),
            Ok(Lease::Lost) => {
                lost.store(true, Ordering::SeqCst);
                local.token.cancel();
                return;
            }
            Err(e) => {
                HEARTBEATS.failed(&e);
            }
        }
    }
}

/// Graceful shutdown: drain the run (also done by [`crate::Server::shutdown`] for the runs
/// executing then; this covers one claimed as the shutdown began): it stops once its
/// running step is checkpointed, and the worker hands it back to the queue. A run still
/// running after `shutdown_grace` (a step that takes longer, or a graph that cannot drain,
/// [`crate::HostedGraph::drains`]) is stopped then, keeping what finished, and handed back
/// all the same (no cancel action).
async fn stop_at_shutdown(state: Arc<AppState>, local: Arc<LocalRun>) {
    let mut rx = state.shutdown.subscribe();
    if rx.wait_for(|v| *v).await.is_ok() {
        local.control.drain();
        tokio::time::sleep(state.config.shutdown_grace).await;
        local.token.cancel();
    }
}
