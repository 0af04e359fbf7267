//! The run queue: create (with the multitask strategy), claim, lease, finish, cancel.

use super::events::EventBatch;
use super::rows::QueuedRun;
use super::threads::{NewThreadRow, OutcomeRow};
use super::{exec, push_page, scalar, text, SqliteDb};
use crate::error::ServerResultExt;
use crate::row::{query_all, query_one, FromRow};
use crate::SqliteDatabase;
use graphloom_server_db::kit::{
    after, cancel_action, created, creation_time, merge, now_micros, run_status, Made,
};
use graphloom_server_db::models::{
    cancel_reason, rfc3339_from_micros, CancelAction, ClaimedRun, Run, RunStatus,
};
use graphloom_server_db::{DbError, DbResult, Lease, NewRun, RunEventRecord, ThreadOutcome};
use rusqlite::types::Value as SqlValue;
use rusqlite::{params, Connection, OptionalExtension};
use serde_json::{Map, Value};
use std::time::Duration;

/// The oldest claimable run (`?1` = now): pending and due, or running with an expired
/// lease. A pending run waits for every running run of its thread (a dead worker's expired
/// one is taken over first); an expired running run waits only for live ones.
const CLAIMABLE: &str = "SELECT r.run_id, r.thread_id FROM server_runs r \
     WHERE ((r.status = 'pending' AND r.due_at <= ?1) \
         OR (r.status = 'running' AND r.lease_expires_at < ?1)) \
       AND NOT EXISTS (SELECT 1 FROM server_runs o WHERE o.thread_id = r.thread_id \
         AND o.run_id <> r.run_id AND o.status = 'running' \
         AND (r.status = 'pending' OR o.lease_expires_at >= ?1)) \
     ORDER BY r.created_at, r.run_id LIMIT 1";

