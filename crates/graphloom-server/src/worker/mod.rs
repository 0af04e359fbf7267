//! The worker pool: claims runs from the durable queue, executes each as a
//! [`RunExecution`](execution::RunExecution) in named steps (claim, heartbeat and
//! shutdown watch, stream into the event sink, finish); it starts the cron scheduler, the
//! webhook dispatcher and the retention sweeper beside them.
//!
//! | file | step |
//! |---|---|
//! | `execution.rs` | what the steps pass along: the run, its request, graph, sink |
//! | `steps.rs` | claim the run, build its graph request, stream its events |
//! | `faults.rs` | which errors are transient database faults, and the pauses between tries |
//! | `watch.rs` | heartbeat the lease (cancels, a lost lease), stop at shutdown |
//! | `sink.rs` | where events go: the broker, and the database for resumable runs |
//! | `finish.rs` | record the outcome, hand back, refuse or abandon a run |
//! | `usage.rs` | token and cost metrics from the run's updates |

mod execution;
mod faults;
mod finish;
mod sink;
mod steps;
mod usage;
mod watch;

use crate::models::ClaimedRun;
use crate::run::{KwargsError, RunKwargs};
use crate::state::AppState;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Claims of every worker: one log line when they start failing, one when they work again.
static CLAIMS: crate::outage::Outage = crate::outage::Outage::new("claiming runs");

/// How often an idle worker looks at the queue (runs created by another replica are seen
/// this way; local ones wake a worker at once).
const POLL: Duration = Duration::from_millis(250);

/// Start the workers, the task that waits for runs claimed at creation at shutdown, the
/// cron scheduler, the webhook dispatcher and the retention sweeper.
pub(crate) fn start(state: Arc<AppState>) -> Vec<tokio::task::JoinHandle<()>> {
    let workers = state.config.workers;
    let slots = Arc::clone(state.slots.get_or_init(|| Arc::new(Semaphore::new(workers))));
    let mut handles: Vec<_> = (0..workers)
        .map(|_| tokio::spawn(worker_loop(Arc::clone(&state), Arc::clone(&slots))))
        .collect();
    // Runs claimed at creation execute on tasks of their own: shutdown waits for them by
    // taking back every slot.
    let (st, all) = (Arc::clone(&state), u32::try_from(workers).unwrap_or(u32::MAX));
    handles.push(tokio::spawn(async move {
        let mut rx = st.shutdown.subscribe();
        if rx.wait_for(|v| *v).await.is_ok() && all > 0 {
            let _ = slots.acquire_many(all).await;
        }
    }));
    handles.push(tokio::spawn(crate::scheduler::run(Arc::clone(&state))));
    handles.push(tokio::spawn(crate::webhook::run(Arc::clone(&state))));
    handles.push(tokio::spawn(crate::retention::run(state)));
    handles
}

/// Execute a run claimed at its creation (its `kwargs` as the service built them),
/// holding `slot` until it ends.
pub(crate) fn spawn_claimed(
    state: &Arc<AppState>,
    claimed: ClaimedRun,
    kwargs: Result<RunKwargs, KwargsError>,
    slot: OwnedSemaphorePermit,
) {
    let state = Arc::clone(state);
    tokio::spawn(async move {
        steps::run_claimed(&state, claimed, kwargs).await;
        drop(slot);
    });
}

async fn worker_loop(state: Arc<AppState>, slots: Arc<Semaphore>) {
    let mut shutdown = state.shutdown.subscribe();
    // Whether this worker's last claim found a run: a busy queue likely has another.
    let mut busy = false;
    loop {
        if *shutdown.borrow() {
            return;
        }
        // A slot first: runs claimed at creation count against the same pool.
        let slot = tokio::select! {
            s = Arc::clone(&slots).acquire_owned() => match s {
                Ok(s) => s,
                Err(_) => return,
            },
            _ = shutdown.changed() => continue,
        };
        let (worker, lease) = (&state.worker_id, state.config.lease);
        let claim = if busy {
            state.db.claim_expected_run(worker, lease).await
        } else {
            state.db.claim_run(worker, lease).await
        };
        busy = matches!(claim, Ok(Some(_)));
        if claim.is_ok() {
            CLAIMS.worked();
        }
        match claim {
            Ok(Some(claimed)) => {
                let kwargs = RunKwargs::of(&claimed.run.kwargs);
                steps::run_claimed(&state, claimed, kwargs).await;
                drop(slot);
            }
            Ok(None) => {
                drop(slot);
                tokio::select! {
                    () = state.wake.notified() => {}
                    () = tokio::time::sleep(POLL) => {}
                    _ = shutdown.changed() => {}
                }
            }
            Err(e) => {
                drop(slot);
                CLAIMS.failed(&e);
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}
