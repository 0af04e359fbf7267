//! Runs: enqueueing ([`enqueue()`]), finding and listing them, cancelling, waiting for a
//! run's end, and following its events ([`events`]).

mod enqueue;
pub(crate) mod events;

pub(crate) use enqueue::{check_input, enqueue, enqueue_tick, Enqueued, Hold, Submit, ThreadRead};

use crate::broker::Reader;
use crate::error::{ServiceError, ServiceResult};
use crate::models::{cancel_reason, CancelAction, Run, RunStatus};
use crate::run::StreamFacts;
use crate::state::AppState;
use serde_json::{json, Value};
use std::time::Duration;

/// A run as clients see it (without the internal owner field).
pub(crate) fn public(mut run: Run) -> Run {
    if let Some(kw) = run.kwargs.as_object_mut() {
        kw.remove("owner");
    }
    run
}

/// A run of `owner` on thread `thread_id`.
pub(crate) async fn find(state: &AppState, owner: &str, thread_id: &str, run_id: &str) -> ServiceResult<Run> {
    state
        .db
        .get_run(owner, Some(thread_id), run_id)
        .await?
        .ok_or_else(|| ServiceError::not_found(format!("run {run_id}")))
}

/// A page of a thread's runs, newest first, as clients see them.
pub(crate) async fn list(
    state: &AppState,
    owner: &str,
    thread_id: &str,
    status: Option<RunStatus>,
    (limit, offset): (i64, i64),
) -> ServiceResult<Vec<Run>> {
    super::threads::load(state, owner, thread_id).await?;
    let runs = state
        .db
        .list_runs(owner, thread_id, status, limit, offset)
        .await?;
    Ok(runs.into_iter().map(public).collect())
}

/// Delete a run that has ended.
pub(crate) async fn delete(
    state: &AppState,
    owner: &str,
    thread_id: &str,
    run_id: &str,
) -> ServiceResult<()> {
    let run = find(state, owner, thread_id, run_id).await?;
    if !run.status.is_final() {
        return Err(ServiceError::conflict(format!(
            "run {run_id} is {}; cancel it before deleting it",
            run.status.as_str()
        )));
    }
    state.db.delete_run(owner, thread_id, run_id).await?;
    Ok(())
}

/// Whether a run keeps its events for replay (`stream_resumable`).
pub(crate) fn is_resumable(run: &Run) -> bool {
    StreamFacts::of(&run.kwargs).is_some_and(|k| k.stream_resumable)
}

/// Ask a run to stop: a pending one ends at once, a running one here stops now, one
/// running elsewhere at its worker's next heartbeat. Its `cancel_reason` says who asked.
/// The run as it is after the request.
pub(crate) async fn cancel(
    state: &AppState,
    owner: &str,
    thread_id: Option<&str>,
    run_id: &str,
    action: CancelAction,
) -> ServiceResult<Run> {
    let run = state
        .db
        .cancel_run(owner, thread_id, run_id, action, &cancel_reason::requested(owner))
        .await?
        .ok_or_else(|| ServiceError::not_found(format!("run {run_id}")))?;
    state.cancel_local(run_id, action);
    Ok(run)
}

/// [`cancel`], then wait (at most a minute) until the run has stopped.
pub(crate) async fn cancel_and_wait(
    state: &AppState,
    owner: &str,
    thread_id: &str,
    run_id: &str,
    action: CancelAction,
) -> ServiceResult<()> {
    let run = cancel(state, owner, Some(thread_id), run_id, action).await?;
    if !run.status.is_final() {
        let _ = tokio::time::timeout(Duration::from_secs(60), wait_outcome(state, owner, &run)).await;
    }
    Ok(())
}

/// Which runs `POST /runs/cancel` stops.
pub(crate) enum CancelTargets {
    /// These runs (of this thread, when given).
    Runs {
        thread_id: Option<String>,
        run_ids: Vec<String>,
    },
    /// The thread's runs with these statuses.
    Thread {
        thread_id: String,
        statuses: Vec<RunStatus>,
    },
}

/// Cancel several runs.
pub(crate) async fn cancel_many(
    state: &AppState,
    owner: &str,
    targets: CancelTargets,
    action: CancelAction,
) -> ServiceResult<()> {
    let targets: Vec<(Option<String>, String)> = match targets {
        CancelTargets::Runs { thread_id, run_ids } => {
            run_ids.into_iter().map(|id| (thread_id.clone(), id)).collect()
        }
        CancelTargets::Thread { thread_id, statuses } => {
            let mut out = Vec::new();
            for st in statuses {
                for r in state.db.list_runs(owner, &thread_id, Some(st), 1000, 0).await? {
                    out.push((Some(thread_id.clone()), r.run_id));
                }
            }
            out
        }
    };
    for (tid, id) in targets {
        cancel(state, owner, tid.as_deref(), &id, action).await?;
    }
    Ok(())
}

