//! The worker pool: claims runs from the durable queue, executes them, heartbeats their
//! lease, records their outcome.

use crate::app::{AppState, LocalRun};
use crate::broker::RunEventRecord;
use crate::db::{Lease, ThreadOutcome};
use crate::hosted::{HostedGraph, JsonCommand, JsonRunEvent, JsonRunRequest};
use crate::metrics::{NodeLabel, StatusLabel, TokenLabel};
use crate::models::{CancelAction, ClaimedRun, RunStatus, ThreadStatus};
use crate::owner_store::OwnerStore;
use crate::wire;
use futures::StreamExt;
use graphloom_core::{
    CancelToken, Completion, CompletionHook, Durability, NodeSet, StreamMode, TaskObserver,
};
use serde_json::{json, Map, Value};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// How often an idle worker looks at the queue (runs created by another replica are seen
/// this way; local ones wake a worker at once).
const POLL: Duration = Duration::from_millis(250);

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
    handles.push(tokio::spawn(sweeper(state)));
    handles
}

/// A free execution slot, if the worker pool runs here and is not shutting down: a run
/// created now can be claimed at once and executed with [`spawn_claimed`].
pub(crate) fn free_slot(state: &AppState) -> Option<OwnedSemaphorePermit> {
    if *state.shutdown.borrow() {
        return None;
    }
    Arc::clone(state.slots.get()?).try_acquire_owned().ok()
}

/// Execute a run claimed at its creation, holding `slot` until it ends.
pub(crate) fn spawn_claimed(state: &Arc<AppState>, claimed: ClaimedRun, slot: OwnedSemaphorePermit) {
    let state = Arc::clone(state);
    tokio::spawn(async move {
        run_claimed(&state, claimed).await;
        drop(slot);
    });
}

/// Execute a claimed run inside its trace span.
async fn run_claimed(state: &Arc<AppState>, claimed: ClaimedRun) {
    // The root of a run's trace: node, model and tool spans nest under it.
    let span = tracing::info_span!(
        "run",
        run_id = %claimed.run.run_id,
        thread_id = %claimed.run.thread_id,
        assistant_id = %claimed.run.assistant_id,
        graph_id = str_of(&claimed.run.kwargs, "graph_id").unwrap_or_default(),
        attempt = claimed.attempt,
        otel.status_code = tracing::field::Empty,
        otel.status_description = tracing::field::Empty,
    );
    let (run_id, thread_id) = (claimed.run.run_id.clone(), claimed.run.thread_id.clone());
    let temporary = claimed
        .run
        .kwargs
        .get("temporary")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let run = tracing::Instrument::instrument(execute(state, claimed), span);
    if let Err(panic) = futures::FutureExt::catch_unwind(std::panic::AssertUnwindSafe(run)).await {
        let message = crate::error::panic_message(panic.as_ref()).to_owned();
        abandon(state, &run_id, &thread_id, temporary, &message).await;
    }
}

/// End a run whose execution panicked here: the run and its thread are marked failed (a
/// stateless run's temporary thread is deleted, as when it ends), and its readers get an
/// `error` event and the end (instead of waiting for ever).
async fn abandon(state: &Arc<AppState>, run_id: &str, thread_id: &str, temporary: bool, panic: &str) {
    tracing::error!(run_id, panic, "executing a run panicked");
    state
        .local
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .remove(run_id);
    let err = json!({"error": "InternalError", "message": "the run failed on the server"});
    let outcome = ThreadOutcome {
        status: ThreadStatus::Error,
        values: None,
        interrupts: Value::Object(Map::new()),
        error: Some(json!("the run failed on the server")),
    };
    if let Err(e) = state
        .db
        .finish_run_with_outcome(run_id, &state.worker_id, RunStatus::Error, thread_id, &outcome)
        .await
    {
        tracing::warn!(run_id, error = %e, "recording a panicked run's end failed");
    }
    if temporary {
        let _ = state.checkpointer.delete_thread(thread_id).await;
        let _ = state.db.delete_thread_any(thread_id).await;
    }
    state.broker.push(run_id, "error".into(), err.clone());
    state.broker.finish(run_id, json!({"__error__": err}));
}

