//! One run executing on this worker, in named steps: [`claim`] (take up the claimed run:
//! its log, its event sink, its graph, its cancel token), the watchers ([`Watch`]:
//! heartbeat, shutdown), [`start`] (its graph request), [`stream`] (the graph's events
//! through the wire encoder into the sink), again from the last checkpoint after a
//! transient database fault ([`run_through_faults`]), then [`finish::finish`]. Each step gets the run's
//! [`RunExecution`] and what the steps before it produced.

use super::execution::RunExecution;
use super::faults::{transient, Backoff};
use super::finish::{self, Completed, Ended};
use super::sink::EventSink;
use super::usage::count_usage;
use super::watch::Watch;
use crate::host::{JsonRunEvent, JsonRunOutput, JsonRunRequest};
use crate::metrics::NodeLabel;
use crate::models::ClaimedRun;
use crate::owner_store::OwnerStore;
use crate::run::{KwargsError, RunKwargs};
use crate::state::{AppState, LocalRun};
use crate::wire::WireEncoder;
use futures::{FutureExt, StreamExt};
use graphloom_core::{CancelToken, RunControl, StreamMode, TaskObserver};
use serde_json::{json, Map, Value};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio::sync::mpsc;

/// Execute a claimed run inside its trace span. A panic in it ends the run as failed
/// instead of leaving it running here for ever.
pub(super) async fn run_claimed(
    state: &Arc<AppState>,
    claimed: ClaimedRun,
    kwargs: Result<RunKwargs, KwargsError>,
) {
    let graph_id = kwargs.as_ref().map_or("", |k| k.graph_id.as_str()).to_owned();
    // The root of a run's trace: node, model and tool spans nest under it.
    let span = tracing::info_span!(
        "run",
        run_id = %claimed.run.run_id,
        thread_id = %claimed.run.thread_id,
        assistant_id = %claimed.run.assistant_id,
        graph_id = graph_id,
        attempt = claimed.attempt,
        otel.status_code = tracing::field::Empty,
        otel.status_description = tracing::field::Empty,
    );
    let (run_id, thread_id) = (claimed.run.run_id.clone(), claimed.run.thread_id.clone());
    let temporary = kwargs.as_ref().is_ok_and(|k| k.temporary);
    let run = tracing::Instrument::instrument(execute(state, claimed, kwargs), span);
    if let Err(panic) = futures::FutureExt::catch_unwind(std::panic::AssertUnwindSafe(run)).await {
        let message = crate::error::panic_message(panic.as_ref()).to_owned();
        finish::abandon(state, &run_id, &thread_id, temporary, &message).await;
    }
}

/// The steps of one run.
async fn execute(state: &Arc<AppState>, claimed: ClaimedRun, kwargs: Result<RunKwargs, KwargsError>) {
    let Some(mut exec) = claim(state, claimed, kwargs).await else {
        return;
    };
    let early = Arc::new(AtomicBool::new(false));
    let watch = Watch::start(&exec.state, &exec.run.run_id, &exec.local);
    let started = Instant::now();
    let result = run_through_faults(&mut exec, &early, &watch).await;
    let ended = Ended {
        result: result.unwrap_or(Err(graphloom_core::Error::Cancelled)),
        action: exec.local.action(),
        recorded_early: early,
        started,
    };
    // The graph's end hook, while the heartbeat still keeps the lease: before the outcome
    // is recorded, so a crash in between calls it again when the run is taken over.
    if !watch.lost() {
        finish::call_end_hook(&exec, &ended).await;
    }
    watch.stop();
    exec.state.local_runs().remove(&exec.run.run_id);
    if watch.lost() {
        tracing::warn!(run_id = %exec.run.run_id, "lease lost; another worker owns the run now");
        // Streams and waits on this process follow the run through the database now.
        exec.state.broker.abandon(&exec.run.run_id);
        return;
    }
    finish::finish(exec, ended).await;
}

/// Run the graph to its end; a transient database fault takes it up again from its last
/// checkpoint after a pause (see [`faults`](super::faults)), until the tries are spent, the
/// run is cancelled, the server shuts down or the lease is lost.
async fn run_through_faults(
    exec: &mut RunExecution,
    early: &Arc<AtomicBool>,
    watch: &Watch,
) -> Option<Result<JsonRunOutput, graphloom_core::Error>> {
    let mut backoff = Backoff::default();
    loop {
        let result = match started_before(exec, backoff.retrying()).await {
            Ok(started) => {
                let (req, completed) = start(exec, early, started);
                stream(exec, req, completed, early, watch).await
            }
            Err(e) => Some(Err(e)),
        };
        let fault = match &result {
            Some(Err(e)) if transient(e) => e.to_string(),
            _ => return result,
        };
        let stopped = exec.local.token.is_cancelled() || watch.lost() || exec.state.shutting_down();
        let pause = if stopped { None } else { backoff.next_pause() };
        let Some(pause) = pause else {
            if !stopped {
                tracing::warn!(run_id = %exec.run.run_id, faults = backoff.faults(), error = %fault,
                    "the run kept meeting database faults; it ends with the last one");
            }
            return result;
        };
        // One line for the first fault of a run and then every fifth, not one per try.
        if backoff.faults() % 5 == 1 {
            tracing::warn!(run_id = %exec.run.run_id, faults = backoff.faults(), pause_ms = pause.as_millis() as u64,
                error = %fault, "the run met a database fault; it continues from its last checkpoint");
        }
        exec.state.metrics.run_retries.inc();
        tokio::select! {
            () = tokio::time::sleep(pause) => {}
            () = exec.local.token.cancelled() => return Some(Err(graphloom_core::Error::Cancelled)),
        }
    }
}