/// The oldest claimable run, `(run_id, thread_id)`.
fn claimable(c: &Connection, now: i64) -> DbResult<Option<(String, String)>> {
    c.prepare_cached(CLAIMABLE)
        .db()?
        .query_row(params![now], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()
        .db()
}

/// What a run's creation reads of its thread (`?1`): its metadata, owner and next ordinal,
/// and the newest creation time among its runs (this run comes after it; one step down the
/// thread's index in listing order).
const THREAD_OF_NEW_RUN: &str = "SELECT metadata, owner, next_ordinal, \
     (SELECT MAX(created_at) FROM server_runs WHERE thread_id = ?1) \
     FROM server_threads WHERE thread_id = ?1";

/// Whether the thread has a run queued or running.
fn thread_active(c: &Connection, thread_id: &str) -> DbResult<bool> {
    let n: i64 = scalar(
        c,
        "SELECT COUNT(*) FROM server_runs WHERE thread_id = ?1 AND status IN ('pending', 'running')",
        params![thread_id],
    )?;
    Ok(n > 0)
}

pub(super) async fn create(db: &SqliteDb, new: &NewRun) -> DbResult<Run> {
    let now = now_micros();
    let op = insert_op(new, now)?;
    let made = db.write(op).await?;
    Ok(created(&new.run, made))
}

/// The write that creates `new` at `now` (with its multitask strategy, claimed at once
/// when it asks and can be), to run in a writer transaction: what it gave the run. A
/// missing thread or a `reject` on a busy thread fail before anything is written.
pub(super) fn insert_op(
    new: &NewRun,
    now: i64,
) -> DbResult<impl Fn(&Connection) -> DbResult<Made> + Send + 'static> {
    let r = &new.run;
    let (metadata, kwargs) = (text(&r.metadata)?, text(&r.kwargs)?);
    let due = new.delay.map_or(now, |d| after(now, d));
    let row = (
        r.run_id.clone(),
        r.thread_id.clone(),
        new.owner.clone(),
        r.assistant_id.clone(),
        r.multitask_strategy.as_str(),
    );
    let (reject_if_busy, cancel_active) = (new.reject_if_busy, new.cancel_active);
    let (thread_metadata, claim) = (new.thread_metadata.clone(), new.claim.clone());
    let new_thread = new
        .create_thread
        .as_ref()
        .map(|t| NewThreadRow::of(&new.owner, t))
        .transpose()?;
    Ok(move |c: &Connection| {
        let (run_id, thread_id, owner, assistant_id, strategy) = &row;
        if let Some(t) = &new_thread {
            t.insert(c, now)?;
        }
        let stored: Option<(Value, String, i64, Option<i64>)> = c
            .prepare_cached(THREAD_OF_NEW_RUN)
            .db()?
            .query_row(params![thread_id], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
            })
            .optional()
            .db()?;
        let Some((stored_metadata, thread_owner, ordinal, newest)) = stored else {
            return Err(DbError::Backend(format!("thread {thread_id} not found")));
        };
        let created_at = creation_time(now, newest);
        if new_thread.is_some() && thread_owner != *owner {
            return Err(DbError::Conflict(format!("thread {thread_id}")));
        }
        if reject_if_busy && thread_active(c, thread_id)? {
            return Err(DbError::Busy(thread_id.clone()));
        }
        if let Some(action) = cancel_active {
            let pending = match action {
                CancelAction::Interrupt => {
                    "UPDATE server_runs SET status = 'interrupted', updated_at = ?1, \
                         cancel_reason = COALESCE(cancel_reason, ?3) \
                         WHERE thread_id = ?2 AND status = 'pending'"
                }
                CancelAction::Rollback => {
                    "DELETE FROM server_runs WHERE thread_id = ?2 AND status = 'pending' \
                         AND ?1 IS NOT NULL AND ?3 IS NOT NULL"
                }
            };
            let reason = cancel_reason::multitask(action, run_id);
            exec(c, pending, params![now, thread_id, reason])?;
            exec(
                c,
                "UPDATE server_runs SET cancel_action = ?1, updated_at = ?2, \
                     cancel_reason = COALESCE(cancel_reason, ?4) \
                     WHERE thread_id = ?3 AND status = 'running'",
                params![action.as_str(), now, thread_id, reason],
            )?;
        }
        // Claimed at once: inserted running (no pending row to update, no index
        // entries written twice).
        let claim = match &claim {
            Some(held) if due <= now && !thread_active(c, thread_id)? => Some(held),
            _ => None,
        };
        let (status, worker, lease_expires_at, attempt) = match &claim {
            Some((worker, lease)) => ("running", Some(worker.as_str()), Some(after(now, *lease)), 1),
            None => ("pending", None, None, 0),
        };
        let inserted = exec(
                c,
                "INSERT INTO server_runs (run_id, thread_id, owner, assistant_id, created_at, updated_at, status, \
                 metadata, kwargs, multitask_strategy, due_at, worker, lease_expires_at, attempt, ordinal) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14) ON CONFLICT (run_id) DO NOTHING",
                params![
                    run_id,
                    thread_id,
                    owner,
                    assistant_id,
                    created_at,
                    status,
                    metadata,
                    kwargs,
                    strategy,
                    due,
                    worker,
                    lease_expires_at,
                    attempt,
                    ordinal
                ],
            )?;
        if inserted == 0 {
            return Err(DbError::Conflict(format!("run {run_id}")));
        }
        // The thread: the next run's ordinal, the run's graph in its metadata, busy if
        // claimed; one update.
        let merged = match &thread_metadata {
            Some(m) => {
                let mut merged = match stored_metadata {
                    Value::Object(o) => o,
                    _ => Map::new(),
                };
                merge(&mut merged, m);
                Some(text(&merged)?)
            }
            None => None,
        };
        let claimed = claim.is_some();
        let next = ordinal.saturating_add(1);
        if merged.is_some() || claimed {
            exec(
                    c,
                    "UPDATE server_threads SET metadata = COALESCE(?1, metadata), updated_at = ?2, \
                     status = CASE WHEN ?3 THEN 'busy' ELSE status END, \
                     expires_at = CASE WHEN NOT ?3 THEN expires_at WHEN ttl_us IS NULL THEN NULL ELSE ?2 + ttl_us END, \
                     next_ordinal = ?5 WHERE thread_id = ?4",
                    params![merged, now, claimed, thread_id, next],
                )?;
        } else {
            exec(
                c,
                "UPDATE server_threads SET next_ordinal = ?1 WHERE thread_id = ?2",
                params![next, thread_id],
            )?;
        }
        Ok(Made {
            claimed,
            ordinal,
            created_at,
        })
    })
}