async fn worker_loop(state: Arc<AppState>, slots: Arc<Semaphore>) {
    let mut shutdown = state.shutdown.subscribe();
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
        match state.db.claim_run(&state.worker_id, state.config.lease).await {
            Ok(Some(claimed)) => {
                run_claimed(&state, claimed).await;
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
                tracing::warn!(error = %e, "claiming a run failed");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}

/// Deletes threads whose TTL has passed.
async fn sweeper(state: Arc<AppState>) {
    let mut shutdown = state.shutdown.subscribe();
    loop {
        tokio::select! {
            () = tokio::time::sleep(Duration::from_secs(30)) => {}
            _ = shutdown.changed() => return,
        }
        match state.db.expired_threads(100).await {
            Ok(ids) => {
                for id in ids {
                    let _ = state.checkpointer.delete_thread(&id).await;
                    let _ = state.db.delete_thread_any(&id).await;
                }
            }
            Err(e) => tracing::warn!(error = %e, "ttl sweep failed"),
        }
    }
}

fn str_of<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

/// `"*"` or a list of node names.
pub(crate) fn node_set(v: Option<&Value>) -> NodeSet {
    match v {
        Some(Value::String(s)) if s == "*" => NodeSet::All,
        Some(Value::Array(a)) if !a.is_empty() => {
            NodeSet::Some(a.iter().filter_map(Value::as_str).map(str::to_owned).collect())
        }
        _ => NodeSet::None,
    }
}

pub(crate) fn parse_command(v: &Value) -> Option<JsonCommand> {
    let obj = v.as_object()?;
    let goto = match obj.get("goto") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) => a.clone(),
        Some(other) => vec![other.clone()],
    };
    Some(JsonCommand {
        update: obj.get("update").filter(|u| !u.is_null()).cloned(),
        resume: obj.get("resume").filter(|u| !u.is_null()).cloned(),
        goto,
    })
}

/// The graph request of a run from its stored kwargs. A run taken over after a crash
/// (attempt > 1) that already checkpointed continues from its checkpoint instead of
/// applying its input again.
async fn request(
    state: &AppState,
    graph: &Arc<dyn HostedGraph>,
    claimed: &ClaimedRun,
    modes: Vec<StreamMode>,
) -> JsonRunRequest {
    let run = &claimed.run;
    let kw = &run.kwargs;
    let config = kw.get("config").cloned().unwrap_or(Value::Null);
    let mut started = false;
    if claimed.attempt > 1 {
        let mut filter = Map::new();
        filter.insert("run_id".into(), Value::String(run.run_id.clone()));
        started = graph
            .history(&run.thread_id, filter, None, Some(1))
            .await
            .is_ok_and(|h| !h.is_empty());
    }
    let mut metadata: Map<String, Value> = kw
        .get("metadata")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    for key in ["graph_id", "assistant_id"] {
        if let Some(v) = kw.get(key) {
            metadata.insert(key.into(), v.clone());
        }
    }
    let context = match kw.get("context") {
        Some(Value::Object(m)) if !m.is_empty() => Some(Value::Object(m.clone())),
        _ => config.get("configurable").filter(|c| c.is_object()).cloned(),
    };
    JsonRunRequest {
        input: if started {
            None
        } else {
            kw.get("input").filter(|v| !v.is_null()).cloned()
        },
        command: if started {
            None
        } else {
            kw.get("command").and_then(parse_command)
        },
        thread_id: Some(run.thread_id.clone()),
        checkpoint_id: if started {
            None
        } else {
            str_of(kw, "checkpoint_id").map(str::to_owned)
        },
        recursion_limit: config
            .get("recursion_limit")
            .and_then(Value::as_u64)
            .and_then(|n| usize::try_from(n).ok()),
        interrupt_before: node_set(kw.get("interrupt_before")),
        interrupt_after: node_set(kw.get("interrupt_after")),
        durability: match str_of(kw, "durability") {
            Some("async") => Durability::Async,
            Some("exit") => Durability::Exit,
            _ => Durability::Sync,
        },
        timeout: state.config.run_timeout,
        context,
        metadata,
        run_id: Some(run.run_id.clone()),
        modes,
        subgraphs: kw
            .get("stream_subgraphs")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        cancel: None,
        on_task_end: None,
        on_complete: None,
        // With auth on, what the graph keeps in its store is its owner's.
        store: match str_of(kw, "owner") {
            Some(owner) if !owner.is_empty() => graph.store().map(|s| OwnerStore::for_owner(&s, owner)),
            _ => None,
        },
    }
}