/// The `runs/wait` body of a run that ended in another process (or whose log is gone):
/// derived from the thread.
pub(crate) async fn settled_body(state: &AppState, owner: &str, run: &Run) -> Value {
    let thread = state.db.get_thread(owner, &run.thread_id).await.ok().flatten();
    let values = thread.as_ref().map_or(json!({}), |t| t.values.clone());
    match run.status {
        RunStatus::Error | RunStatus::Timeout => json!({"__error__": {
            "error": if run.status == RunStatus::Timeout { "TimeoutError" } else { "Error" },
            "message": thread.and_then(|t| t.error).unwrap_or(Value::Null),
        }}),
        RunStatus::Interrupted => {
            let list: Vec<Value> = thread
                .and_then(|t| t.interrupts.as_object().cloned())
                .map(|m| {
                    m.into_values()
                        .flat_map(|v| v.as_array().cloned().unwrap_or_default())
                        .collect()
                })
                .unwrap_or_default();
            let mut v = values;
            if let (Some(obj), false) = (v.as_object_mut(), list.is_empty()) {
                obj.insert("__interrupt__".into(), Value::Array(list));
            }
            v
        }
        _ => values,
    }
}

/// Wait until a run ends; its `runs/wait` body.
pub(crate) async fn wait_outcome(state: &AppState, owner: &str, run: &Run) -> Value {
    wait_outcome_from(state, owner, run, None).await
}

/// How often a wait whose run this process holds a log of still asks the database: the
/// run may execute in another process (created here, claimed by another replica).
const CROSS_CHECK: Duration = Duration::from_secs(1);

/// How often a wait for a run executing elsewhere polls the database.
const POLL: Duration = Duration::from_millis(200);

/// [`wait_outcome`], from `held` (a waiter taken before the run could start) or a waiter
/// taken now when this process has the run's log. The outcome comes from the log when the
/// run executes here, else from the database: the log is raced against it, so a run created
/// here but executed by another process (or handed off) is answered all the same.
pub(crate) async fn wait_outcome_from(
    state: &AppState,
    owner: &str,
    run: &Run,
    held: Option<Reader>,
) -> Value {
    let mut waiter = held.or_else(|| state.broker.waiter(&run.run_id));
    // Without a log here the run may have ended already (its log goes at its end when
    // nobody holds it): the database is asked at once, not after a first pause.
    let mut ask_now = waiter.is_none();
    loop {
        let pause = if waiter.is_some() { CROSS_CHECK } else { POLL };
        let got = if std::mem::take(&mut ask_now) {
            None
        } else {
            let local = async {
                match &waiter {
                    Some(w) => w.outcome().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                v = local => Some(v),
                () = tokio::time::sleep(pause) => None,
            }
        };
        match got {
            Some(Some(v)) => return v,
            // Handed off to another process: follow it through the database.
            Some(None) => waiter = None,
            None => {}
        }
        match state.db.get_run(owner, Some(&run.thread_id), &run.run_id).await {
            Ok(Some(r)) if r.status.is_final() => {
                // Ended here, the log has its exact outcome, written just after the row
                // (after a stateless run's thread is deleted: the database no longer has
                // its values, so a run executed here is waited for in its log, however
                // busy the database is). A log only opened here gets no outcome when
                // another process executed the run: the database answers soon.
                if let Some(w) = &waiter {
                    let grace = if state.broker.executes_here(&run.run_id) {
                        Duration::from_secs(30)
                    } else {
                        Duration::from_millis(250)
                    };
                    if let Ok(Some(v)) = tokio::time::timeout(grace, w.outcome()).await {
                        return v;
                    }
                }
                return settled_body(state, owner, &r).await;
            }
            Ok(Some(_)) => {}
            Ok(None) => {
                // A stateless run's thread (and the run with it) is deleted just before its
                // log gets the outcome: a run executing here has it a moment later.
                if let Some(w) = &waiter {
                    if let Ok(Some(v)) = tokio::time::timeout(Duration::from_secs(5), w.outcome()).await {
                        return v;
                    }
                }
                return json!({"__error__": {"error": "NotFound", "message": "run was deleted"}});
            }
            Err(e) => tracing::warn!(error = %e, "polling a run failed"),
        }
        if waiter.is_none() {
            // Handed back to this process (claimed here again).
            waiter = state.broker.waiter(&run.run_id);
        }
    }
}

/// The `runs/wait` body of a run that has ended and whose event log here is gone (it
/// ended in another process, or long ago); `None` while its end is still to be awaited.
pub(crate) async fn settled_now(state: &AppState, owner: &str, run: &Run) -> Option<Value> {
    if run.status.is_final() && !state.broker.knows(&run.run_id) {
        return Some(settled_body(state, owner, run).await);
    }
    None
}

#[cfg(test)]
mod wait_tests;