/// The SELECT of a run of an owner by id (and thread, when `?3` is not NULL).
fn by_id() -> String {
    format!(
        "SELECT {} FROM server_runs WHERE run_id = ?1 AND owner = ?2 AND (?3 IS NULL OR thread_id = ?3)",
        QueuedRun::COLUMNS
    )
}

pub(super) fn get(
    db: &SqliteDb,
    owner: &str,
    thread_id: Option<&str>,
    run_id: &str,
) -> DbResult<Option<Run>> {
    let found = db.read(|c| query_one::<QueuedRun>(c, &by_id(), params![run_id, owner, thread_id]))?;
    Ok(found.map(|q| q.run))
}

pub(super) async fn list(
    db: &SqliteDb,
    owner: &str,
    thread_id: &str,
    status: Option<RunStatus>,
    limit: i64,
    offset: i64,
) -> DbResult<Vec<Run>> {
    let (sql, params) = list_query(owner, thread_id, status, limit, offset);
    // Two texts (with and without a status): cached, as a thread's followers list its
    // runs whenever one is queued.
    let op = move |c: &Connection| {
        let rows = query_all::<QueuedRun>(c, &sql, rusqlite::params_from_iter(params))?;
        Ok(rows.into_iter().map(|q| q.run).collect())
    };
    if newest_few(status, limit, offset) {
        db.read(op)
    } else {
        db.scan(op).await
    }
}

/// The statement and parameters listing a thread's runs, newest first.
fn list_query(
    owner: &str,
    thread_id: &str,
    status: Option<RunStatus>,
    limit: i64,
    offset: i64,
) -> (String, Vec<SqlValue>) {
    let mut sql = format!(
        "SELECT {} FROM server_runs WHERE thread_id = ? AND owner = ?",
        QueuedRun::COLUMNS
    );
    let mut params = vec![
        SqlValue::Text(thread_id.to_owned()),
        SqlValue::Text(owner.to_owned()),
    ];
    if let Some(s) = status {
        sql.push_str(" AND status = ?");
        params.push(SqlValue::Text(s.as_str().to_owned()));
    }
    sql.push_str(" ORDER BY created_at DESC, run_id DESC");
    push_page(&mut sql, &mut params, limit, offset);
    (sql, params)
}

/// Most runs a listing reads on the calling thread (see [`newest_few`]).
const NEWEST_FEW: i64 = 64;

/// Whether a listing of a thread's runs is of its newest few, at most [`NEWEST_FEW`] from
/// the newest one: a walk of that many entries of the thread's index in listing order
/// (`server_runs_thread_order_idx`), cheaper than a hand-off to the blocking pool, however
/// many runs the thread has. A listing by status, or further down, may read many rows
/// before its page: it runs on the blocking pool.
fn newest_few(status: Option<RunStatus>, limit: i64, offset: i64) -> bool {
    status.is_none() && limit > 0 && offset >= 0 && limit.saturating_add(offset) <= NEWEST_FEW
}

