//! The run queue: create (with the multitask strategy), claim, lease, finish, cancel.

use super::rows::{all, one, FromRow, QueuedRun};
use super::threads::outcome_query;
use crate::error::ServerResultExt;
use graphloom_server_db::kit::{
    after, cancel_action, created, creation_time, merge, now_micros, page, run_status, Made,
};
use graphloom_server_db::models::{
    cancel_reason, rfc3339_from_micros, CancelAction, ClaimedRun, Run, RunStatus,
};
use graphloom_server_db::{DbError, DbResult, Lease, NewRun, RunEventRecord, ThreadOutcome};
use serde_json::{Map, Value};
use sqlx::postgres::{PgArguments, PgPool, PgRow};
use sqlx::types::Json;
use sqlx::{Postgres, Row};
use std::time::Duration;

/// How many candidates one `claim_run` tries before reporting an empty queue (a candidate
/// is passed over when another replica is claiming on its thread at the same moment).
const CLAIM_TRIES: usize = 8;

/// Claimable runs (`$1` = now): pending and due, or running with an expired lease; a
/// pending run waits for every running run of its thread (a dead worker's expired one is
/// taken over first), an expired running run only for live ones. Of a thread's due pending
/// runs only the oldest is claimable, so concurrent claimers spread over threads instead of
/// queueing up on the runs of one.
const CLAIMABLE: &str = "((r.status = 'pending' AND r.due_at <= $1) \
        OR (r.status = 'running' AND r.lease_expires_at < $1)) \
    AND NOT EXISTS (SELECT 1 FROM server_runs o WHERE o.thread_id = r.thread_id \
        AND o.run_id <> r.run_id AND o.status = 'running' \
        AND (r.status = 'pending' OR o.lease_expires_at >= $1)) \
    AND NOT (r.status = 'pending' AND EXISTS (SELECT 1 FROM server_runs p \
        WHERE p.thread_id = r.thread_id AND p.status = 'pending' AND p.due_at <= $1 \
        AND (p.created_at, p.run_id) < (r.created_at, r.run_id)))";

/// Whether the thread has a run queued or running (inside the caller's transaction).
async fn thread_active(tx: &mut sqlx::Transaction<'_, Postgres>, thread_id: &str) -> DbResult<bool> {
    sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM server_runs WHERE thread_id = $1 \
         AND status IN ('pending', 'running'))",
    )
    .bind(thread_id)
    .fetch_one(&mut **tx)
    .await
    .db()
}

pub(super) async fn create(pool: &PgPool, new: &NewRun) -> DbResult<Run> {
    let mut tx = pool.begin().await.db()?;
    let made = match insert(&mut tx, new).await {
        Ok(made) => made,
        Err(e) => {
            // Release the thread's row lock now (a refused `reject` on a busy thread, a
            // conflict): a dropped transaction rolls back only when its connection is next
            // used, and until then claims skip the thread and creations on it wait.
            let _ = tx.rollback().await;
            return Err(e);
        }
    };
    tx.commit().await.db()?;
    Ok(created(&new.run, made))
}

