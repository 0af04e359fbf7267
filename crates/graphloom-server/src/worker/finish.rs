//! The end of a run: handed back to the queue when a shutdown drained or stopped it, else
//! its status and its thread's outcome recorded (with the run's last checkpoint when that
//! already happened), a rolled-back run's checkpoints deleted, a temporary thread dropped,
//! the metrics counted and the readers given the end.

use super::execution::RunExecution;
use super::faults::Backoff;
use super::sink::EventSink;
use crate::broker::RunEventRecord;
use crate::db::{DbResult, ThreadOutcome};
use crate::host::JsonRunOutput;
use crate::host::{RunEnd, RunOutcome, RUN_END_HOOK_LIMIT};
use crate::metrics::StatusLabel;
use crate::models::{CancelAction, Run, RunStatus, ThreadStatus};
use crate::state::AppState;
use crate::wire;
use graphloom_core::{Completion, CompletionHook};
use serde_json::{json, Map, Value};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::{mpsc, oneshot};

/// How a run's stream ended.
pub(super) struct Ended {
    /// The graph's result (`Cancelled` when the stream ended without one).
    pub result: Result<JsonRunOutput, graphloom_core::Error>,
    /// Why the run was cancelled, when a cancel or a heartbeat's cancel stopped it.
    pub action: Option<CancelAction>,
    /// Set when `success` was recorded with the last checkpoint ([`write_at_checkpoint`]).
    pub recorded_early: Arc<AtomicBool>,
    /// When the stream began.
    pub started: Instant,
}

impl Ended {
    fn cancelled(&self) -> bool {
        matches!(self.result, Err(graphloom_core::Error::Cancelled))
    }

    /// Whether a shutdown stopped the run: drained at a step boundary, or cancelled with no
    /// action past the grace period. It has not ended: it goes back to the queue.
    fn handed_back(&self) -> bool {
        matches!(self.result, Err(graphloom_core::Error::Drained))
            || (self.cancelled() && self.action.is_none())
    }

    fn rollback(&self) -> bool {
        self.cancelled() && self.action == Some(CancelAction::Rollback)
    }

    /// The run's status, and its thread's (before a rollback's correction).
    fn statuses(&self) -> (RunStatus, ThreadStatus) {
        match &self.result {
            Ok(out) if out.interrupted => (RunStatus::Interrupted, ThreadStatus::Interrupted),
            Ok(_) => (RunStatus::Success, ThreadStatus::Idle),
            Err(graphloom_core::Error::Cancelled) => (RunStatus::Interrupted, ThreadStatus::Idle),
            Err(graphloom_core::Error::Drained) => (RunStatus::Pending, ThreadStatus::Busy),
            Err(graphloom_core::Error::RunTimeout { .. }) => (RunStatus::Timeout, ThreadStatus::Error),
            Err(_) => (RunStatus::Error, ThreadStatus::Error),
        }
    }
}

/// Call the graph's end hook, if it has one, with how the run ended (see
/// [`crate::Hosting::on_run_end`]). Not for a run handed back to the queue or rolled back.
/// A hook that fails, panics or overruns [`crate::host::RUN_END_HOOK_LIMIT`] is logged.
pub(super) async fn call_end_hook(exec: &RunExecution, ended: &Ended) {
    let Some(hook) = exec.graph.run_end_hook() else {
        return;
    };
    if ended.handed_back() {
        // The run has not ended here: it continues from its checkpoint elsewhere.
        return;
    }
    let (outcome, error) = match &ended.result {
        Ok(out) if out.interrupted => (RunOutcome::Interrupted, None),
        Ok(_) => (RunOutcome::Success, None),
        Err(graphloom_core::Error::Cancelled) => match ended.action {
            Some(CancelAction::Interrupt) => (RunOutcome::Cancelled, None),
            // Rolled back: nothing of the run is left.
            _ => return,
        },
        Err(e @ graphloom_core::Error::RunTimeout { .. }) => (RunOutcome::Timeout, Some(e.to_string())),
        Err(e) => (RunOutcome::Error, Some(e.to_string())),
    };
    let end = RunEnd {
        run_id: exec.run_id().to_owned(),
        thread_id: exec.run.thread_id.clone(),
        graph_id: exec.kwargs.graph_id.clone(),
        attempt: exec.attempt,
        outcome,
        error,
        timeout: exec.run_limit(),
    };
    let called = futures::FutureExt::catch_unwind(std::panic::AssertUnwindSafe(hook.call(end)));
    let run_id = exec.run_id();
    match tokio::time::timeout(RUN_END_HOOK_LIMIT, called).await {
        Ok(Ok(Ok(()))) => {}
        Ok(Ok(Err(e))) => {
            tracing::warn!(run_id, outcome = outcome.as_str(), error = %e, "the graph's run end hook failed")
        }
        Ok(Err(panic)) => tracing::warn!(
            run_id,
            outcome = outcome.as_str(),
            panic = crate::error::panic_message(panic.as_ref()),
            "the graph's run end hook panicked"
        ),
        Err(_) => tracing::warn!(
            run_id,
            outcome = outcome.as_str(),
            limit_s = RUN_END_HOOK_LIMIT.as_secs(),
            "the graph's run end hook did not finish in time; abandoned"
        ),
    }
}