pub(super) async fn delete(db: &SqliteDb, owner: &str, thread_id: &str, run_id: &str) -> DbResult<bool> {
    let (owner, thread_id, run_id) = (owner.to_owned(), thread_id.to_owned(), run_id.to_owned());
    db.write(move |c| {
        let n = exec(
            c,
            "DELETE FROM server_runs WHERE run_id = ?1 AND thread_id = ?2 AND owner = ?3",
            params![run_id, thread_id, owner],
        )?;
        if n > 0 {
            exec(
                c,
                "DELETE FROM server_run_event_batches WHERE run_id = ?1",
                params![run_id],
            )?;
        }
        Ok(n > 0)
    })
    .await
}

/// Claim the oldest claimable run; with `look`, only after a look on a read connection
/// finds one: idle workers polling an empty queue then never queue behind the writer.
pub(super) async fn claim(
    db: &SqliteDb,
    worker: &str,
    lease: Duration,
    look: bool,
) -> DbResult<Option<ClaimedRun>> {
    if look && db.read(|c| claimable(c, now_micros()))?.is_none() {
        return Ok(None);
    }
    let worker = worker.to_owned();
    db.write(move |c| {
        let now = now_micros();
        let Some((run_id, thread_id)) = claimable(c, now)? else {
            return Ok(None);
        };
        let claimed = query_one::<QueuedRun>(
            c,
            &format!(
                "UPDATE server_runs SET status = 'running', worker = ?1, lease_expires_at = ?2, \
                 attempt = attempt + 1, updated_at = ?3 WHERE run_id = ?4 RETURNING {}",
                QueuedRun::COLUMNS
            ),
            params![worker, after(now, lease), now, run_id],
        )?;
        let Some(QueuedRun { run, attempt }) = claimed else {
            return Ok(None);
        };
        exec(
            c,
            "UPDATE server_threads SET status = 'busy', updated_at = ?1, \
             expires_at = CASE WHEN ttl_us IS NULL THEN NULL ELSE ?1 + ttl_us END WHERE thread_id = ?2",
            params![now, thread_id],
        )?;
        Ok(Some(ClaimedRun { run, attempt }))
    })
    .await
}

pub(super) async fn heartbeat(db: &SqliteDb, run_id: &str, worker: &str, lease: Duration) -> DbResult<Lease> {
    let (run_id, worker) = (run_id.to_owned(), worker.to_owned());
    let held: Option<Option<String>> = db
        .write(move |c| {
            c.prepare_cached(
                "UPDATE server_runs SET lease_expires_at = ?1 WHERE run_id = ?2 AND worker = ?3 \
                 AND status = 'running' RETURNING cancel_action",
            )
            .db()?
            .query_row(params![after(now_micros(), lease), run_id, worker], |r| r.get(0))
            .optional()
            .db()
        })
        .await?;
    Ok(match held {
        None => Lease::Lost,
        Some(c) => cancel_action(c.as_deref())?.map_or(Lease::Held, Lease::Cancel),
    })
}

/// The UPDATE that ends (or requeues) a run held by a worker.
fn finish_sql(status: RunStatus) -> &'static str {
    match status {
        // Back to the queue (e.g. a worker shutting down): claimable again at once.
        RunStatus::Pending => {
            "UPDATE server_runs SET status = ?1, worker = NULL, lease_expires_at = NULL, due_at = ?2, \
             updated_at = ?2 WHERE run_id = ?3 AND worker = ?4 AND status = 'running'"
        }
        RunStatus::Running => {
            "UPDATE server_runs SET status = ?1, updated_at = ?2 \
             WHERE run_id = ?3 AND worker = ?4 AND status = 'running'"
        }
        _ => {
            "UPDATE server_runs SET status = ?1, lease_expires_at = NULL, updated_at = ?2 \
             WHERE run_id = ?3 AND worker = ?4 AND status = 'running'"
        }
    }
}

/// End (or requeue) a run held by `worker`; the rows changed (0: not held any more).
fn end(c: &Connection, run_id: &str, worker: &str, status: RunStatus, now: i64) -> DbResult<usize> {
    exec(
        c,
        finish_sql(status),
        params![status.as_str(), now, run_id, worker],
    )
}