/// Create `new` in `tx` (with its multitask strategy, claimed at once when it asks and can
/// be): what it gave the run. A missing thread or a `reject` on a busy thread
/// fail before anything is written.
pub(super) async fn insert(tx: &mut sqlx::Transaction<'_, Postgres>, new: &NewRun) -> DbResult<Made> {
    let r = &new.run;
    let now = now_micros();
    if let Some(t) = &new.create_thread {
        super::threads::insert(&mut **tx, &new.owner, t, now).await?;
    }
    // Serialise with claims and other creations on this thread.
    let stored: Option<(Json<Value>, String, i64)> = sqlx::query_as(
        "SELECT metadata, owner, next_ordinal FROM server_threads WHERE thread_id = $1 FOR UPDATE",
    )
    .bind(&r.thread_id)
    .fetch_optional(&mut **tx)
    .await
    .db()?;
    let Some((Json(stored), thread_owner, ordinal)) = stored else {
        return Err(DbError::Backend(format!("thread {} not found", r.thread_id)));
    };
    // The creation time after the lock: the thread's runs list in the order of their
    // ordinals.
    let now = now_micros().max(now);
    if new.create_thread.is_some() && thread_owner != new.owner {
        return Err(DbError::Conflict(format!("thread {}", r.thread_id)));
    }
    let metadata = new.thread_metadata.as_ref().map(|m| {
        let mut merged = match stored {
            Value::Object(o) => o,
            _ => Map::new(),
        };
        merge(&mut merged, m);
        merged
    });
    // A statement after the lock (so with the runs committed before it, a replica's too):
    // the newest creation time among the thread's runs, which this run comes after.
    let newest: Option<i64> = sqlx::query_scalar(
        "UPDATE server_threads SET next_ordinal = $1, metadata = COALESCE($2, metadata), \
         updated_at = CASE WHEN $2 IS NULL THEN updated_at ELSE $3 END WHERE thread_id = $4 \
         RETURNING (SELECT MAX(created_at) FROM server_runs WHERE thread_id = $4)",
    )
    .bind(ordinal.saturating_add(1))
    .bind(metadata.as_ref().map(Json))
    .bind(now)
    .bind(&r.thread_id)
    .fetch_one(&mut **tx)
    .await
    .db()?;
    let created_at = creation_time(now, newest);
    if new.reject_if_busy && thread_active(tx, &r.thread_id).await? {
        return Err(DbError::Busy(r.thread_id.clone()));
    }
    if let Some(action) = new.cancel_active {
        let reason = cancel_reason::multitask(action, &r.run_id);
        match action {
            CancelAction::Interrupt => {
                sqlx::query(
                    "UPDATE server_runs SET status = 'interrupted', updated_at = $1, \
                     cancel_reason = COALESCE(cancel_reason, $3) \
                     WHERE thread_id = $2 AND status = 'pending'",
                )
                .bind(now)
                .bind(&r.thread_id)
                .bind(&reason)
                .execute(&mut **tx)
                .await
                .db()?;
            }
            CancelAction::Rollback => {
                sqlx::query("DELETE FROM server_runs WHERE thread_id = $1 AND status = 'pending'")
                    .bind(&r.thread_id)
                    .execute(&mut **tx)
                    .await
                    .db()?;
            }
        }
        sqlx::query(
            "UPDATE server_runs SET cancel_action = $1, updated_at = $2, \
             cancel_reason = COALESCE(cancel_reason, $4) WHERE thread_id = $3 AND status = 'running'",
        )
        .bind(action.as_str())
        .bind(now)
        .bind(&r.thread_id)
        .bind(&reason)
        .execute(&mut **tx)
        .await
        .db()?;
    }
    let due = new.delay.map_or(now, |d| after(now, d));
    // Claimed at once when due and nothing else is queued or running on the thread
    // (whose row is locked: no claim or creation on it runs meanwhile): inserted
    // running, so no pending row is updated and no index entry written twice.
    let mut claim = None;
    if let Some((worker, lease)) = new.claim.as_ref().filter(|_| due <= now) {
        if !thread_active(tx, &r.thread_id).await? {
            claim = Some((worker.as_str(), after(now, *lease)));
        }
    }
    let inserted = sqlx::query(
        "INSERT INTO server_runs (run_id, thread_id, owner, assistant_id, created_at, updated_at, status, \
         metadata, kwargs, multitask_strategy, due_at, worker, lease_expires_at, attempt, ordinal) \
         VALUES ($1, $2, $3, $4, $5, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14) ON CONFLICT (run_id) DO NOTHING",
    )
    .bind(&r.run_id)
    .bind(&r.thread_id)
    .bind(&new.owner)
    .bind(&r.assistant_id)
    .bind(created_at)
    .bind(if claim.is_some() { "running" } else { "pending" })
    .bind(Json(&r.metadata))
    .bind(Json(&r.kwargs))
    .bind(r.multitask_strategy.as_str())
    .bind(due)
    .bind(claim.map(|(w, _)| w))
    .bind(claim.map(|(_, until)| until))
    .bind(i64::from(claim.is_some()))
    .bind(ordinal)
    .execute(&mut **tx)
    .await
    .db()?
    .rows_affected();
    if inserted == 0 {
        return Err(DbError::Conflict(format!("run {}", r.run_id)));
    }
    let claimed = claim.is_some();
    if claimed {
        sqlx::query(
            "UPDATE server_threads SET status = 'busy', updated_at = $1, expires_at = $1 + ttl_us \
             WHERE thread_id = $2",
        )
        .bind(now)
        .bind(&r.thread_id)
        .execute(&mut **tx)
        .await
        .db()?;
    }
    Ok(Made {
        claimed,
        ordinal,
        created_at,
    })
}

