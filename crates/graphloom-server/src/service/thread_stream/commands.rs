//! What the protocol's commands do to a thread: start a run (or resume the interrupted
//! one), answer interrupts, read the agent tree, the state and the checkpoints, fork, and
//! queue a message. Parameters arrive typed from the edge; errors are the protocol's.

use super::{graph_name, latest_run, run_status};
use crate::broker::Next;
use crate::models::{MultitaskStrategy, Run, Thread, ThreadStatus};
use crate::protocol::translate::RunTranslator;
use crate::protocol::{ErrorCode, Event, ProtocolError};
use crate::run::{Command, IfNotExists, OneOrMany, RunRequest};
use crate::service::runs::{enqueue, Hold, Submit, ThreadRead};
use crate::service::threads;
use crate::state::AppRef;
use crate::wire::WireMode;
use serde_json::{json, Map, Value};
use std::time::Duration;

/// The thread a command is about, and who sends it.
pub(crate) struct Ctx<'a> {
    pub state: &'a AppRef,
    pub owner: &'a str,
    pub thread_id: &'a str,
}

type Result<T> = std::result::Result<T, ProtocolError>;

/// An answer to one interrupt.
pub(crate) struct Answer {
    pub interrupt_id: String,
    pub response: Value,
}

/// The stream modes a protocol run produces: what its channels need.
const MODES: [WireMode; 5] = [
    WireMode::Values,
    WireMode::Updates,
    WireMode::MessagesTuple,
    WireMode::Custom,
    WireMode::Checkpoints,
];

/// A run request as the protocol runs it: its events kept for replay, subgraphs
/// included, the thread created when missing.
fn protocol_run(mut r: RunRequest) -> RunRequest {
    r.stream_mode = Some(OneOrMany::Many(MODES.to_vec()));
    r.stream_subgraphs = Some(true);
    r.stream_resumable = Some(true);
    // It keeps what the channels read (checkpoint envelopes, models' chunks), no more.
    r.thread_protocol = true;
    r.if_not_exists = Some(IfNotExists::Create);
    r
}

/// Queue `request` on the thread and wake the thread's followers here.
async fn submit(ctx: &Ctx<'_>, request: RunRequest, delay: Option<Duration>) -> Result<Run> {
    submit_read(ctx, request, delay, ThreadRead::Unread).await
}

/// [`submit`], with the thread as the caller has just read it.
async fn submit_read(
    ctx: &Ctx<'_>,
    request: RunRequest,
    delay: Option<Duration>,
    read: ThreadRead,
) -> Result<Run> {
    let submit = Submit {
        owner: ctx.owner.to_owned(),
        thread_id: Some(ctx.thread_id.to_owned()),
        request: protocol_run(request),
        delay,
        hold: Hold::Nothing,
        read,
    };
    let run = enqueue(ctx.state, submit).await?.run;
    ctx.state.thread_signals.notify(ctx.thread_id);
    Ok(run)
}

/// The interrupts the thread waits on: id -> its value.
fn pending_interrupts(interrupts: &Value) -> Map<String, Value> {
    let mut out = Map::new();
    if let Some(by_task) = interrupts.as_object() {
        for list in by_task.values() {
            for i in list.as_array().into_iter().flatten() {
                if let Some(id) = i.get("id").and_then(Value::as_str) {
                    out.insert(id.to_owned(), i.get("value").cloned().unwrap_or(Value::Null));
                }
            }
        }
    }
    out
}

/// `run.start`: a new run with the input; on a thread paused at interrupts, the input
/// resumes them instead (as the reference server does).
pub(crate) async fn start(ctx: &Ctx<'_>, mut request: RunRequest, delay: Option<Duration>) -> Result<Run> {
    if request.assistant_id.is_empty() {
        return Err(ProtocolError::invalid("run.start requires an assistant_id."));
    }
    let thread = thread_of(ctx).await?;
    let interrupted = thread.as_ref().is_some_and(|t| {
        t.status == ThreadStatus::Interrupted && !pending_interrupts(&t.interrupts).is_empty()
    });
    if interrupted && request.command.is_none() && request.start_checkpoint().is_none() {
        let resume = request.input.take().unwrap_or(Value::Null);
        request.command = Some(Command {
            resume: Some(resume),
            ..Command::default()
        });
    }
    // The thread as read here: a new thread is not looked for a second time.
    let read = thread.map_or(ThreadRead::Missing, |t| ThreadRead::Found(Box::new(t)));
    submit_read(ctx, request, delay, read).await
}

/// The command's thread as stored, without its values (a command looks at its status,
/// interrupts and metadata; its state grows with the conversation); `None` when there is
/// none yet (the first `run.start` creates it).
async fn thread_of(ctx: &Ctx<'_>) -> Result<Option<Thread>> {
    ctx.state
        .db
        .get_thread_head(ctx.owner, ctx.thread_id)
        .await
        .map_err(api)
}

