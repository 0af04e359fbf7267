//! Enqueueing a run: its request resolved against its assistant and thread into the run
//! row, written with the multitask strategy applied, and claimed in the same transaction
//! when a worker slot of this process is free (then it starts at once).

use super::public;
use crate::broker::Reader;
use crate::db::{CronTick, Fired, NewRun};
use crate::error::{ErrorKind, ServiceError, ServiceResult};
use crate::models::{
    now_rfc3339, Assistant, CancelAction, ClaimedRun, MultitaskStrategy, Run, RunStatus, Thread,
};
use crate::run::{IfNotExists, OnCompletion, RunConfig, RunKwargs, RunRequest};
use crate::service::{assistants, threads};
use crate::state::AppRef;
use serde::Deserialize as _;
use serde_json::{json, Map, Value};
use std::time::Duration;

/// A run to enqueue: the request (checked at the edge) and where it goes.
pub(crate) struct Submit {
    /// The principal the run acts for.
    pub owner: String,
    /// Its thread; `None`: a stateless run on a new temporary thread.
    pub thread_id: Option<String>,
    pub request: RunRequest,
    /// Not claimable before this long from now (`after_seconds`, bounded at the edge).
    pub delay: Option<Duration>,
    /// What to hold of the run before it can start (a run nobody holds keeps no events,
    /// and its log goes as it ends).
    pub hold: Hold,
    /// The thread as the caller has just read it (it is not read again).
    pub read: ThreadRead,
}

/// What the caller of [`enqueue()`] has just read of the run's thread.
#[derive(Debug, Default)]
pub(crate) enum ThreadRead {
    /// Nothing: the thread is read.
    #[default]
    Unread,
    /// The thread as it was (its values need not have been read: a run's creation looks
    /// at the thread's id and metadata).
    Found(Box<Thread>),
    /// No such thread (of this owner): the run creates it if its request says so.
    Missing,
}

/// What a caller of [`enqueue()`] holds of the run from its creation on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Hold {
    /// Nothing: the caller answers with the run as queued.
    Nothing,
    /// A reader of its events (a stream).
    Events,
    /// A waiter for its outcome (`runs/wait`).
    Outcome,
}

/// A run in the queue.
pub(crate) struct Enqueued {
    /// The run as clients see it.
    pub run: Run,
    /// Whether its events are kept for replay.
    pub resumable: bool,
    /// The reader or waiter asked for with [`Submit::hold`].
    pub reader: Option<Reader>,
}

/// Resolve, check and queue a run (see the module docs).
pub(crate) async fn enqueue(state: &AppRef, s: Submit) -> ServiceResult<Enqueued> {
    enqueue_at(state, s, None)
        .await?
        .map_err(|not| ServiceError::internal(format!("a run was not created: {not:?}")))
}

/// [`enqueue()`] for a cron's tick: the run is created only while `tick` is still due,
/// in the transaction that moves the cron on (`Db::fire_cron`). `Ok(Err(..))` says why no
/// run was created (the tick was taken by another replica, the thread is gone or busy);
/// a stateless run's new thread is then deleted again.
pub(crate) async fn enqueue_tick(
    state: &AppRef,
    s: Submit,
    tick: &CronTick,
) -> ServiceResult<Result<Enqueued, Fired>> {
    enqueue_at(state, s, Some(tick)).await
}

async fn enqueue_at(
    state: &AppRef,
    mut s: Submit,
    tick: Option<&CronTick>,
) -> ServiceResult<Result<Enqueued, Fired>> {
    let assistant = assistants::resolve(state, &s.owner, &s.request.assistant_id).await?;
    if !state.graphs.contains_key(&assistant.graph_id) {
        return Err(ServiceError::not_found(format!("graph {}", assistant.graph_id)));
    }
    check_input(state, &assistant.graph_id, s.request.input.as_ref())?;
    crate::service::url_guard::check_url(&state.config.webhooks, s.request.webhook.as_deref())?;
    let read = std::mem::take(&mut s.read);
    let (thread, new_thread) = thread_of(state, &s, read, &assistant).await?;
    let kwargs = kwargs(&s, &assistant)?;
    let strategy = s.request.multitask_strategy.unwrap_or_default();
    let cancel_active = match strategy {
        MultitaskStrategy::Interrupt => Some(CancelAction::Interrupt),
        MultitaskStrategy::Rollback => Some(CancelAction::Rollback),
        MultitaskStrategy::Reject | MultitaskStrategy::Enqueue => None,
    };
    let now = now_rfc3339();
    let run = Run {
        run_id: uuid::Uuid::now_v7().to_string(),
        thread_id: thread.thread_id.clone(),
        assistant_id: assistant.assistant_id.clone(),
        created_at: now.clone(),
        updated_at: now,
        status: RunStatus::Pending,
        metadata: kwargs.metadata.clone(),
        kwargs: kwargs.to_value(),
        multitask_strategy: strategy,
        cancel_reason: None,
        ordinal: 0,
    };
    let new = NewRun {
        run,
        owner: s.owner.clone(),
        delay: s.delay,
        reject_if_busy: strategy == MultitaskStrategy::Reject,
        cancel_active,
        thread_metadata: graph_metadata(&thread, &kwargs),
        claim: None,
        create_thread: new_thread.then(|| thread.clone()),
    };
    let resumable = kwargs.stream_resumable;
    let created = match create(state, new, kwargs, s.hold, tick).await {
        // The thread the run was to create was made meanwhile: another owner's (not
        // found), or this owner's and busy.
        Err(e) if new_thread && e.kind == ErrorKind::Conflict => {
            threads::load(state, &s.owner, &thread.thread_id).await?;
            return Err(e);
        }
        other => other?,
    };
    let (run, reader) = match created {
        Ok(created) => created,
        Err(not) => {
            if s.thread_id.is_none() {
                let _ = state.db.delete_thread_any(&thread.thread_id).await;
            }
            return Ok(Err(not));
        }
    };
    Ok(Ok(Enqueued {
        run: public(run),
        resumable,
        reader,
    }))
}