/// End the run (see the module docs).
pub(super) async fn finish(mut exec: RunExecution, ended: Ended) {
    if ended.handed_back() {
        let drained = matches!(ended.result, Err(graphloom_core::Error::Drained));
        tracing::info!(run_id = %exec.run_id(), drained, "shutdown: the run goes back to the queue");
        hand_back(&exec).await;
        return;
    }
    // Every event is stored by the time the run's end is, the last ones in the same
    // transaction: a joiner elsewhere that sees the run ended has then read all of them.
    let rest = exec.sink.unstored().await;
    let (status, _) = ended.statuses();
    if let (Err(e), false) = (&ended.result, ended.cancelled()) {
        let span = tracing::Span::current();
        span.record("otel.status_code", "ERROR");
        span.record("otel.status_description", tracing::field::display(e));
    }
    if ended.rollback() {
        // Rolled back: what the run checkpointed goes, the thread is where the run found it.
        let (thread_id, run_id) = (&exec.run.thread_id, exec.run_id());
        if let Err(e) = exec.state.checkpointer.delete_run(thread_id, run_id).await {
            tracing::warn!(run_id = %run_id, error = %e, "deleting the rolled-back run's checkpoints failed");
        }
    }
    let outcome = thread_outcome(&exec, &ended).await;
    if let (Some(url), false) = (&exec.kwargs.webhook, ended.rollback()) {
        crate::webhook::enqueue(&exec.state, url, &exec.run, status, &outcome, ended.started).await;
    }
    match record_through_faults(&exec, &ended, status, &outcome, rest).await {
        Ok(true) => {}
        Ok(false) => {
            tracing::warn!(run_id = %exec.run_id(), "run was taken over before it finished; outcome dropped");
            return;
        }
        Err(e) => tracing::warn!(run_id = %exec.run_id(), error = %e, "recording the run's outcome failed"),
    }
    close(&exec, &ended, status).await;
}

/// Drained or stopped by shutdown: hand the run back to the queue (`pending`, neither
/// failed nor finished, no webhook); it continues from its checkpoint on another worker or
/// after restart.
async fn hand_back(exec: &RunExecution) {
    let state = &exec.state;
    let _ = state
        .db
        .finish_run(exec.run_id(), &state.worker_id, RunStatus::Pending)
        .await;
    let _ = state
        .db
        .set_thread_status(&exec.run.thread_id, ThreadStatus::Busy)
        .await;
}