/// The assistant of the thread's latest run, for commands that name none.
async fn thread_assistant(ctx: &Ctx<'_>) -> Result<String> {
    let t = thread_of(ctx)
        .await?
        .ok_or_else(|| ProtocolError::new(ErrorCode::NoSuchRun, "No run is bound to this thread."))?;
    t.metadata
        .get("assistant_id")
        .or_else(|| t.metadata.get("graph_id"))
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| ProtocolError::new(ErrorCode::NoSuchRun, "No run is bound to this thread."))
}

/// `input.respond`: resume the interrupts answered (by id) in one run. `rest` carries
/// the command's `update`/`goto`, `config` and `metadata`.
pub(crate) async fn respond(ctx: &Ctx<'_>, answers: Vec<Answer>, mut rest: RunRequest) -> Result<Run> {
    let thread = thread_of(ctx).await?;
    let no_run = || {
        ProtocolError::new(
            ErrorCode::NoSuchRun,
            "No interrupted run is bound to this thread.",
        )
    };
    let thread = thread.ok_or_else(no_run)?;
    let pending = pending_interrupts(&thread.interrupts);
    if thread.status != ThreadStatus::Interrupted || pending.is_empty() {
        return Err(no_run());
    }
    let mut resume = Map::new();
    for a in answers {
        if !pending.contains_key(&a.interrupt_id) {
            return Err(ProtocolError::new(
                ErrorCode::NoSuchInterrupt,
                format!("Unknown or already-consumed interrupt: {}", a.interrupt_id),
            ));
        }
        resume.insert(a.interrupt_id, a.response);
    }
    if rest.assistant_id.is_empty() {
        rest.assistant_id = thread_assistant(ctx).await?;
    }
    let mut command = rest.command.take().unwrap_or_default();
    command.resume = Some(Value::Object(resume));
    rest.command = Some(command);
    rest.multitask_strategy = Some(MultitaskStrategy::Reject);
    submit(ctx, rest, None).await
}

/// How long `state.fork` waits for a checkpoint the thread's active run has streamed but
/// not saved yet: a protocol run's checkpoint events come as its checkpoints are made, and
/// each is saved within a commit or two (the last one with the run's end).
const UNSAVED_CHECKPOINT_WAIT: Duration = Duration::from_secs(2);

/// `state.fork`: a run from checkpoint `checkpoint_id` of the thread (queued behind the
/// thread's active run, as runs are by default).
pub(crate) async fn fork(ctx: &Ctx<'_>, checkpoint_id: String, mut request: RunRequest) -> Result<Run> {
    saved_checkpoint(ctx, &checkpoint_id).await?;
    if request.assistant_id.is_empty() {
        request.assistant_id = thread_assistant(ctx).await?;
    }
    request.checkpoint_id = Some(checkpoint_id);
    submit(ctx, request, None).await
}