pub(super) async fn get(
    pool: &PgPool,
    owner: &str,
    thread_id: Option<&str>,
    run_id: &str,
) -> DbResult<Option<Run>> {
    let row = sqlx::query(&format!(
        "SELECT {} FROM server_runs WHERE run_id = $1 AND owner = $2 \
         AND ($3::text IS NULL OR thread_id = $3)",
        QueuedRun::COLUMNS
    ))
    .bind(run_id)
    .bind(owner)
    .bind(thread_id)
    .fetch_optional(pool)
    .await
    .db()?;
    Ok(one::<QueuedRun>(row)?.map(|q| q.run))
}

pub(super) async fn list(
    pool: &PgPool,
    owner: &str,
    thread_id: &str,
    status: Option<RunStatus>,
    limit: i64,
    offset: i64,
) -> DbResult<Vec<Run>> {
    let (limit, offset) = page(limit, offset);
    // Newest first, along the thread's index (see migration 9's `server_thread_runs`).
    let rows = sqlx::query(&format!(
        "SELECT {} FROM server_thread_runs($1, $2, $3, $4, $5)",
        QueuedRun::COLUMNS
    ))
    .bind(thread_id)
    .bind(owner)
    .bind(status.map(RunStatus::as_str))
    .bind(limit)
    .bind(offset)
    .fetch_all(pool)
    .await
    .db()?;
    Ok(all::<QueuedRun>(&rows)?.into_iter().map(|q| q.run).collect())
}

pub(super) async fn delete(pool: &PgPool, owner: &str, thread_id: &str, run_id: &str) -> DbResult<bool> {
    let n = sqlx::query(
        "WITH gone AS (DELETE FROM server_runs WHERE run_id = $1 AND thread_id = $2 AND owner = $3 \
         RETURNING run_id), ev AS (DELETE FROM server_run_events WHERE run_id IN (SELECT run_id FROM gone)) \
         SELECT COUNT(*) FROM gone",
    )
    .bind(run_id)
    .bind(thread_id)
    .bind(owner)
    .fetch_one(pool)
    .await
    .and_then(|row: PgRow| row.try_get::<i64, _>(0))
    .db()?;
    Ok(n > 0)
}

