//! Threads: create, read, patch, delete, search; the outcome of their runs; expiry.

use super::push_page;
use super::rows::{all, one, FromRow};
use crate::error::ServerResultExt;
use graphloom_server_db::kit::{
    merge, now_micros, order_keyword, page, thread_sort_column, ttl_micros, ttl_value,
};
use graphloom_server_db::models::{rfc3339_from_micros, Thread, ThreadStatus};
use graphloom_server_db::{DbError, DbResult, ThreadOutcome, ThreadQuery};
use serde_json::{Map, Value};
use sqlx::postgres::{PgArguments, PgPool};
use sqlx::types::Json;
use sqlx::{Postgres, QueryBuilder};

/// An optional JSON value as bound: SQL NULL for None and for JSON `null`.
fn opt_bind(v: Option<&Value>) -> Option<Json<&Value>> {
    v.filter(|v| !v.is_null()).map(Json)
}

pub(super) async fn create(pool: &PgPool, owner: &str, t: &Thread) -> DbResult<Thread> {
    let now = now_micros();
    let ttl = ttl_value(t.ttl.as_ref());
    if !insert(pool, owner, t, now).await? {
        return Err(DbError::Conflict(format!("thread {}", t.thread_id)));
    }
    let at = rfc3339_from_micros(now);
    Ok(Thread {
        created_at: at.clone(),
        updated_at: at.clone(),
        state_updated_at: at,
        error: t.error.clone().filter(|e| !e.is_null()),
        ttl: ttl.cloned(),
        ..t.clone()
    })
}

/// Insert thread `t` of `owner` at `now` unless one has its id: whether it was inserted.
pub(super) async fn insert<'e>(
    on: impl sqlx::PgExecutor<'e>,
    owner: &str,
    t: &Thread,
    now: i64,
) -> DbResult<bool> {
    let ttl = ttl_value(t.ttl.as_ref());
    let ttl_us = ttl_micros(ttl);
    let inserted = sqlx::query(
        "INSERT INTO server_threads (thread_id, owner, created_at, updated_at, state_updated_at, \
         metadata, config, status, state_values, interrupts, error, ttl, ttl_us, expires_at) \
         VALUES ($1, $2, $3, $3, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) \
         ON CONFLICT (thread_id) DO NOTHING",
    )
    .bind(&t.thread_id)
    .bind(owner)
    .bind(now)
    .bind(Json(&t.metadata))
    .bind(Json(&t.config))
    .bind(t.status.as_str())
    .bind(Json(&t.values))
    .bind(Json(&t.interrupts))
    .bind(opt_bind(t.error.as_ref()))
    .bind(ttl.map(Json))
    .bind(ttl_us)
    .bind(ttl_us.map(|us| now.saturating_add(us)))
    .execute(on)
    .await
    .db()?
    .rows_affected();
    Ok(inserted > 0)
}

pub(super) async fn get(pool: &PgPool, owner: &str, id: &str) -> DbResult<Option<Thread>> {
    by_id(pool, owner, id, Thread::COLUMNS).await
}

/// [`get`] without the thread's values (`Null`; the column is not read).
pub(super) async fn head(pool: &PgPool, owner: &str, id: &str) -> DbResult<Option<Thread>> {
    let columns = Thread::COLUMNS.replace("state_values", "'null'::jsonb AS state_values");
    by_id(pool, owner, id, &columns).await
}

/// Thread `id` of `owner`, read as `columns` (a thread's).
async fn by_id(pool: &PgPool, owner: &str, id: &str, columns: &str) -> DbResult<Option<Thread>> {
    let row = sqlx::query(&format!(
        "SELECT {columns} FROM server_threads WHERE thread_id = $1 AND owner = $2"
    ))
    .bind(id)
    .bind(owner)
    .fetch_optional(pool)
    .await
    .db()?;
    one(row)
}

pub(super) async fn patch(
    pool: &PgPool,
    owner: &str,
    id: &str,
    metadata: Option<&Map<String, Value>>,
    ttl: Option<Value>,
) -> DbResult<Option<Thread>> {
    let now = now_micros();
    let mut tx = pool.begin().await.db()?;
    let row = sqlx::query(&format!(
        "SELECT {} FROM server_threads WHERE thread_id = $1 AND owner = $2 FOR UPDATE",
        Thread::COLUMNS
    ))
    .bind(id)
    .bind(owner)
    .fetch_optional(&mut *tx)
    .await
    .db()?;
    let Some(mut t) = one::<Thread>(row)? else {
        return Ok(None);
    };
    if let Some(m) = metadata {
        merge(&mut t.metadata, m);
    }
    if let Some(ttl) = ttl {
        t.ttl = ttl_value(Some(&ttl)).cloned();
    }
    let ttl_us = ttl_micros(t.ttl.as_ref());
    sqlx::query(
        "UPDATE server_threads SET metadata = $1, ttl = $2, ttl_us = $3, expires_at = $4, updated_at = $5 \
         WHERE thread_id = $6",
    )
    .bind(Json(&t.metadata))
    .bind(t.ttl.as_ref().map(Json))
    .bind(ttl_us)
    .bind(ttl_us.map(|us| now.saturating_add(us)))
    .bind(now)
    .bind(id)
    .execute(&mut *tx)
    .await
    .db()?;
    tx.commit().await.db()?;
    t.updated_at = rfc3339_from_micros(now);
    Ok(Some(t))
}

