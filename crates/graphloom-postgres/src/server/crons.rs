//! Crons: create, read, patch, delete, search; the due ones; firing a tick (its run
//! created and the cron moved on in one transaction that holds the cron's row, taken with
//! `FOR UPDATE SKIP LOCKED`: a replica that finds it held leaves the tick to the holder).

use super::push_page;
use super::rows::{all, one, FromRow, Object, Time};
use super::runs::insert;
use crate::error::ServerResultExt;
use graphloom_server_db::kit::{created, cron_sort_column, now_micros, order_keyword};
use graphloom_server_db::models::{rfc3339_from_micros, Cron};
use graphloom_server_db::{
    CronPatch, CronQuery, CronTick, DbError, DbResult, DueCron, Fired, NewCron, NewRun,
};
use sqlx::postgres::{PgPool, PgRow};
use sqlx::types::Json;
use sqlx::{Postgres, QueryBuilder, Row};

/// A cron row with its owner.
struct CronRow {
    cron: Cron,
    owner: String,
    next_run_us: Option<i64>,
}

impl FromRow for CronRow {
    const COLUMNS: &'static str =
        "cron_id, owner, assistant_id, thread_id, schedule, timezone, payload, metadata, \
         on_run_completed, enabled, end_time, next_run_date, created_at, updated_at";

    fn from_row(row: &PgRow) -> DbResult<Self> {
        let owner: String = row.try_get("owner").db()?;
        let next_run_us: Option<i64> = row.try_get("next_run_date").db()?;
        let payload: Json<serde_json::Value> = row.try_get("payload").db()?;
        Ok(CronRow {
            cron: Cron {
                cron_id: row.try_get("cron_id").db()?,
                assistant_id: row.try_get("assistant_id").db()?,
                thread_id: row.try_get("thread_id").db()?,
                user_id: Some(owner.clone()),
                end_time: row.try_get::<Option<Time>, _>("end_time").db()?.map(|t| t.0),
                schedule: row.try_get("schedule").db()?,
                timezone: row.try_get("timezone").db()?,
                payload: payload.0,
                next_run_date: next_run_us.map(rfc3339_from_micros),
                metadata: row.try_get::<Object, _>("metadata").db()?.0,
                on_run_completed: row.try_get("on_run_completed").db()?,
                enabled: row.try_get("enabled").db()?,
                created_at: row.try_get::<Time, _>("created_at").db()?.0,
                updated_at: row.try_get::<Time, _>("updated_at").db()?.0,
            },
            owner,
            next_run_us,
        })
    }
}

pub(super) async fn create(pool: &PgPool, new: &NewCron) -> DbResult<Cron> {
    let now = now_micros();
    let c = &new.cron;
    let row = sqlx::query(&format!(
        "INSERT INTO server_crons (cron_id, owner, assistant_id, thread_id, schedule, timezone, payload, \
         metadata, on_run_completed, enabled, end_time, next_run_date, created_at, updated_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $13) \
         ON CONFLICT (cron_id) DO NOTHING RETURNING {}",
        CronRow::COLUMNS
    ))
    .bind(&c.cron_id)
    .bind(&new.owner)
    .bind(&c.assistant_id)
    .bind(&c.thread_id)
    .bind(&c.schedule)
    .bind(&c.timezone)
    .bind(Json(&c.payload))
    .bind(Json(&c.metadata))
    .bind(&c.on_run_completed)
    .bind(c.enabled)
    .bind(new.end_time_us)
    .bind(new.next_run_us)
    .bind(now)
    .fetch_optional(pool)
    .await
    .db()?;
    one::<CronRow>(row)?
        .map(|r| r.cron)
        .ok_or_else(|| DbError::Conflict(format!("cron {}", c.cron_id)))
}

pub(super) async fn get(pool: &PgPool, owner: &str, id: &str) -> DbResult<Option<Cron>> {
    let row = sqlx::query(&format!(
        "SELECT {} FROM server_crons WHERE cron_id = $1 AND owner = $2",
        CronRow::COLUMNS
    ))
    .bind(id)
    .bind(owner)
    .fetch_optional(pool)
    .await
    .db()?;
    Ok(one::<CronRow>(row)?.map(|r| r.cron))
}

pub(super) async fn patch(pool: &PgPool, owner: &str, id: &str, patch: &CronPatch) -> DbResult<Option<Cron>> {
    let row = sqlx::query(&format!(
        "UPDATE server_crons SET schedule = COALESCE($3, schedule), \
         timezone = CASE WHEN $4 THEN $5 ELSE timezone END, \
         end_time = CASE WHEN $6 THEN $7 ELSE end_time END, \
         payload = COALESCE($8, payload), metadata = metadata || COALESCE($9, '{{}}'::jsonb), \
         on_run_completed = CASE WHEN $10 THEN $11 ELSE on_run_completed END, \
         enabled = COALESCE($12, enabled), \
         next_run_date = CASE WHEN $13 THEN $14 ELSE next_run_date END, updated_at = $15 \
         WHERE cron_id = $1 AND owner = $2 RETURNING {}",
        CronRow::COLUMNS
    ))
    .bind(id)
    .bind(owner)
    .bind(&patch.schedule)
    .bind(patch.timezone.is_some())
    .bind(patch.timezone.clone().flatten())
    .bind(patch.end_time_us.is_some())
    .bind(patch.end_time_us.flatten())
    .bind(patch.payload.as_ref().map(Json))
    .bind(patch.metadata.as_ref().map(Json))
    .bind(patch.on_run_completed.is_some())
    .bind(patch.on_run_completed.clone().flatten())
    .bind(patch.enabled)
    .bind(patch.next_run_us.is_some())
    .bind(patch.next_run_us.flatten())
    .bind(now_micros())
    .fetch_optional(pool)
    .await
    .db()?;
    Ok(one::<CronRow>(row)?.map(|r| r.cron))
}