/// Take up a claimed run: open its event log and sink, find its graph, register it as
/// executing here, and announce it (`metadata`). A run whose request does not read or
/// whose graph is not registered here ends at once with an error.
async fn claim(
    state: &Arc<AppState>,
    claimed: ClaimedRun,
    kwargs: Result<RunKwargs, KwargsError>,
) -> Option<RunExecution> {
    let run_id = claimed.run.run_id.clone();
    let resumable = kwargs.as_ref().is_ok_and(|k| k.stream_resumable);
    state.broker.open(&run_id);
    state.broker.reset(&run_id, resumable);
    let mut sink = EventSink::start(state, &run_id, resumable, claimed.attempt).await;
    let refused = match kwargs {
        Err(e) => Err(
            json!({"error": "ValueError", "message": format!("the run's stored request does not read: {e}")}),
        ),
        Ok(kwargs) => match state.graphs.get(&kwargs.graph_id).cloned() {
            Some(graph) => Ok((kwargs, graph)),
            None => Err(json!({
                "error": "GraphNotFound",
                "message": format!("graph `{}` is not registered", kwargs.graph_id),
            })),
        },
    };
    let (kwargs, graph) = match refused {
        Ok(found) => found,
        Err(err) => {
            finish::refuse(state, &run_id, &mut sink, err).await;
            return None;
        }
    };
    let local = Arc::new(LocalRun {
        thread_id: claimed.run.thread_id.clone(),
        token: CancelToken::new(),
        action: Mutex::new(None),
        control: RunControl::new(),
    });
    state.local_runs().insert(run_id.clone(), Arc::clone(&local));
    sink.push(
        "metadata".into(),
        json!({"run_id": run_id, "attempt": claimed.attempt}),
    );
    Some(RunExecution {
        state: Arc::clone(state),
        run: claimed.run,
        attempt: claimed.attempt,
        kwargs,
        graph,
        local,
        sink,
    })
}

/// The graph request of the run: its kwargs' request, the stream modes the run produces,
/// its timeout, its cancel token, its drain control (when its graph drains), the node
/// timer, the completion hook that records a completed run with its last checkpoint
/// (`early`; a resumable run's through [`stream`], which gets the receiver returned), and,
/// with auth on, its owner's store.
fn start(
    exec: &RunExecution,
    early: &Arc<AtomicBool>,
    started: bool,
) -> (JsonRunRequest, Option<mpsc::UnboundedReceiver<Completed>>) {
    let (state, run, kw) = (&exec.state, &exec.run, &exec.kwargs);
    let mut req = kw.graph_request(&run.run_id, &run.thread_id, started);
    req.modes = produced_modes(exec);
    req.timeout = exec.run_limit();
    req.cancel = Some(exec.local.token.clone());
    if exec.graph.drains() {
        req.control = Some(exec.local.control.clone());
    }
    req.on_task_end = Some(node_timer(state, &kw.graph_id));
    // With auth on, what the graph keeps in its store is its owner's.
    if !kw.owner.is_empty() {
        req.store = exec.graph.store().map(|s| OwnerStore::for_owner(&s, &kw.owner));
    }
    // A run that completes records its outcome (and a resumable run its last events)
    // alongside its last checkpoint: one commit on SQLite instead of two in turn. Not a
    // temporary run, whose thread is deleted after, nor a run of a graph with an end hook:
    // its outcome is recorded after the hook, so a crash in between calls the hook again
    // when the run is taken over (at least once, whatever the outcome).
    if kw.temporary || exec.graph.run_end_hook().is_some() {
        return (req, None);
    }
    if !kw.stream_resumable {
        req.on_complete = Some(finish::completion_hook(state, run, Arc::clone(early)));
        return (req, None);
    }
    let (tx, rx) = mpsc::unbounded_channel();
    req.on_complete = Some(finish::handoff_hook(tx));
    (req, Some(rx))
}