pub(super) async fn claim(pool: &PgPool, worker: &str, lease: Duration) -> DbResult<Option<ClaimedRun>> {
    // Threads passed over in this call (another claimer holds them).
    let mut passed: Vec<String> = Vec::new();
    for _ in 0..CLAIM_TRIES {
        let mut tx = pool.begin().await.db()?;
        let now = now_micros();
        let picked: Option<(String, String)> = sqlx::query_as(&format!(
            "SELECT r.run_id, r.thread_id FROM server_runs r WHERE {CLAIMABLE} \
             AND r.thread_id <> ALL($2::text[]) \
             ORDER BY r.created_at, r.run_id LIMIT 1 FOR UPDATE OF r SKIP LOCKED"
        ))
        .bind(now)
        .bind(&passed)
        .fetch_optional(&mut *tx)
        .await
        .db()?;
        let Some((run_id, thread_id)) = picked else {
            tx.commit().await.db()?;
            return Ok(None);
        };
        // Another replica claiming on this thread, or a run being created on it: pass.
        let locked: Option<i32> =
            sqlx::query_scalar("SELECT 1 FROM server_threads WHERE thread_id = $1 FOR UPDATE SKIP LOCKED")
                .bind(&thread_id)
                .fetch_optional(&mut *tx)
                .await
                .db()?;
        if locked.is_none() {
            let exists: bool =
                sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM server_threads WHERE thread_id = $1)")
                    .bind(&thread_id)
                    .fetch_one(&mut *tx)
                    .await
                    .db()?;
            // A run whose thread is gone has nothing to serialise with (as on SQLite).
            if exists {
                tx.rollback().await.db()?;
                passed.push(thread_id);
                continue;
            }
        }
        // With the thread locked, a fresh snapshot sees every committed claim on it.
        let still: bool = sqlx::query_scalar(&format!(
            "SELECT EXISTS (SELECT 1 FROM server_runs r WHERE r.run_id = $2 AND {CLAIMABLE})"
        ))
        .bind(now)
        .bind(&run_id)
        .fetch_one(&mut *tx)
        .await
        .db()?;
        if !still {
            tx.rollback().await.db()?;
            passed.push(thread_id);
            continue;
        }
        let row = sqlx::query(&format!(
            "UPDATE server_runs SET status = 'running', worker = $1, lease_expires_at = $2, \
             attempt = attempt + 1, updated_at = $3 WHERE run_id = $4 RETURNING {}",
            QueuedRun::COLUMNS
        ))
        .bind(worker)
        .bind(after(now, lease))
        .bind(now)
        .bind(&run_id)
        .fetch_one(&mut *tx)
        .await
        .db()?;
        let QueuedRun { run, attempt } = QueuedRun::from_row(&row)?;
        sqlx::query(
            "UPDATE server_threads SET status = 'busy', updated_at = $1, expires_at = $1 + ttl_us \
             WHERE thread_id = $2",
        )
        .bind(now)
        .bind(&thread_id)
        .execute(&mut *tx)
        .await
        .db()?;
        tx.commit().await.db()?;
        return Ok(Some(ClaimedRun { run, attempt }));
    }
    Ok(None)
}

pub(super) async fn heartbeat(pool: &PgPool, run_id: &str, worker: &str, lease: Duration) -> DbResult<Lease> {
    let held: Option<Option<String>> = sqlx::query_scalar(
        "UPDATE server_runs SET lease_expires_at = $1 WHERE run_id = $2 AND worker = $3 \
         AND status = 'running' RETURNING cancel_action",
    )
    .bind(after(now_micros(), lease))
    .bind(run_id)
    .bind(worker)
    .fetch_optional(pool)
    .await
    .db()?;
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
            "UPDATE server_runs SET status = $1, worker = NULL, lease_expires_at = NULL, due_at = $2, \
             updated_at = $2 WHERE run_id = $3 AND worker = $4 AND status = 'running'"
        }
        RunStatus::Running => {
            "UPDATE server_runs SET status = $1, updated_at = $2 \
             WHERE run_id = $3 AND worker = $4 AND status = 'running'"
        }
        _ => {
            "UPDATE server_runs SET status = $1, lease_expires_at = NULL, updated_at = $2 \
             WHERE run_id = $3 AND worker = $4 AND status = 'running'"
        }
    }
}

fn finish_query<'q>(
    run_id: &'q str,
    worker: &'q str,
    status: RunStatus,
    now: i64,
) -> sqlx::query::Query<'q, Postgres, PgArguments> {
    sqlx::query(finish_sql(status))
        .bind(status.as_str())
        .bind(now)
        .bind(run_id)
        .bind(worker)
}

pub(super) async fn finish(pool: &PgPool, run_id: &str, worker: &str, status: RunStatus) -> DbResult<bool> {
    let n = finish_query(run_id, worker, status, now_micros())
        .execute(pool)
        .await
        .db()?
        .rows_affected();
    Ok(n > 0)
}