/// What the run's end writes to its thread: its status, its copy of the state, and its
/// pending interrupts by task id. A run that ended well hands back its values (unless its
/// graph's end hook ran, which may have written to its thread's state since); otherwise the
/// latest checkpoint says where it stopped.
async fn thread_outcome(exec: &RunExecution, ended: &Ended) -> ThreadOutcome {
    let hooked = exec.graph.run_end_hook().is_some() && !exec.kwargs.temporary;
    let (values, interrupts) = match &ended.result {
        Ok(out) if !out.interrupted && !hooked => (Some(out.values.clone()), Map::new()),
        _ if exec.kwargs.temporary => (None, Map::new()),
        // The hook may have written to the state: the values as it left them, else (the
        // state cannot be read) the run's output, not the values from before the run.
        Ok(out) if !out.interrupted => match latest_state(exec).await {
            (None, interrupts) => (Some(out.values.clone()), interrupts),
            found => found,
        },
        _ => latest_state(exec).await,
    };
    let (_, thread_status) = ended.statuses();
    let status = if ended.rollback() && !interrupts.is_empty() {
        // Back at an interrupt the run had resumed from.
        ThreadStatus::Interrupted
    } else {
        thread_status
    };
    ThreadOutcome {
        status,
        values,
        interrupts: Value::Object(interrupts),
        error: match &ended.result {
            Err(e) if !ended.cancelled() => Some(json!(e.to_string())),
            _ => None,
        },
    }
}

/// The values and pending interrupts (by task id) of the thread's latest checkpoint.
async fn latest_state(exec: &RunExecution) -> (Option<Value>, Map<String, Value>) {
    let snapshot = exec
        .graph
        .get_state(&exec.run.thread_id, None)
        .await
        .ok()
        .flatten();
    let mut interrupts = Map::new();
    let tasks = snapshot
        .as_ref()
        .and_then(|s| s.get("tasks"))
        .and_then(Value::as_array);
    for t in tasks.into_iter().flatten() {
        let id = t.get("id").and_then(Value::as_str);
        if let (Some(id), Some(list)) = (id, t.get("interrupts").and_then(Value::as_array)) {
            if !list.is_empty() {
                interrupts.insert(id.to_owned(), Value::Array(list.clone()));
            }
        }
    }
    let values = snapshot.and_then(|mut s| s.get_mut("values").map(Value::take));
    (values, interrupts)
}

/// [`record`], again after a pause when the database is unavailable, for as long as the
/// run's lease would have lasted: past that another worker takes the run over anyway. A
/// write whose commit went unacknowledged is seen as done when tried again (the run is
/// found ended with this status), not as a takeover.
async fn record_through_faults(
    exec: &RunExecution,
    ended: &Ended,
    status: RunStatus,
    outcome: &ThreadOutcome,
    events: Vec<RunEventRecord>,
) -> DbResult<bool> {
    let since = Instant::now();
    let mut backoff = Backoff::default();
    loop {
        let e = match record(exec, ended, status, outcome, events.clone()).await {
            Ok(false) if backoff.retrying() => return Ok(ended_as(exec, status).await),
            Err(e) if e.is_transient() => e,
            other => return other,
        };
        let pause = backoff
            .next_pause()
            .filter(|_| since.elapsed() < exec.state.config.lease);
        let Some(pause) = pause else {
            return Err(e);
        };
        if backoff.faults() == 1 {
            tracing::warn!(run_id = %exec.run_id(), error = %e, "recording the run's outcome met a database fault; trying again");
        }
        tokio::time::sleep(pause).await;
    }
}

/// Whether the run is recorded as ended with `status` (by this worker's earlier try).
async fn ended_as(exec: &RunExecution, status: RunStatus) -> bool {
    let run = exec
        .state
        .db
        .get_run(&exec.kwargs.owner, Some(&exec.run.thread_id), exec.run_id())
        .await;
    matches!(run, Ok(Some(r)) if r.status == status)
}