pub(super) async fn delete(pool: &PgPool, owner: &str, id: &str) -> DbResult<bool> {
    let done = sqlx::query("DELETE FROM server_crons WHERE cron_id = $1 AND owner = $2")
        .bind(id)
        .bind(owner)
        .execute(pool)
        .await
        .db()?;
    Ok(done.rows_affected() > 0)
}

/// The WHERE clause of a cron search.
fn push_filters<'a>(qb: &mut QueryBuilder<'a, Postgres>, owner: &'a str, q: &'a CronQuery) {
    qb.push(" WHERE owner = ").push_bind(owner);
    if let Some(a) = &q.assistant_id {
        qb.push(" AND assistant_id = ").push_bind(a);
    }
    if let Some(t) = &q.thread_id {
        qb.push(" AND thread_id = ").push_bind(t);
    }
    if let Some(e) = q.enabled {
        qb.push(" AND enabled = ").push_bind(e);
    }
    if !q.metadata.is_empty() {
        qb.push(" AND metadata @> ").push_bind(Json(&q.metadata));
    }
}

pub(super) async fn search(pool: &PgPool, owner: &str, q: &CronQuery) -> DbResult<(Vec<Cron>, i64)> {
    let col = cron_sort_column(q.sort_by.as_deref());
    let ord = order_keyword(q.sort_order);
    let mut qb = QueryBuilder::new(format!("SELECT {} FROM server_crons", CronRow::COLUMNS));
    push_filters(&mut qb, owner, q);
    qb.push(format!(" ORDER BY {col} {ord}, cron_id {ord}"));
    push_page(&mut qb, q.limit, q.offset);
    let rows = qb.build().fetch_all(pool).await.db()?;
    let page: Vec<Cron> = all::<CronRow>(&rows)?.into_iter().map(|r| r.cron).collect();
    let mut count = QueryBuilder::new("SELECT COUNT(*) FROM server_crons");
    push_filters(&mut count, owner, q);
    let total: i64 = count.build_query_scalar().fetch_one(pool).await.db()?;
    Ok((page, total))
}

pub(super) async fn due(pool: &PgPool, now: i64, limit: i64) -> DbResult<Vec<DueCron>> {
    let rows = sqlx::query(&format!(
        "SELECT {} FROM server_crons WHERE enabled AND next_run_date IS NOT NULL AND next_run_date <= $1 \
         ORDER BY next_run_date, cron_id LIMIT $2",
        CronRow::COLUMNS
    ))
    .bind(now)
    .bind(limit.max(1))
    .fetch_all(pool)
    .await
    .db()?;
    Ok(all::<CronRow>(&rows)?
        .into_iter()
        .filter_map(|r| {
            r.next_run_us.map(|due_us| DueCron {
                cron: r.cron,
                owner: r.owner,
                due_us,
            })
        })
        .collect())
}

pub(super) async fn fire(pool: &PgPool, tick: &CronTick, run: Option<&NewRun>) -> DbResult<Fired> {
    let mut tx = pool.begin().await.db()?;
    // Held by another replica firing it: that one fires this tick.
    let next: Option<Option<i64>> = sqlx::query_scalar(
        "SELECT next_run_date FROM server_crons WHERE cron_id = $1 AND enabled FOR UPDATE SKIP LOCKED",
    )
    .bind(&tick.cron_id)
    .fetch_optional(&mut *tx)
    .await
    .db()?;
    // Every early end rolls back at once: a dropped transaction's rollback waits for its
    // connection's next use, and would hold the cron's row lock until then.
    if next.flatten() != Some(tick.due_us) {
        tx.rollback().await.db()?;
        return Ok(Fired::Taken);
    }
    let mut made = None;
    if let Some(new) = run {
        // A run that makes its thread (a stateless cron's) has none to find.
        let exists: Option<i32> = if new.create_thread.is_some() {
            Some(1)
        } else {
            sqlx::query_scalar("SELECT 1 FROM server_threads WHERE thread_id = $1")
                .bind(&new.run.thread_id)
                .fetch_optional(&mut *tx)
                .await
                .db()?
        };
        if exists.is_none() {
            tx.rollback().await.db()?;
            return Ok(Fired::ThreadGone);
        }
        match insert(&mut tx, new).await {
            Ok(gave) => made = Some(created(&new.run, gave)),
            Err(e) => {
                tx.rollback().await.db()?;
                return match e {
                    DbError::Busy(_) => Ok(Fired::Busy),
                    e => Err(e),
                };
            }
        }
    }
    sqlx::query("UPDATE server_crons SET next_run_date = $1, updated_at = $2 WHERE cron_id = $3")
        .bind(tick.next_us)
        .bind(now_micros())
        .bind(&tick.cron_id)
        .execute(&mut *tx)
        .await
        .db()?;
    tx.commit().await.db()?;
    Ok(made.map_or(Fired::Skipped, Fired::Run))
}