pub(super) async fn finish(db: &SqliteDb, run_id: &str, worker: &str, status: RunStatus) -> DbResult<bool> {
    let (run_id, worker) = (run_id.to_owned(), worker.to_owned());
    db.write(move |c| Ok(end(c, &run_id, &worker, status, now_micros())? > 0))
        .await
}

pub(super) async fn finish_with_outcome(
    db: &SqliteDb,
    run_id: &str,
    worker: &str,
    status: RunStatus,
    thread_id: &str,
    outcome: &ThreadOutcome,
    events: Vec<RunEventRecord>,
) -> DbResult<bool> {
    let row = OutcomeRow::new(outcome)?;
    let events = EventBatch::new(&events)?;
    let (run_id, worker, thread_id) = (run_id.to_owned(), worker.to_owned(), thread_id.to_owned());
    db.write(move |c| {
        let now = now_micros();
        if end(c, &run_id, &worker, status, now)? == 0 {
            return Ok(false);
        }
        events.insert(c, &run_id)?;
        row.write(c, &thread_id, now)?;
        Ok(true)
    })
    .await
}

pub(super) async fn finish_at_checkpoint(
    db: &SqliteDb,
    run_id: &str,
    worker: &str,
    thread_id: &str,
    outcome: &ThreadOutcome,
    checkpoint_id: &str,
    events: &[RunEventRecord],
) -> DbResult<bool> {
    let row = OutcomeRow::new(outcome)?;
    let events = EventBatch::new(events)?;
    let (run_id, worker, thread_id, checkpoint_id) = (
        run_id.to_owned(),
        worker.to_owned(),
        thread_id.to_owned(),
        checkpoint_id.to_owned(),
    );
    db.write(move |c| {
        if !SqliteDatabase::checkpoint_saved(c, &thread_id, "", &checkpoint_id).db()? {
            return Ok(false);
        }
        let now = now_micros();
        if end(c, &run_id, &worker, RunStatus::Success, now)? == 0 {
            return Ok(false);
        }
        events.insert(c, &run_id)?;
        row.write(c, &thread_id, now)?;
        Ok(true)
    })
    .await
}

pub(super) async fn cancel(
    db: &SqliteDb,
    owner: &str,
    thread_id: Option<&str>,
    run_id: &str,
    action: CancelAction,
    reason: &str,
) -> DbResult<Option<Run>> {
    let now = now_micros();
    let (owner, thread_id, run_id) = (owner.to_owned(), thread_id.map(str::to_owned), run_id.to_owned());
    let reason = reason.to_owned();
    db.write(move |c| {
        let Some(QueuedRun { run: mut r, .. }) =
            query_one::<QueuedRun>(c, &by_id(), params![run_id, owner, thread_id])?
        else {
            return Ok(None);
        };
        match (r.status, action) {
            (RunStatus::Pending, CancelAction::Interrupt) => {
                exec(
                    c,
                    "UPDATE server_runs SET status = 'interrupted', updated_at = ?1, \
                     cancel_reason = COALESCE(cancel_reason, ?3) WHERE run_id = ?2",
                    params![now, run_id, reason],
                )?;
                r.status = RunStatus::Interrupted;
                r.updated_at = rfc3339_from_micros(now);
            }
            (RunStatus::Pending, CancelAction::Rollback) => {
                exec(c, "DELETE FROM server_runs WHERE run_id = ?1", params![run_id])?;
                r.status = RunStatus::Interrupted;
                r.updated_at = rfc3339_from_micros(now);
            }
            (RunStatus::Running, _) => {
                exec(
                    c,
                    "UPDATE server_runs SET cancel_action = ?1, updated_at = ?2, \
                     cancel_reason = COALESCE(cancel_reason, ?4) WHERE run_id = ?3",
                    params![action.as_str(), now, run_id, reason],
                )?;
                r.updated_at = rfc3339_from_micros(now);
            }
            _ => return Ok(Some(r)),
        }
        r.cancel_reason.get_or_insert_with(|| reason.clone());
        Ok(Some(r))
    })
    .await
}