/// Tokens and cost of AI messages in an update. The cost is the message's own
/// `response_metadata.cost_usd` if it has one, else its tokens at the price of its
/// `response_metadata.model_name` in [`crate::ServerConfig::prices`] (unknown models: none).
fn count_usage(state: &AppState, data: &Value) {
    let Some(obj) = data.as_object() else { return };
    for update in obj.values() {
        let Some(msgs) = update.get("messages").and_then(Value::as_array) else {
            continue;
        };
        for m in msgs {
            let Some(u) = m.get("usage_metadata") else {
                continue;
            };
            let count = |key: &str| u.get(key).and_then(Value::as_u64);
            let (input, output) = (count("input_tokens"), count("output_tokens"));
            for (n, kind) in [(input, "input"), (output, "output")] {
                if let Some(n) = n {
                    state
                        .metrics
                        .tokens
                        .get_or_create(&TokenLabel { kind: kind.into() })
                        .inc_by(n);
                }
            }
            let cost = m
                .pointer("/response_metadata/cost_usd")
                .and_then(Value::as_f64)
                .or_else(|| {
                    let model = m.pointer("/response_metadata/model_name")?.as_str()?;
                    let usage = graphloom_llm::Usage::new(input.unwrap_or(0), output.unwrap_or(0));
                    state.config.prices.cost(model, &usage)
                });
            if let Some(c) = cost.filter(|c| c.is_finite() && *c > 0.0) {
                state.metrics.cost.inc_by(c);
            }
        }
    }
}

/// Where a run's events go: this process's broker, and for a `stream_resumable` run also the
/// database, so a client of another replica (or of this server after a restart) can replay
/// them. Database writes are batched by a task of their own, off the run's path.
struct EventSink {
    run_id: String,
    tx: Option<tokio::sync::mpsc::UnboundedSender<RunEventRecord>>,
    writer: Option<tokio::task::JoinHandle<()>>,
}

impl EventSink {
    async fn start(state: &Arc<AppState>, run_id: &str, resumable: bool) -> Self {
        let mut sink = Self {
            run_id: run_id.to_owned(),
            tx: None,
            writer: None,
        };
        if !resumable {
            return sink;
        }
        if state.broker.len(run_id) == 0 {
            // A fresh log here (first attempt, or taken over from another process): the
            // stored one starts again with it.
            if let Err(e) = state.db.delete_run_events(run_id).await {
                tracing::warn!(run_id, error = %e, "clearing a run's stored events failed");
            }
        }
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<RunEventRecord>();
        let (st, id) = (Arc::clone(state), run_id.to_owned());
        sink.writer = Some(tokio::spawn(async move {
            while let Some(first) = rx.recv().await {
                let mut batch = vec![first];
                while batch.len() < 256 {
                    match rx.try_recv() {
                        Ok(e) => batch.push(e),
                        Err(_) => break,
                    }
                }
                if let Err(e) = st.db.append_run_events(&id, batch).await {
                    tracing::warn!(run_id = %id, error = %e, "storing a run's events failed");
                }
            }
        }));
        sink.tx = Some(tx);
        sink
    }