/// Check a run's input against its graph: its input schema, then a decode as the run
/// will do (what the schema lets through, the run must be able to decode).
pub(crate) fn check_input(state: &AppRef, graph_id: &str, input: Option<&Value>) -> ServiceResult<()> {
    let Some(input) = input.filter(|v| !v.is_null()) else {
        return Ok(());
    };
    if let Some(validator) = state.validators.get(graph_id) {
        if let Some(err) = validator.iter_errors(input).next() {
            let path = err.instance_path().to_string();
            let at = if path.is_empty() {
                "input".to_owned()
            } else {
                format!("input{path}")
            };
            return Err(ServiceError::invalid(format!("{at}: {err}")));
        }
    }
    if let Some(g) = state.graphs.get(graph_id) {
        g.check_input(input)
            .map_err(|e| ServiceError::invalid(format!("input: {e}")))?;
    }
    Ok(())
}

/// The run's thread: a new temporary one for a stateless run; else the owner's thread,
/// created when missing if the request says `if_not_exists: create`. A thread the run
/// creates starts with the run's metadata (what an `Auth` stamped on it included, so its
/// filter finds the thread again), and the graph and assistant. With it, whether the
/// run's transaction is to create it (nothing is written here: one write instead of two).
async fn thread_of(
    state: &AppRef,
    s: &Submit,
    read: ThreadRead,
    assistant: &Assistant,
) -> ServiceResult<(Thread, bool)> {
    let meta = || {
        let mut m = s.request.metadata.clone().unwrap_or_default();
        m.insert("graph_id".into(), json!(assistant.graph_id));
        m.insert("assistant_id".into(), json!(assistant.assistant_id));
        m
    };
    let Some(id) = &s.thread_id else {
        let t = threads::new_thread(uuid::Uuid::now_v7().to_string(), meta(), None);
        return Ok((t, true));
    };
    let found = match read {
        ThreadRead::Found(t) => Some(*t),
        ThreadRead::Missing => None,
        ThreadRead::Unread => state.db.get_thread(&s.owner, id).await?,
    };
    if let Some(t) = found {
        return Ok((t, false));
    }
    if s.request.if_not_exists != Some(IfNotExists::Create) {
        return Err(ServiceError::not_found(format!("thread {id}")));
    }
    Ok((threads::new_thread(id.clone(), meta(), None), true))
}

/// The thread remembers the graph and assistant of its latest run (written in the run's
/// own transaction): the metadata to merge, when they change.
fn graph_metadata(thread: &Thread, kwargs: &RunKwargs) -> Option<Map<String, Value>> {
    let same = thread.metadata.get("graph_id").and_then(Value::as_str) == Some(kwargs.graph_id.as_str())
        && thread.metadata.get("assistant_id").and_then(Value::as_str) == Some(kwargs.assistant_id.as_str());
    if same {
        return None;
    }
    let mut m = Map::new();
    m.insert("graph_id".into(), json!(kwargs.graph_id));
    m.insert("assistant_id".into(), json!(kwargs.assistant_id));
    Some(m)
}

/// The run's kwargs: the request with the assistant's config and context under its own,
/// the checkpoint to start from, the defaults, and what the server adds.
fn kwargs(s: &Submit, assistant: &Assistant) -> ServiceResult<RunKwargs> {
    let r = &s.request;
    // The request's config is bounded at the edge, the assistant's when it was stored.
    let config = merge(&assistant.config, r.config.as_ref().unwrap_or(&Value::Null));
    let mut config = match config {
        Value::Null => RunConfig::default(),
        v => RunConfig::deserialize(&v).map_err(|e| ServiceError::invalid(format!("config: {e}")))?,
    };
    let mut context = merge(&assistant.context, r.context.as_ref().unwrap_or(&Value::Null));
    crate::auth::stamp_run(&s.owner, &mut config.configurable, &mut context);
    Ok(RunKwargs {
        input: r.input.clone(),
        command: r.command.clone(),
        config,
        context,
        metadata: r.metadata.clone().unwrap_or_default(),
        stream_mode: r
            .stream_mode
            .as_ref()
            .map_or_else(|| vec![crate::wire::WireMode::Values], |m| m.to_vec()),
        stream_subgraphs: r.stream_subgraphs.unwrap_or(false),
        stream_resumable: r.stream_resumable.unwrap_or(false),
        interrupt_before: r.interrupt_before.clone(),
        interrupt_after: r.interrupt_after.clone(),
        checkpoint_id: r.start_checkpoint(),
        durability: r.durability,
        on_disconnect: r.on_disconnect.unwrap_or_default(),
        webhook: r.webhook.clone(),
        feedback_keys: r.feedback_keys.clone(),
        graph_id: assistant.graph_id.clone(),
        assistant_id: assistant.assistant_id.clone(),
        temporary: s.thread_id.is_none() && r.on_completion != Some(OnCompletion::Keep),
        owner: s.owner.clone(),
        thread_protocol: r.thread_protocol,
    })
}