/// Whether a run taken up again (after a crash, attempt > 1, or after a database fault,
/// `retrying`) already checkpointed: it then continues from its checkpoint instead of
/// applying its input again. A history that cannot be read is an error, not a no: guessing
/// would apply the input twice.
async fn started_before(exec: &RunExecution, retrying: bool) -> Result<bool, graphloom_core::Error> {
    if exec.attempt <= 1 && !retrying {
        return Ok(false);
    }
    let mut filter = Map::new();
    filter.insert("run_id".into(), Value::String(exec.run.run_id.clone()));
    let history = exec
        .graph
        .history(&exec.run.thread_id, filter, None, Some(1))
        .await?;
    Ok(!history.is_empty())
}

/// The core modes the run produces: those its wire modes need, and updates, which carry
/// the models' token usage (nodes are timed by the task observer, not by `tasks` events,
/// which would serialise each task's whole input).
fn produced_modes(exec: &RunExecution) -> Vec<StreamMode> {
    let mut modes = exec.kwargs.wire_modes().core_modes();
    if !modes.contains(&StreamMode::Updates) {
        modes.push(StreamMode::Updates);
    }
    modes
}

/// Times each node of graph `graph_id` into the node-duration metric.
fn node_timer(state: &Arc<AppState>, graph_id: &str) -> TaskObserver {
    let (state, graph) = (Arc::clone(state), graph_id.to_owned());
    TaskObserver::new(move |t| {
        state
            .metrics
            .node_seconds
            .get_or_create(&NodeLabel {
                graph: graph.clone(),
                node: t.node.to_owned(),
            })
            .observe(t.elapsed.as_secs_f64());
    })
}

/// Run the graph, turning its events into wire events for the sink, until its end; `None`
/// when it ended without one, or the lease was lost before it. A resumable run's
/// completion, handed over by its hook (`completed`), is recorded here after the events
/// before it (see [`finish::record_at_checkpoint`]), noted in `early`.
async fn stream(
    exec: &mut RunExecution,
    req: JsonRunRequest,
    mut completed: Option<mpsc::UnboundedReceiver<Completed>>,
    early: &AtomicBool,
    watch: &Watch,
) -> Option<Result<JsonRunOutput, graphloom_core::Error>> {
    let wire_modes = exec.kwargs.wire_modes();
    let requested = wire_modes.core_modes();
    let mut encoder = WireEncoder::new(
        wire_modes,
        json!({
            "run_id": exec.run.run_id,
            "thread_id": exec.run.thread_id,
            "graph_id": exec.kwargs.graph_id,
            "assistant_id": exec.run.assistant_id,
        }),
    );
    let mut result = None;
    let mut events = exec.graph.stream(req);
    loop {
        let ev = tokio::select! {
            biased;
            ev = events.next() => ev,
            done = next_completed(&mut completed) => {
                let Some(done) = done else {
                    completed = None;
                    continue;
                };
                // The run emitted its events before it completed: those not read yet are
                // waiting, and go with its outcome.
                while let Some(Some(ev)) = events.next().now_or_never() {
                    if !on_event(exec, &mut encoder, &requested, ev, watch, &mut result) {
                        return None;
                    }
                }
                finish::record_at_checkpoint(exec, done, early).await;
                continue;
            }
        };
        let Some(ev) = ev else {
            return result;
        };
        if !on_event(exec, &mut encoder, &requested, ev, watch, &mut result) {
            return None;
        }
    }
}

/// The next completed run from the completion hook; pending for ever without a hook.
async fn next_completed(rx: &mut Option<mpsc::UnboundedReceiver<Completed>>) -> Option<Completed> {
    match rx {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

/// Push the wire events of one event of the graph's stream into the sink (the end's result
/// into `result`); false when the stream is to stop here (the run ended with the lease
/// lost).
fn on_event(
    exec: &RunExecution,
    encoder: &mut WireEncoder,
    requested: &[StreamMode],
    ev: JsonRunEvent,
    watch: &Watch,
    result: &mut Option<Result<JsonRunOutput, graphloom_core::Error>>,
) -> bool {
    let wire = match ev {
        JsonRunEvent::Part { mode, ns, data } => {
            if mode == StreamMode::Updates && ns.is_empty() {
                count_usage(&exec.state, &data);
            }
            if !requested.contains(&mode) {
                return true;
            }
            // A protocol run keeps the models' chunks, all its `messages` channel reads.
            if mode == StreamMode::Messages
                && exec.kwargs.thread_protocol
                && !crate::protocol::is_model_chunk(&data)
            {
                return true;
            }
            encoder.part(mode, &ns, data)
        }
        JsonRunEvent::End(_) if watch.lost() => return false,
        JsonRunEvent::End(r) => {
            let wire = WireEncoder::end(&r);
            *result = Some(r);
            wire
        }
    };
    for (name, data) in wire {
        exec.sink.push(name, data);
    }
    true
}
