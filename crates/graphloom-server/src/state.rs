//! [`AppState`]: what the HTTP handlers, the services and the workers share.

use crate::broker::Broker;
use crate::config::ServerConfig;
use crate::db::file_lock::FileLock;
use crate::db::Db;
use crate::host::HostedGraph;
use crate::metrics::Metrics;
use crate::models::{CancelAction, ClaimedRun};
use crate::run::{KwargsError, RunKwargs};
use graphloom_core::checkpoint::DynCheckpointer;
use graphloom_core::store::DynStore;
use graphloom_core::{CancelToken, RunControl};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use tokio::sync::{watch, Notify, OwnedSemaphorePermit, Semaphore};

/// The shared state, as handlers and services hold it.
pub(crate) type AppRef = Arc<AppState>;

/// Starts a run claimed at its creation on this process's workers, holding its slot until
/// it ends: the workers' `spawn_claimed`, handed in by the app, so that the services pass
/// claimed runs on without importing the workers.
pub(crate) type StartClaimed = fn(&AppRef, ClaimedRun, Result<RunKwargs, KwargsError>, OwnedSemaphorePermit);

/// A run executing in this process.
pub(crate) struct LocalRun {
    pub thread_id: String,
    pub token: CancelToken,
    pub action: Mutex<Option<CancelAction>>,
    /// Drains the run (a graceful shutdown asks it to stop at its next step boundary).
    pub control: RunControl,
}

impl LocalRun {
    /// Stop the run, telling its worker why.
    pub(crate) fn cancel(&self, action: CancelAction) {
        *self.action.lock().unwrap_or_else(PoisonError::into_inner) = Some(action);
        self.token.cancel();
    }

    /// Why the run was cancelled, if it was.
    pub(crate) fn action(&self) -> Option<CancelAction> {
        *self.action.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Shared state of handlers and workers.
pub struct AppState {
    pub(crate) db: Arc<dyn Db>,
    pub(crate) graphs: BTreeMap<String, Arc<dyn HostedGraph>>,
    pub(crate) checkpointer: Arc<dyn DynCheckpointer>,
    pub(crate) store: Arc<dyn DynStore>,
    pub(crate) broker: Broker,
    pub(crate) metrics: Metrics,
    /// The graphs' own metrics, exported after the server's.
    pub(crate) graph_metrics: crate::host::GraphMetrics,
    pub(crate) config: ServerConfig,
    pub(crate) worker_id: String,
    pub(crate) wake: Notify,
    /// Execution slots of this process's worker pool (set when the workers start).
    pub(crate) slots: OnceLock<Arc<Semaphore>>,
    /// Starts a run claimed at its creation (see [`AppState::free_slot`]).
    pub(crate) start_claimed: StartClaimed,
    pub(crate) local: Mutex<HashMap<String, Arc<LocalRun>>>,
    pub(crate) shutdown: watch::Sender<bool>,
    pub(crate) validators: BTreeMap<String, Arc<jsonschema::Validator>>,
    /// The OpenAPI document, generated when the router is built.
    pub(crate) openapi: OnceLock<serde_json::Value>,
    /// The SQLite file's lock (none on PostgreSQL), released when `Server::serve` is
    /// done or the state is dropped.
    pub(crate) file_lock: Mutex<Option<FileLock>>,
    /// Who requests are and what they may do.
    pub(crate) auth: Arc<dyn crate::auth::DynAuth>,
    /// Wakes the thread-protocol followers of a thread when a command queues a run on it.
    pub(crate) thread_signals: crate::signals::ThreadSignals,
    /// Example inputs by graph id, for the console's start form.
    pub(crate) samples: BTreeMap<String, serde_json::Value>,
    /// The model each graph answers with (`scripted`, `openai:gpt-4o-mini`), when told.
    pub(crate) models: BTreeMap<String, String>,
}

impl AppState {
    /// Ask a run executing here to stop now.
    pub(crate) fn cancel_local(&self, run_id: &str, action: CancelAction) -> bool {
        let run = self.local_runs().get(run_id).cloned();
        match run {
            Some(r) => {
                r.cancel(action);
                true
            }
            None => false,
        }
    }

    /// Stop every run of a thread executing here.
    pub(crate) fn cancel_local_thread(&self, thread_id: &str, action: CancelAction) {
        let ids: Vec<String> = self
            .local_runs()
            .iter()
            .filter(|(_, r)| r.thread_id == thread_id)
            .map(|(id, _)| id.clone())
            .collect();
        for id in ids {
            self.cancel_local(&id, action);
        }
    }

    /// The runs executing in this process, by run id.
    pub(crate) fn local_runs(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<LocalRun>>> {
        self.local.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A free execution slot, if the worker pool runs here and is not shutting down: a run
    /// created now can be claimed at once and started with
    /// [`start_claimed`](Self::start_claimed).
    pub(crate) fn free_slot(&self) -> Option<OwnedSemaphorePermit> {
        if self.shutting_down() {
            return None;
        }
        Arc::clone(self.slots.get()?).try_acquire_owned().ok()
    }

    /// Whether a graceful shutdown has begun.
    pub(crate) fn shutting_down(&self) -> bool {
        *self.shutdown.borrow()
    }

    /// Ask every run executing here to drain (stop at its next step boundary). A run whose
    /// graph cannot drain does not hear it.
    pub(crate) fn drain_local(&self) {
        for run in self.local_runs().values() {
            run.control.drain();
        }
    }
}