/// `over` merged into `base`, objects key by key (a `null` keeps the base).
fn merge(base: &Value, over: &Value) -> Value {
    match (base, over) {
        (Value::Object(a), Value::Object(b)) => {
            let mut out = a.clone();
            for (k, v) in b {
                let merged = match out.get(k) {
                    Some(old) => merge(old, v),
                    None => v.clone(),
                };
                out.insert(k.clone(), merged);
            }
            Value::Object(out)
        }
        (_, Value::Null) => base.clone(),
        _ => over.clone(),
    }
}

/// Tries of [`create_certainly`].
const CREATE_TRIES: u32 = 4;

/// Create the run, and be certain whether it was created before answering. When the
/// database drops the connection around the write, its commit is unknown: the run is read
/// back by its id, and if it is there, that is the run created (a client told "error" for a
/// run that then executes would retry and run it twice); if it is not, the creation is
/// tried again after a pause. The error is returned only when neither worked.
async fn create_certainly(state: &AppRef, new: &NewRun) -> Result<Run, crate::db::DbError> {
    let (run_id, thread_id) = (&new.run.run_id, new.run.thread_id.as_str());
    let mut pause = std::time::Duration::from_millis(100);
    let mut tries = 0;
    loop {
        tries += 1;
        let err = match state.db.create_run(new).await {
            Err(e) if e.is_transient() => e,
            // A retry of a creation that had committed after all.
            Err(crate::db::DbError::Conflict(_)) if tries > 1 => {
                if let Ok(Some(run)) = state.db.get_run(&new.owner, Some(thread_id), run_id).await {
                    return Ok(run);
                }
                return Err(crate::db::DbError::Conflict(format!("run {run_id}")));
            }
            other => return other,
        };
        tokio::time::sleep(pause).await;
        if let Ok(Some(run)) = state.db.get_run(&new.owner, Some(thread_id), run_id).await {
            tracing::warn!(run_id = %run_id, error = %err, "a run's creation met a database fault; it had been created");
            return Ok(run);
        }
        if tries >= CREATE_TRIES {
            return Err(err);
        }
        pause *= 2;
    }
}

/// Write the run. With a free worker slot here, claim it in the transaction that creates
/// it and start it at once (no separate claim, no hand-off through the queue); else wake
/// a worker.
async fn create(
    state: &AppRef,
    mut new: NewRun,
    kwargs: RunKwargs,
    hold: Hold,
    tick: Option<&CronTick>,
) -> ServiceResult<Result<(Run, Option<Reader>), Fired>> {
    let slot = state.free_slot();
    if slot.is_some() {
        new.claim = Some((state.worker_id.clone(), state.config.lease));
    }
    state.broker.open(&new.run.run_id);
    let reader = match hold {
        Hold::Nothing => None,
        Hold::Events => state.broker.reader(&new.run.run_id),
        Hold::Outcome => state.broker.waiter(&new.run.run_id),
    };
    // Thread-protocol streams following the thread here read the run from its start.
    let held = state
        .thread_signals
        .is_followed(&new.run.thread_id)
        .then(|| state.broker.reader(&new.run.run_id))
        .flatten();
    let run = match tick {
        None => create_certainly(state, &new).await?,
        Some(tick) => match state.db.fire_cron(tick, Some(&new)).await? {
            Fired::Run(run) => run,
            not => {
                drop(held);
                state.broker.abandon(&new.run.run_id);
                return Ok(Err(not));
            }
        },
    };
    state.thread_signals.run_queued(&run.thread_id, &run.run_id, held);
    if let Some(action) = new.cancel_active {
        state.cancel_local_thread(&run.thread_id, action);
    }
    let run = match (slot, run.status) {
        (Some(slot), RunStatus::Running) => {
            let claimed = ClaimedRun {
                run: run.clone(),
                attempt: 1,
            };
            (state.start_claimed)(state, claimed, Ok(kwargs), slot);
            // As the reference server answers: the run as queued.
            Run {
                status: RunStatus::Pending,
                ..run
            }
        }
        _ => {
            state.wake.notify_one();
            run
        }
    };
    Ok(Ok((run, reader)))
}