pub(super) async fn queue_depth(db: &SqliteDb) -> DbResult<i64> {
    db.scan(|c| scalar(c, "SELECT COUNT(*) FROM server_runs WHERE status = 'pending'", []))
        .await
}

pub(super) async fn by_status(db: &SqliteDb) -> DbResult<Vec<(RunStatus, i64)>> {
    let rows: Vec<(String, i64)> = db
        .scan(|c| {
            c.prepare_cached("SELECT status, COUNT(*) FROM server_runs GROUP BY status ORDER BY status")
                .db()?
                .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
                .db()?
                .collect::<rusqlite::Result<Vec<_>>>()
                .db()
        })
        .await?;
    rows.into_iter().map(|(s, n)| Ok((run_status(&s)?, n))).collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// The query plan of a listing: SQLite's `EXPLAIN QUERY PLAN` details.
    async fn plan(status: Option<RunStatus>) -> Vec<String> {
        let dir = tempfile::tempdir().unwrap();
        let db = SqliteDb::open(dir.path().join("s.db")).await.unwrap();
        let (sql, params) = list_query("", "t", status, 4, 0);
        db.read(|c| {
            let mut st = c.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).db()?;
            let rows = st
                .query_map(rusqlite::params_from_iter(params), |r| r.get::<_, String>(3))
                .db()?;
            rows.collect::<rusqlite::Result<Vec<_>>>().db()
        })
        .unwrap()
    }

    /// A thread's newest runs are a walk of its index in listing order, not a sort of all
    /// its runs.
    #[tokio::test]
    async fn a_threads_newest_runs_walk_its_index_in_listing_order() {
        let plan = plan(None).await;
        assert!(
            plan.iter().any(|d| d.contains("server_runs_thread_order_idx")),
            "{plan:?}"
        );
        assert!(!plan.iter().any(|d| d.contains("TEMP B-TREE")), "{plan:?}");
    }

    /// A run's creation finds the newest creation time among its thread's runs at the end
    /// of the thread's index, not by reading the thread's runs.
    #[tokio::test]
    async fn a_new_run_finds_its_threads_newest_run_on_the_threads_index() {
        let dir = tempfile::tempdir().unwrap();
        let db = SqliteDb::open(dir.path().join("s.db")).await.unwrap();
        let plan = db
            .read(|c| {
                let mut st = c
                    .prepare(&format!("EXPLAIN QUERY PLAN {THREAD_OF_NEW_RUN}"))
                    .db()?;
                let rows = st.query_map(["t"], |r| r.get::<_, String>(3)).db()?;
                rows.collect::<rusqlite::Result<Vec<_>>>().db()
            })
            .unwrap();
        assert!(
            plan.iter()
                .any(|d| d.contains("server_runs_thread_order_idx") && d.starts_with("SEARCH")),
            "{plan:?}"
        );
        assert!(!plan.iter().any(|d| d.starts_with("SCAN")), "{plan:?}");
    }

    /// Only the newest few of the listing, unfiltered, are read on the calling thread.
    #[test]
    fn the_newest_few_are_the_first_pages_of_an_unfiltered_listing() {
        assert!(newest_few(None, 1, 0));
        assert!(newest_few(None, 4, 60));
        assert!(!newest_few(None, 4, 61));
        assert!(!newest_few(None, 100, 0));
        assert!(!newest_few(None, 0, 0), "no limit: every run");
        assert!(!newest_few(None, 4, -1));
        assert!(!newest_few(Some(RunStatus::Pending), 4, 0));
        assert!(!newest_few(None, i64::MAX, 1));
    }
}
