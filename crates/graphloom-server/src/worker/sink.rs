//! Where a run's events go: this process's broker, and for a `stream_resumable` run also
//! the database, so a client of another replica (or of this server after a restart) can
//! replay them. Database writes are batched by a task of their own, off the run's path:
//! the events of a few milliseconds go in one write, and the last ones with the run's end
//! ([`EventSink::unstored`]), in the transaction that records it: a short run's events
//! usually all go there.

use crate::broker::RunEventRecord;
use crate::state::AppState;
use serde_json::Value;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// Most events stored in one write.
const BATCH: usize = 256;

/// How long a write waits for more events after the first: a reader on another replica
/// sees the run's events this much later at most, and a run writes its events about once
/// per this interval instead of once per burst.
const LINGER: Duration = Duration::from_millis(25);

/// The event sink of one run.
pub(super) struct EventSink {
    state: Arc<AppState>,
    run_id: String,
    tx: Option<mpsc::UnboundedSender<RunEventRecord>>,
    /// Set before the sender goes when the caller stores the writer's last batch itself.
    hand_over: Arc<AtomicBool>,
    writer: Option<JoinHandle<Vec<RunEventRecord>>>,
    /// Its events are stored (a resumable run).
    stores: bool,
    /// Events pushed after [`unstored`](Self::unstored) (a completed run's events go
    /// with its outcome, before its stream ends): the next `unstored` gives them.
    late: Mutex<Vec<RunEventRecord>>,
}

impl EventSink {
    /// The sink of run `run_id`; `resumable`: its events are stored too. `attempt` is the
    /// run's execution attempt: a first one has no stored events to clear.
    pub(super) async fn start(state: &Arc<AppState>, run_id: &str, resumable: bool, attempt: i64) -> Self {
        let mut sink = Self {
            state: Arc::clone(state),
            run_id: run_id.to_owned(),
            tx: None,
            hand_over: Arc::new(AtomicBool::new(false)),
            writer: None,
            stores: resumable,
            late: Mutex::new(Vec::new()),
        };
        if !resumable {
            return sink;
        }
        if state.broker.len(run_id) == 0 && attempt > 1 {
            // A fresh log here for a run taken over (from another process, or after a
            // restart): the stored one starts again with it.
            if let Err(e) = state.db.delete_run_events(run_id).await {
                tracing::warn!(run_id, error = %e, "clearing a run's stored events failed");
            }
        }
        let (tx, rx) = mpsc::unbounded_channel::<RunEventRecord>();
        sink.writer = Some(tokio::spawn(store_events(
            Arc::clone(state),
            run_id.to_owned(),
            rx,
            Arc::clone(&sink.hand_over),
        )));
        sink.tx = Some(tx);
        sink
    }

    /// Emit one event.
    pub(super) fn push(&self, event: String, data: Value) {
        let broker = &self.state.broker;
        let data = Arc::new(data);
        if self.stores {
            let record = RunEventRecord {
                id: broker.len(&self.run_id),
                event: event.clone(),
                data: Arc::clone(&data),
            };
            match &self.tx {
                Some(tx) => {
                    let _ = tx.send(record);
                }
                None => self
                    .late
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(record),
            }
        }
        broker.push(&self.run_id, event, data);
    }

    /// Take back `events` given by [`unstored`](Self::unstored) and not stored: the next
    /// call gives them again, first.
    pub(super) fn restore(&mut self, mut events: Vec<RunEventRecord>) {
        let late = self.late.get_mut().unwrap_or_else(PoisonError::into_inner);
        events.append(late);
        *late = events;
    }

    /// Wait until every event is stored.
    pub(super) async fn flush(&mut self) {
        let rest = self.unstored().await;
        if rest.is_empty() {
            return;
        }
        if let Err(e) = self.state.db.append_run_events(&self.run_id, rest).await {
            tracing::warn!(run_id = %self.run_id, error = %e, "storing a run's events failed");
        }
    }

    /// End the sink's own writes: the events not stored yet, for the caller to store
    /// (with the run's end); those of earlier batches are stored when this returns. Events
    /// pushed after it are kept for the next call. Empty for a run whose events are not
    /// stored.
    pub(super) async fn unstored(&mut self) -> Vec<RunEventRecord> {
        self.hand_over.store(true, Ordering::SeqCst);
        self.tx = None;
        let mut out = match self.writer.take() {
            Some(w) => w.await.unwrap_or_default(),
            None => Vec::new(),
        };
        out.append(self.late.get_mut().unwrap_or_else(PoisonError::into_inner));
        out
    }
}

/// Store a run's events as they come, in batches: from the first event of a batch, what
/// arrives within [`LINGER`] goes with it. The batch open when the sink ends is stored here
/// too, unless `hand_over` is set: it is returned for the caller to store.
async fn store_events(
    state: Arc<AppState>,
    run_id: String,
    mut rx: mpsc::UnboundedReceiver<RunEventRecord>,
    hand_over: Arc<AtomicBool>,
) -> Vec<RunEventRecord> {
    while let Some(first) = rx.recv().await {
        let mut batch = vec![first];
        let until = tokio::time::Instant::now() + LINGER;
        let mut last = false;
        while batch.len() < BATCH {
            match tokio::time::timeout_at(until, rx.recv()).await {
                Ok(Some(e)) => batch.push(e),
                Ok(None) => {
                    last = true;
                    break;
                }
                Err(_) => break,
            }
        }
        if last && hand_over.load(Ordering::SeqCst) {
            return batch;
        }
        if let Err(e) = state.db.append_run_events(&run_id, batch).await {
            tracing::warn!(run_id = %run_id, error = %e, "storing a run's events failed");
        }
    }
    Vec::new()
}