    fn push(&self, state: &AppState, event: String, data: Value) {
        if let Some(tx) = &self.tx {
            let id = state.broker.len(&self.run_id);
            let _ = tx.send(RunEventRecord {
                id,
                event: event.clone(),
                data: data.clone(),
            });
        }
        state.broker.push(&self.run_id, event, data);
    }

    /// Wait until every event is stored.
    async fn flush(&mut self) {
        self.tx = None;
        if let Some(w) = self.writer.take() {
            let _ = w.await;
        }
    }
}

async fn execute(state: &Arc<AppState>, claimed: ClaimedRun) {
    let run = claimed.run.clone();
    let run_id = run.run_id.clone();
    let kw = run.kwargs.clone();
    let graph_id = str_of(&kw, "graph_id").unwrap_or_default().to_owned();
    state.broker.open(&run_id);
    state.broker.reset(&run_id);
    let resumable = kw
        .get("stream_resumable")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let mut sink = EventSink::start(state, &run_id, resumable).await;
    let Some(graph) = state.graphs.get(&graph_id).cloned() else {
        let err =
            json!({"error": "GraphNotFound", "message": format!("graph `{graph_id}` is not registered")});
        sink.push(state, "error".into(), err.clone());
        sink.flush().await;
        let _ = state
            .db
            .finish_run(&run_id, &state.worker_id, RunStatus::Error)
            .await;
        state.broker.finish(&run_id, json!({"__error__": err}));
        return;
    };
    let wire_modes = kw
        .get("stream_mode")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .unwrap_or_else(|| vec!["values".to_owned()]);
    let wire_modes = wire::parse_stream_modes(&wire_modes)
        .or_else(|_| wire::parse_stream_modes(&["values".to_owned()]))
        .ok();
    let Some(wire_modes) = wire_modes else { return };
    let requested = wire_modes.core_modes();
    // Updates carry the models' token usage; nodes are timed by the task observer below
    // (not by `tasks` events, which would serialise each task's whole input).
    let mut modes = requested.clone();
    if !modes.contains(&StreamMode::Updates) {
        modes.push(StreamMode::Updates);
    }
    let mut encoder = wire::WireEncoder::new(
        wire_modes,
        json!({
            "run_id": run_id,
            "thread_id": run.thread_id,
            "graph_id": graph_id,
            "assistant_id": run.assistant_id,
        }),
    );
    let token = CancelToken::new();
    let local = Arc::new(LocalRun {
        thread_id: run.thread_id.clone(),
        token: token.clone(),
        action: Mutex::new(None),
    });
    state
        .local
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(run_id.clone(), Arc::clone(&local));
    sink.push(
        state,
        "metadata".into(),
        json!({"run_id": run_id, "attempt": claimed.attempt}),
    );
    let mut req = request(state, &graph, &claimed, modes).await;
    req.cancel = Some(token.clone());
    req.on_task_end = Some(TaskObserver::new({
        let (state, graph) = (Arc::clone(state), graph_id.clone());
        move |t| {
            state
                .metrics
                .node_seconds
                .get_or_create(&NodeLabel {
                    graph: graph.clone(),
                    node: t.node.to_owned(),
                })
                .observe(t.elapsed.as_secs_f64());
        }
    }));

    // Heartbeats: keep the lease, learn about cancels and about losing the run.
    let lost = Arc::new(AtomicBool::new(false));
    let hb = {
        let state = Arc::clone(state);
        let lost = Arc::clone(&lost);
        let local = Arc::clone(&local);
        let run_id = run_id.clone();
        tokio::spawn(async move {
            let every = state.config.heartbeat_interval();
            loop {
                tokio::time::sleep(every).await;
                match state
                    .db
                    .heartbeat(&run_id, &state.worker_id, state.config.lease)
                    .await
                {
                    Ok(Lease::Held) => {}
                    Ok(Lease::Cancel(a)) => {
                        *local.action.lock().unwrap_or_else(PoisonError::into_inner) = Some(a);
                        local.token.cancel();
                    }
                    Ok(Lease::Lost) => {
                        lost.store(true, Ordering::SeqCst);
                        local.token.cancel();
                        return;
                    }
                    Err(e) => tracing::warn!(run_id = %run_id, error = %e, "heartbeat failed"),
                }
            }
        })
    };
    // Graceful shutdown: give the run `shutdown_grace`, then stop it (keeping what finished).
    let stopper = {
        let state = Arc::clone(state);
        let token = token.clone();
        tokio::spawn(async move {
            let mut rx = state.shutdown.subscribe();
            if rx.wait_for(|v| *v).await.is_ok() {
                tokio::time::sleep(state.config.shutdown_grace).await;
                token.cancel();
            }
        })
    };

    let temporary = kw.get("temporary").and_then(Value::as_bool).unwrap_or(false);
    // A run that completes records its outcome alongside its last checkpoint (one commit
    // on SQLite instead of two in turn). Not for resumable runs, whose stored events go
    // first, nor temporary ones, whose thread is deleted after.
    let early = Arc::new(AtomicBool::new(false));
    if !resumable && !temporary {
        req.on_complete = Some(completion_hook(state, &run, Arc::clone(&early)));
    }

    let started = Instant::now();
    let mut result = None;
    let mut stream = graph.stream(req);
    while let Some(ev) = stream.next().await {
        if let JsonRunEvent::Part { mode, ns, data } = &ev {
            if *mode == StreamMode::Updates && ns.is_empty() {
                count_usage(state, data);
            }
            if !requested.contains(mode) {
                continue;
            }
        }
        if let JsonRunEvent::End(_) = &ev {
            if lost.load(Ordering::SeqCst) {
                break;
            }
        }
        for (name, data) in encoder.encode(&ev) {
            sink.push(state, name, data);
        }
        if let JsonRunEvent::End(r) = ev {
            result = Some(r);
        }
    }
    hb.abort();
    stopper.abort();
    state
        .local
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .remove(&run_id);
    if lost.load(Ordering::SeqCst) {
        tracing::warn!(run_id = %run_id, "lease lost; another worker owns the run now");
        // Streams and waits on this process follow the run through the database now.
        state.broker.forget(&run_id);
        return;
    }
    let action = *local.action.lock().unwrap_or_else(PoisonError::into_inner);
    let result = result.unwrap_or(Err(graphloom_core::Error::Cancelled));
    let cancelled = matches!(result, Err(graphloom_core::Error::Cancelled));
    if cancelled && action.is_none() {
        // Stopped by shutdown: hand the run back to the queue; it continues from its
        // checkpoint on another worker or after restart.
        let _ = state
            .db
            .finish_run(&run_id, &state.worker_id, RunStatus::Pending)
            .await;
        let _ = state
            .db
            .set_thread_status(&run.thread_id, ThreadStatus::Busy)
            .await;
        return;
    }
    // Every event stored before the run's end is: a joiner elsewhere that sees the run
    // ended has then read all of them.
    sink.flush().await;
    let (status, thread_status) = match &result {
        Ok(out) if out.interrupted => (RunStatus::Interrupted, ThreadStatus::Interrupted),
        Ok(_) => (RunStatus::Success, ThreadStatus::Idle),
        Err(graphloom_core::Error::Cancelled) => (RunStatus::Interrupted, ThreadStatus::Idle),
        Err(graphloom_core::Error::RunTimeout { .. }) => (RunStatus::Timeout, ThreadStatus::Error),
        Err(_) => (RunStatus::Error, ThreadStatus::Error),
    };
    if let Err(e) = &result {
        if !cancelled {
            let span = tracing::Span::current();
            span.record("otel.status_code", "ERROR");
            span.record("otel.status_description", tracing::field::display(e));
        }
    }
    let body = wire::wait_body(&result);
    let rollback = cancelled && action == Some(CancelAction::Rollback);
    if rollback {
        // Rolled back: what the run checkpointed goes, the thread is where the run found it.
        if let Err(e) = state.checkpointer.delete_run(&run.thread_id, &run_id).await {
            tracing::warn!(run_id = %run_id, error = %e, "deleting the rolled-back run's checkpoints failed");
        }
    }
    // The thread's copy of the state, and pending interrupts by task id. A run that ended
    // well hands back its values; otherwise the latest checkpoint says where it stopped.
    let (values, interrupts) = match &result {
        Ok(out) if !out.interrupted => (Some(out.values.clone()), Map::new()),
        _ if temporary => (None, Map::new()),
        _ => {
            let snapshot = graph.get_state(&run.thread_id, None).await.ok().flatten();
            let mut interrupts = Map::new();
            let tasks = snapshot
                .as_ref()
                .and_then(|s| s.get("tasks"))
                .and_then(Value::as_array);
            for t in tasks.into_iter().flatten() {
                if let (Some(id), Some(list)) =
                    (str_of(t, "id"), t.get("interrupts").and_then(Value::as_array))
                {
                    if !list.is_empty() {
                        interrupts.insert(id.to_owned(), Value::Array(list.clone()));
                    }
                }
            }
            (
                snapshot.and_then(|mut s| s.get_mut("values").map(Value::take)),
                interrupts,
            )
        }
    };
    let thread_status = if rollback && !interrupts.is_empty() {
        // Back at an interrupt the run had resumed from.
        ThreadStatus::Interrupted
    } else {
        thread_status
    };
    let outcome = ThreadOutcome {
        status: thread_status,
        values,
        interrupts: Value::Object(interrupts),
        error: match &result {
            Err(e) if !cancelled => Some(json!(e.to_string())),
            _ => None,
        },
    };
    let recorded = if early.load(Ordering::SeqCst) && status == RunStatus::Success && !rollback {
        Ok(true)
    } else if rollback {
        let owner = str_of(&kw, "owner").unwrap_or_default();
        let _ = state.db.delete_run(owner, &run.thread_id, &run_id).await;
        state
            .db
            .set_thread_outcome(&run.thread_id, &outcome)
            .await
            .map(|()| true)
    } else if temporary {
        state.db.finish_run(&run_id, &state.worker_id, status).await
    } else {
        state
            .db
            .finish_run_with_outcome(&run_id, &state.worker_id, status, &run.thread_id, &outcome)
            .await
    };
    match recorded {
        Ok(true) => {}
        Ok(false) => {
            tracing::warn!(run_id = %run_id, "run was taken over before it finished; outcome dropped");
            return;
        }
        Err(e) => tracing::warn!(run_id = %run_id, error = %e, "recording the run's outcome failed"),
    }
    if temporary {
        let _ = state.checkpointer.delete_thread(&run.thread_id).await;
        let _ = state.db.delete_thread_any(&run.thread_id).await;
    }
    state
        .metrics
        .runs_finished
        .get_or_create(&StatusLabel {
            status: status.as_str().into(),
        })
        .inc();
    state.metrics.run_seconds.observe(started.elapsed().as_secs_f64());
    if resumable {
        state.broker.finish(&run_id, body);
    } else {
        state.broker.finish_unreplayable(&run_id, body);
    }
}

/// The completion hook of a run: records `success` and the final values with the run's
/// last checkpoint (see [`Db::finish_run_at_checkpoint`]) and notes in `recorded` whether
/// it did; when it did not, the worker records the outcome as usual.
fn completion_hook(
    state: &Arc<AppState>,
    run: &crate::models::Run,
    recorded: Arc<AtomicBool>,
) -> CompletionHook {
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
            let outcome = ThreadOutcome {
                status: ThreadStatus::Idle,
                values: Some(values),
                interrupts: Value::Object(Map::new()),
                error: None,
            };
            let done = state
                .db
                .finish_run_at_checkpoint(&run_id, &state.worker_id, &thread_id, &outcome, &checkpoint)
                .await;
            if let Err(e) = &done {
                tracing::warn!(run_id = %run_id, error = %e, "recording the run's outcome with its checkpoint failed");
            }
            recorded.store(done.unwrap_or(false), Ordering::SeqCst);
        }
    })
}