/// Record the run's status and its thread's outcome, with `events`, the run's events not
/// stored yet; `false` when the run was taken over (its lease lost) and nothing was
/// written.
async fn record(
    exec: &RunExecution,
    ended: &Ended,
    status: RunStatus,
    outcome: &ThreadOutcome,
    events: Vec<RunEventRecord>,
) -> DbResult<bool> {
    let (db, worker) = (&exec.state.db, &exec.state.worker_id);
    let (run_id, thread_id) = (exec.run_id(), exec.run.thread_id.as_str());
    let early =
        ended.recorded_early.load(Ordering::SeqCst) && status == RunStatus::Success && !ended.rollback();
    let dropped = exec.kwargs.temporary && !lingers(exec);
    if !(early || ended.rollback() || dropped) {
        return db
            .finish_run_with_outcome(run_id, worker, status, thread_id, outcome, events)
            .await;
    }
    // No outcome to record with them: the events go first, on their own.
    if !events.is_empty() {
        if let Err(e) = db.append_run_events(run_id, events).await {
            tracing::warn!(run_id, error = %e, "storing a run's events failed");
        }
    }
    if early {
        Ok(true)
    } else if ended.rollback() {
        let _ = db.delete_run(&exec.kwargs.owner, thread_id, run_id).await;
        db.set_thread_outcome(thread_id, outcome).await.map(|()| true)
    } else {
        db.finish_run(run_id, worker, status).await
    }
}

/// Whether a temporary thread outlives its run for a while: when nobody in this process
/// waits for or reads the run, a client of another process (a replica serving the API) may,
/// and reads its outcome from the thread. The TTL sweeper deletes it a minute later.
fn lingers(exec: &RunExecution) -> bool {
    exec.kwargs.temporary && !exec.state.broker.is_held(exec.run_id())
}

/// After the record: drop a temporary thread (or let it expire, see [`lingers`]), count the
/// run, give its readers the end.
async fn close(exec: &RunExecution, ended: &Ended, status: RunStatus) {
    let state = &exec.state;
    if lingers(exec) {
        let ttl = json!({"strategy": "delete", "ttl": 1});
        let _ = state
            .db
            .patch_thread(&exec.kwargs.owner, &exec.run.thread_id, None, Some(ttl))
            .await;
    } else if exec.kwargs.temporary {
        let _ = state.checkpointer.delete_thread(&exec.run.thread_id).await;
        let _ = state.db.delete_thread_any(&exec.run.thread_id).await;
    }
    state
        .metrics
        .runs_finished
        .get_or_create(&StatusLabel {
            status: status.as_str().into(),
        })
        .inc();
    state
        .metrics
        .run_seconds
        .observe(ended.started.elapsed().as_secs_f64());
    let body = wire::wait_body(&ended.result);
    if exec.kwargs.stream_resumable {
        // Its events were stored before its end was recorded (see `finish`): replays
        // after this read them from the database.
        state.broker.finish_stored(exec.run_id(), status, body);
    } else {
        state.broker.finish_unreplayable(exec.run_id(), status, body);
    }
}

/// End a run that cannot start here (its request does not read, or its graph is not
/// registered): an `error` event, status `error`.
pub(super) async fn refuse(state: &Arc<AppState>, run_id: &str, sink: &mut EventSink, err: Value) {
    sink.push("error".into(), err.clone());
    sink.flush().await;
    let _ = state
        .db
        .finish_run(run_id, &state.worker_id, RunStatus::Error)
        .await;
    state
        .broker
        .finish(run_id, RunStatus::Error, json!({"__error__": err}));
}

/// End a run whose execution panicked here: the run and its thread are marked failed (a
/// stateless run's temporary thread is deleted, as when it ends), and its readers get an
/// `error` event and the end (instead of waiting for ever).
pub(super) async fn abandon(
    state: &Arc<AppState>,
    run_id: &str,
    thread_id: &str,
    temporary: bool,
    panic: &str,
) {
    tracing::error!(run_id, panic, "executing a run panicked");
    state.local_runs().remove(run_id);
    let err = json!({"error": "InternalError", "message": "the run failed on the server"});
    let outcome = ThreadOutcome {
        status: ThreadStatus::Error,
        values: None,
        interrupts: Value::Object(Map::new()),
        error: Some(json!("the run failed on the server")),
    };
    if let Err(e) = state
        .db
        .finish_run_with_outcome(
            run_id,
            &state.worker_id,
            RunStatus::Error,
            thread_id,
            &outcome,
            Vec::new(),
        )
        .await
    {
        tracing::warn!(run_id, error = %e, "recording a panicked run's end failed");
    }
    if temporary {
        let _ = state.checkpointer.delete_thread(thread_id).await;
        let _ = state.db.delete_thread_any(thread_id).await;
    }
    state.broker.push(run_id, "error".into(), err.clone());
    state
        .broker
        .finish(run_id, RunStatus::Error, json!({"__error__": err}));
}