/// Wait until checkpoint `id` of the thread reads: at once when it does or when the thread
/// has no active run, else while that run may still be saving it (up to
/// [`UNSAVED_CHECKPOINT_WAIT`]); `no_such_checkpoint` when it never does.
async fn saved_checkpoint(ctx: &Ctx<'_>, id: &str) -> Result<()> {
    let deadline = tokio::time::Instant::now() + UNSAVED_CHECKPOINT_WAIT;
    let mut pause = Duration::from_millis(5);
    loop {
        // The status is read before the state: a run that ended by then had saved every
        // checkpoint it streamed (its end is recorded after its last checkpoint's save).
        let busy = thread_of(ctx)
            .await?
            .is_some_and(|t| t.status == ThreadStatus::Busy);
        match threads::state_at(ctx.state, ctx.owner, ctx.thread_id, Some(id)).await {
            Ok(_) => return Ok(()),
            Err(e) if e.kind == crate::error::ErrorKind::NotFound => {
                if !busy || tokio::time::Instant::now() + pause > deadline {
                    return Err(ProtocolError::new(
                        ErrorCode::NoSuchCheckpoint,
                        format!("No checkpoint {id} on this thread."),
                    ));
                }
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_millis(100));
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// `input.inject`: the message as the thread's next turn, queued after the active run
/// (a graph cannot take input while a step runs; the message waits for the run's end).
pub(crate) async fn inject(ctx: &Ctx<'_>, role: &str, content: Value, name: Option<String>) -> Result<Run> {
    let assistant_id = thread_assistant(ctx).await?;
    let mut msg = json!({"type": if role == "system" { "system" } else { "human" }, "content": content});
    if let (Some(n), Value::Object(m)) = (name, &mut msg) {
        m.insert("name".into(), json!(n));
    }
    let request: RunRequest = serde_json::from_value(json!({
        "assistant_id": assistant_id,
        "input": {"messages": [msg]},
        "multitask_strategy": "enqueue",
    }))
    .map_err(|e| ProtocolError::invalid(e.to_string()))?;
    submit(ctx, request, None).await
}

/// `agent.getTree`: the namespaces of run `run_id` (default: the thread's latest run),
/// each with its status.
pub(crate) async fn tree(ctx: &Ctx<'_>, run_id: Option<&str>) -> Result<Value> {
    let found = match run_id {
        Some(id) => ctx
            .state
            .db
            .get_run(ctx.owner, Some(ctx.thread_id), id)
            .await
            .map_err(api)?,
        None => latest_run(ctx.state, ctx.owner, ctx.thread_id).await,
    };
    let run = found
        .ok_or_else(|| ProtocolError::new(ErrorCode::NoSuchRun, "No active run is bound to this thread."))?;
    let t = translate_run(ctx.state, ctx.owner, &run).await?;
    Ok(json!({"tree": t.translator.tree()}))
}

/// A run translated from its start as far as its log goes now.
pub(crate) struct TranslatedRun {
    /// The run.
    pub run: Run,
    /// The translator, as the log left it (to go on from `cursor`).
    pub translator: RunTranslator,
    /// The events so far.
    pub events: Vec<Event>,
    /// The index of the next event of the run's log.
    pub cursor: u64,
    /// Whether the run had ended (its end's events are in `events`).
    pub ended: bool,
}

/// Run `run` translated from its start as far as its log goes now (this process's
/// broker, then what the database stored after it), ended when the run has.
pub(crate) async fn translate_run(state: &AppRef, owner: &str, run: &Run) -> Result<TranslatedRun> {
    let ordinal = u64::try_from(run.ordinal).unwrap_or(0);
    let mut t = RunTranslator::new(run.run_id.clone(), ordinal, graph_name(run));
    let mut out = Vec::new();
    let mut cursor = 0;
    while let Some(Next::Events(evs)) = state.broker.next(&run.run_id, cursor, Duration::ZERO).await {
        if evs.is_empty() {
            break;
        }
        for e in &evs {
            out.extend(t.push(e));
            cursor = e.id + 1;
        }
    }
    // Read after the status: a run is marked ended only once its events are stored.
    let status = run_status(state, owner, run).await;
    loop {
        let evs = state.db.run_events(&run.run_id, cursor, 256).await.map_err(api)?;
        if evs.is_empty() {
            break;
        }
        for e in &evs {
            out.extend(t.push(e));
            cursor = e.id + 1;
        }
    }
    let ended = status.is_final();
    if ended {
        out.extend(t.finish(cursor, status));
    }
    Ok(TranslatedRun {
        run: run.clone(),
        translator: t,
        events: out,
        cursor,
        ended,
    })
}

/// The thread's latest run translated so far (what a WebSocket subscription replays).
pub(crate) async fn latest_translated(ctx: &Ctx<'_>) -> Result<Option<TranslatedRun>> {
    match latest_run(ctx.state, ctx.owner, ctx.thread_id).await {
        Some(run) => Ok(Some(translate_run(ctx.state, ctx.owner, &run).await?)),
        None => Ok(None),
    }
}

/// `state.get`: the thread's values (only `keys`, when given) and checkpoint.
pub(crate) async fn state_get(
    ctx: &Ctx<'_>,
    namespace: &[String],
    keys: Option<Vec<String>>,
) -> Result<Value> {
    if !namespace.is_empty() {
        return Err(ProtocolError::new(
            ErrorCode::NoSuchNamespace,
            "state.get reads the root namespace; a subgraph's state is in the root's `tasks`.",
        ));
    }
    let s = threads::state_at(ctx.state, ctx.owner, ctx.thread_id, None).await?;
    let mut values = s.get("values").cloned().unwrap_or_else(|| json!({}));
    if let (Some(keys), Value::Object(m)) = (keys, &mut values) {
        m.retain(|k, _| keys.contains(k));
    }
    let mut out = json!({"values": values});
    if let (Some(id), Value::Object(m)) = (
        s.pointer("/checkpoint/checkpoint_id").filter(|v| !v.is_null()),
        &mut out,
    ) {
        let ns = s
            .pointer("/checkpoint/checkpoint_ns")
            .cloned()
            .unwrap_or(json!(""));
        m.insert("checkpoint".into(), json!({"id": id, "ns": ns}));
    }
    Ok(out)
}

/// `state.listCheckpoints`: the thread's checkpoints, newest first.
pub(crate) async fn list_checkpoints(
    ctx: &Ctx<'_>,
    limit: Option<usize>,
    before: Option<String>,
) -> Result<Value> {
    let states = threads::history(ctx.state, ctx.owner, ctx.thread_id, limit, before, Map::new()).await?;
    let checkpoints: Vec<Value> = states
        .iter()
        .map(|s| {
            let mut c = json!({
                "id": s.pointer("/checkpoint/checkpoint_id").cloned().unwrap_or(Value::Null),
                "timestamp": s.get("created_at").cloned().unwrap_or(Value::Null),
                "step": s.pointer("/metadata/step").cloned().unwrap_or(json!(0)),
                "metadata": s.get("metadata").cloned().unwrap_or(json!({})),
            });
            let node = s
                .pointer("/metadata/writes")
                .and_then(Value::as_object)
                .and_then(|w| w.keys().next().cloned());
            if let (Some(node), Value::Object(m)) = (node, &mut c) {
                m.insert("node_name".into(), json!(node));
            }
            c
        })
        .collect();
    Ok(json!({"checkpoints": checkpoints}))
}

fn api(e: crate::db::DbError) -> ProtocolError {
    crate::error::ServiceError::from(e).into()
}