/// The UPDATE that records a run's outcome on its thread.
const OUTCOME_SQL: &str =
    "UPDATE server_threads SET status = $1, state_values = COALESCE($2, state_values), \
    interrupts = $3, error = $4, state_updated_at = $5, updated_at = $5, \
    expires_at = $5 + ttl_us WHERE thread_id = $6";

/// The statement recording `outcome` on thread `id` at `now`.
pub(super) fn outcome_query<'q>(
    id: &'q str,
    outcome: &'q ThreadOutcome,
    now: i64,
) -> sqlx::query::Query<'q, Postgres, PgArguments> {
    sqlx::query(OUTCOME_SQL)
        .bind(outcome.status.as_str())
        .bind(outcome.values.as_ref().map(Json))
        .bind(Json(&outcome.interrupts))
        .bind(opt_bind(outcome.error.as_ref()))
        .bind(now)
        .bind(id)
}

pub(super) async fn set_outcome(pool: &PgPool, id: &str, outcome: &ThreadOutcome) -> DbResult<()> {
    outcome_query(id, outcome, now_micros())
        .execute(pool)
        .await
        .db()?;
    Ok(())
}

pub(super) async fn set_status(pool: &PgPool, id: &str, status: ThreadStatus) -> DbResult<()> {
    sqlx::query(
        "UPDATE server_threads SET status = $1, updated_at = $2, expires_at = $2 + ttl_us WHERE thread_id = $3",
    )
    .bind(status.as_str())
    .bind(now_micros())
    .bind(id)
    .execute(pool)
    .await
    .db()?;
    Ok(())
}

/// Delete a thread (of `owner`, or of anyone) and its runs.
pub(super) async fn delete(pool: &PgPool, owner: Option<&str>, id: &str) -> DbResult<bool> {
    let mut tx = pool.begin().await.db()?;
    // The thread's row lock first, as claims and `create_run` take it.
    let found: Option<i32> = sqlx::query_scalar(
        "SELECT 1 FROM server_threads WHERE thread_id = $1 AND ($2::text IS NULL OR owner = $2) FOR UPDATE",
    )
    .bind(id)
    .bind(owner)
    .fetch_optional(&mut *tx)
    .await
    .db()?;
    if found.is_none() {
        return Ok(false);
    }
    sqlx::query(
        "DELETE FROM server_run_events WHERE run_id IN (SELECT run_id FROM server_runs WHERE thread_id = $1)",
    )
    .bind(id)
    .execute(&mut *tx)
    .await
    .db()?;
    sqlx::query("DELETE FROM server_runs WHERE thread_id = $1")
        .bind(id)
        .execute(&mut *tx)
        .await
        .db()?;
    sqlx::query("DELETE FROM server_threads WHERE thread_id = $1")
        .bind(id)
        .execute(&mut *tx)
        .await
        .db()?;
    tx.commit().await.db()?;
    Ok(true)
}

pub(super) async fn search(pool: &PgPool, owner: &str, q: &ThreadQuery) -> DbResult<(Vec<Thread>, i64)> {
    let col = thread_sort_column(q.sort_by.as_deref());
    let ord = order_keyword(q.sort_order);
    let mut qb = QueryBuilder::new(format!("SELECT {} FROM server_threads", Thread::COLUMNS));
    push_filters(&mut qb, owner, q);
    qb.push(format!(" ORDER BY {col} {ord}, thread_id {ord}"));
    push_page(&mut qb, q.limit, q.offset);
    let rows = qb.build().fetch_all(pool).await.db()?;
    let found = all(&rows)?;
    let mut count = QueryBuilder::new("SELECT COUNT(*) FROM server_threads");
    push_filters(&mut count, owner, q);
    let total: i64 = count.build_query_scalar().fetch_one(pool).await.db()?;
    Ok((found, total))
}

pub(super) async fn expired(pool: &PgPool, limit: i64) -> DbResult<Vec<String>> {
    let (limit, _) = page(limit, 0);
    sqlx::query_scalar(
        "SELECT thread_id FROM server_threads WHERE expires_at IS NOT NULL AND expires_at <= $1 \
         AND status <> 'busy' ORDER BY expires_at, thread_id LIMIT $2",
    )
    .bind(now_micros())
    .bind(limit)
    .fetch_all(pool)
    .await
    .db()
}

fn push_filters(qb: &mut QueryBuilder<'_, Postgres>, owner: &str, q: &ThreadQuery) {
    qb.push(" WHERE owner = ").push_bind(owner.to_owned());
    if let Some(ids) = &q.ids {
        qb.push(" AND thread_id = ANY(").push_bind(ids.clone()).push(")");
    }
    if let Some(s) = q.status {
        qb.push(" AND status = ").push_bind(s.as_str());
    }
    if !q.metadata.is_empty() {
        qb.push(" AND metadata @> ")
            .push_bind(Json(Value::Object(q.metadata.clone())));
    }
    if !q.values.is_empty() {
        qb.push(" AND state_values @> ")
            .push_bind(Json(Value::Object(q.values.clone())));
    }
}
