//! The thread-centric protocol's operations: following a thread ([`follow`]), its
//! commands ([`commands`]), and joining a thread's runs in the run-centric stream format
//! ([`join`], `GET /threads/{id}/stream`).
//!
//! Runs started through the protocol are ordinary runs on the same queue, kept for
//! replay (`stream_resumable`) with the stream modes the protocol's channels need, so a
//! run started here streams on `runs/{id}/stream` too, and a run started there shows on
//! the thread's protocol streams.

pub(crate) mod commands;
pub(crate) mod follow;
pub(crate) mod join;

use crate::models::{Run, RunStatus};
use crate::run::StreamFacts;
use crate::state::AppState;

/// Runs listed per page when a thread's runs are read.
const PAGE: i64 = 1000;

/// Runs listed in the first page when only the newest are wanted; each next page holds
/// twice as many, up to [`PAGE`]. A follower at the end of a run mostly looks for the one
/// run queued after it: two rows (that run and the one it reached) say so, and each row
/// listed is a run decoded whole (its input with it).
const NEWEST_PAGE: i64 = 2;

/// Runs a thread's whole history is first listed with: most threads have fewer, and a
/// listing this short is the storage's cheapest (SQLite reads it on the calling thread).
const SHORT_THREAD: i64 = 64;

/// Every run of a thread, oldest first: a thread of fewer than [`SHORT_THREAD`] runs in one
/// short listing, a longer one again in pages of [`PAGE`].
pub(crate) async fn all_runs(state: &AppState, owner: &str, thread_id: &str) -> Vec<Run> {
    match state.db.list_runs(owner, thread_id, None, SHORT_THREAD, 0).await {
        Ok(mut runs) if i64::try_from(runs.len()).unwrap_or(i64::MAX) < SHORT_THREAD => {
            runs.reverse();
            runs
        }
        Ok(_) => newest_runs(state, owner, thread_id, PAGE, |_| false).await,
        Err(e) => {
            tracing::warn!(thread_id, error = %e, "listing a thread's runs failed");
            Vec::new()
        }
    }
}

/// The runs of a thread that come after `after` (a run's creation time and id) in its
/// listing, oldest first: a follower that has reached a thread's latest run reads the few
/// runs queued since, not the whole conversation again.
pub(crate) async fn runs_after(
    state: &AppState,
    owner: &str,
    thread_id: &str,
    after: (&str, &str),
) -> Vec<Run> {
    newest_runs(state, owner, thread_id, NEWEST_PAGE, |run| {
        (run.created_at.as_str(), run.run_id.as_str()) <= after
    })
    .await
}

/// The runs of a thread from its `ordinal`-th on (see [`Run::ordinal`]), oldest first: a
/// reconnect reads the runs its last sequence number reached, not the thread's whole
/// history.
pub(crate) async fn runs_from(state: &AppState, owner: &str, thread_id: &str, ordinal: i64) -> Vec<Run> {
    newest_runs(state, owner, thread_id, NEWEST_PAGE, |run| run.ordinal < ordinal).await
}

/// A thread's latest run.
pub(crate) async fn latest_run(state: &AppState, owner: &str, thread_id: &str) -> Option<Run> {
    match state.db.list_runs(owner, thread_id, None, 1, 0).await {
        Ok(runs) => runs.into_iter().next(),
        Err(e) => {
            tracing::warn!(thread_id, error = %e, "listing a thread's runs failed");
            None
        }
    }
}

/// A thread's runs read newest first, a first page of `page` then pages twice as large
/// (up to [`PAGE`]), to the end or to the first run `before` says is before the ones
/// wanted; returned oldest first. A thread's runs list in the order of their ordinals.
async fn newest_runs(
    state: &AppState,
    owner: &str,
    thread_id: &str,
    mut page: i64,
    before: impl Fn(&Run) -> bool,
) -> Vec<Run> {
    let mut out: Vec<Run> = Vec::new();
    let mut offset = 0;
    loop {
        let runs = match state.db.list_runs(owner, thread_id, None, page, offset).await {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(thread_id, error = %e, "listing a thread's runs failed");
                break;
            }
        };
        let n = runs.len();
        let mut reached = false;
        for run in runs {
            if before(&run) {
                reached = true;
            } else {
                out.push(run);
            }
        }
        if reached || i64::try_from(n).unwrap_or(0) < page {
            break;
        }
        offset += page;
        page = (page * 2).min(PAGE);
    }
    out.sort_by(|a, b| (&a.created_at, &a.run_id).cmp(&(&b.created_at, &b.run_id)));
    // A run queued between two pages moves the older ones down: one may come twice.
    out.dedup_by(|a, b| a.run_id == b.run_id);
    out
}

/// The graph a run runs (the `graph_name` of its root lifecycle events).
pub(crate) fn graph_name(run: &Run) -> String {
    resumable_and_graph(run).1
}

/// Whether a run keeps its events for replay (`stream_resumable`), and the graph it runs:
/// its kwargs read once for both.
pub(crate) fn resumable_and_graph(run: &Run) -> (bool, String) {
    match StreamFacts::of(&run.kwargs) {
        Some(k) => (k.stream_resumable, k.graph_id),
        None => (false, run.assistant_id.clone()),
    }
}

/// A run's status as the database has it now (its last known one when it cannot say).
pub(crate) async fn run_status(state: &AppState, owner: &str, run: &Run) -> RunStatus {
    stored_status(state, owner, run).await.unwrap_or(run.status)
}

/// A run's status as the database has it now (its last known one when the database
/// cannot say); `None` when the run is gone (rolled back, or deleted).
pub(crate) async fn stored_status(state: &AppState, owner: &str, run: &Run) -> Option<RunStatus> {
    match state.db.get_run(owner, Some(&run.thread_id), &run.run_id).await {
        Ok(found) => found.map(|r| r.status),
        Err(_) => Some(run.status),
    }
}