/// The completion hook of a run whose events are not stored: records `success` and the
/// final values with the run's last checkpoint ([`write_at_checkpoint`]) and notes in
/// `recorded` whether it did; when it did not, the worker records the outcome as usual.
pub(super) fn completion_hook(state: &Arc<AppState>, run: &Run, recorded: Arc<AtomicBool>) -> CompletionHook {
    let state = Arc::clone(state);
    let (run_id, thread_id) = (run.run_id.clone(), run.thread_id.clone());
    CompletionHook::new(move |c: Completion| {
        let (state, run_id, thread_id, recorded) = (
            Arc::clone(&state),
            run_id.clone(),
            thread_id.clone(),
            Arc::clone(&recorded),
        );
        async move {
            let (Some(checkpoint), Ok(values)) = (c.checkpoint_id, c.values.to_json()) else {
                return;
            };
            let done = write_at_checkpoint(&state, &run_id, &thread_id, &checkpoint, values, &[]).await;
            recorded.store(done, Ordering::SeqCst);
        }
    })
}

/// A resumable run that completed, as its completion hook tells the loop reading its
/// events: its last checkpoint and final values, and whom to tell once they are recorded.
pub(super) struct Completed {
    pub checkpoint_id: String,
    pub values: Value,
    pub reply: oneshot::Sender<()>,
}

/// The completion hook of a resumable run: its last events are still on their way to the
/// sink, so it hands the run's last checkpoint and values to the loop reading them
/// ([`record_at_checkpoint`]) and returns once that loop has recorded them. The hook runs
/// while the checkpoint's put is queued; on a busy writer the record joins its commit.
pub(super) fn handoff_hook(tx: mpsc::UnboundedSender<Completed>) -> CompletionHook {
    CompletionHook::new(move |c: Completion| {
        let tx = tx.clone();
        async move {
            let (Some(checkpoint_id), Ok(values)) = (c.checkpoint_id, c.values.to_json()) else {
                return;
            };
            let (reply, recorded) = oneshot::channel();
            let done = Completed {
                checkpoint_id,
                values,
                reply,
            };
            if tx.send(done).is_ok() {
                let _ = recorded.await;
            }
        }
    })
}

/// Record a resumable run's completion handed over by [`handoff_hook`], with the events
/// not stored yet (every event the run emitted before completing is in the sink by now),
/// noting in `recorded` whether it did. When it did not, the events go back to the sink,
/// to be stored with the outcome the worker records.
pub(super) async fn record_at_checkpoint(exec: &mut RunExecution, done: Completed, recorded: &AtomicBool) {
    let events = exec.sink.unstored().await;
    let (state, run) = (&exec.state, &exec.run);
    let (checkpoint, values) = (&done.checkpoint_id, done.values);
    let written = write_at_checkpoint(state, &run.run_id, &run.thread_id, checkpoint, values, &events).await;
    recorded.store(written, Ordering::SeqCst);
    if !written {
        exec.sink.restore(events);
    }
    let _ = done.reply.send(());
}

/// Record `success`, the final `values` and `events` (a resumable run's not stored yet)
/// with the run's last checkpoint (see [`crate::db::Db::finish_run_at_checkpoint`]);
/// whether it did. When it did not, the worker records the outcome as usual, with
/// `events`.
async fn write_at_checkpoint(
    state: &AppState,
    run_id: &str,
    thread_id: &str,
    checkpoint: &str,
    values: Value,
    events: &[RunEventRecord],
) -> bool {
    let outcome = ThreadOutcome {
        status: ThreadStatus::Idle,
        values: Some(values),
        interrupts: Value::Object(Map::new()),
        error: None,
    };
    match state
        .db
        .finish_run_at_checkpoint(run_id, &state.worker_id, thread_id, &outcome, checkpoint, events)
        .await
    {
        Ok(true) => return true,
        Ok(false) => {}
        Err(e) => {
            tracing::warn!(run_id, error = %e, "recording the run's outcome with its checkpoint failed")
        }
    }
    false
}