pub(super) async fn finish_with_outcome(
    pool: &PgPool,
    run_id: &str,
    worker: &str,
    status: RunStatus,
    thread_id: &str,
    outcome: &ThreadOutcome,
    events: Vec<RunEventRecord>,
) -> DbResult<bool> {
    let now = now_micros();
    let events = super::events::EventRows::new(events)?;
    let mut tx = pool.begin().await.db()?;
    let n = finish_query(run_id, worker, status, now)
        .execute(&mut *tx)
        .await
        .db()?
        .rows_affected();
    if n == 0 {
        tx.rollback().await.db()?;
        return Ok(false);
    }
    events.insert(&mut *tx, run_id).await?;
    outcome_query(thread_id, outcome, now)
        .execute(&mut *tx)
        .await
        .db()?;
    tx.commit().await.db()?;
    Ok(true)
}

pub(super) async fn cancel(
    pool: &PgPool,
    owner: &str,
    thread_id: Option<&str>,
    run_id: &str,
    action: CancelAction,
    reason: &str,
) -> DbResult<Option<Run>> {
    let now = now_micros();
    let mut tx = pool.begin().await.db()?;
    let row = sqlx::query(&format!(
        "SELECT {} FROM server_runs WHERE run_id = $1 AND owner = $2 \
         AND ($3::text IS NULL OR thread_id = $3) FOR UPDATE",
        QueuedRun::COLUMNS
    ))
    .bind(run_id)
    .bind(owner)
    .bind(thread_id)
    .fetch_optional(&mut *tx)
    .await
    .db()?;
    let Some(QueuedRun { run: mut r, .. }) = one(row)? else {
        return Ok(None);
    };
    match (r.status, action) {
        (RunStatus::Pending, CancelAction::Interrupt) => {
            sqlx::query(
                "UPDATE server_runs SET status = 'interrupted', updated_at = $1, \
                 cancel_reason = COALESCE(cancel_reason, $3) WHERE run_id = $2",
            )
            .bind(now)
            .bind(run_id)
            .bind(reason)
            .execute(&mut *tx)
            .await
            .db()?;
            r.status = RunStatus::Interrupted;
            r.updated_at = rfc3339_from_micros(now);
        }
        (RunStatus::Pending, CancelAction::Rollback) => {
            sqlx::query("DELETE FROM server_runs WHERE run_id = $1")
                .bind(run_id)
                .execute(&mut *tx)
                .await
                .db()?;
            r.status = RunStatus::Interrupted;
            r.updated_at = rfc3339_from_micros(now);
        }
        (RunStatus::Running, _) => {
            sqlx::query(
                "UPDATE server_runs SET cancel_action = $1, updated_at = $2, \
                 cancel_reason = COALESCE(cancel_reason, $4) WHERE run_id = $3",
            )
            .bind(action.as_str())
            .bind(now)
            .bind(run_id)
            .bind(reason)
            .execute(&mut *tx)
            .await
            .db()?;
            r.updated_at = rfc3339_from_micros(now);
        }
        _ => return Ok(Some(r)),
    }
    tx.commit().await.db()?;
    r.cancel_reason.get_or_insert_with(|| reason.to_owned());
    Ok(Some(r))
}

pub(super) async fn queue_depth(pool: &PgPool) -> DbResult<i64> {
    sqlx::query_scalar("SELECT COUNT(*) FROM server_runs WHERE status = 'pending'")
        .fetch_one(pool)
        .await
        .db()
}

pub(super) async fn by_status(pool: &PgPool) -> DbResult<Vec<(RunStatus, i64)>> {
    let rows: Vec<(String, i64)> =
        sqlx::query_as("SELECT status, COUNT(*) FROM server_runs GROUP BY status ORDER BY status")
            .fetch_all(pool)
            .await
            .db()?;
    rows.into_iter().map(|(s, n)| Ok((run_status(&s)?, n))).collect()
}
