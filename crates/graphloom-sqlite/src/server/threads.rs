//! Threads: create, read, patch, delete, search; the outcome of their runs; expiry.

use super::{exec, push_page, text, SqliteDb};
use crate::error::ServerResultExt;
use crate::row::{query_all_once, query_one, FromRow};
use graphloom_server_db::kit::{
    json_contains, map_contains, merge, now_micros, order_keyword, page, slice_page, thread_sort_column,
    ttl_micros, ttl_value,
};
use graphloom_server_db::models::{rfc3339_from_micros, Thread, ThreadStatus};
use graphloom_server_db::{DbError, DbResult, ThreadOutcome, ThreadQuery};
use rusqlite::types::Value as SqlValue;
use rusqlite::{params, Connection};
use serde_json::{Map, Value};

/// A new thread's row, encoded for [`NewThreadRow::insert`].
pub(super) struct NewThreadRow {
    id: String,
    owner: String,
    metadata: String,
    config: String,
    status: &'static str,
    values: String,
    interrupts: String,
    error: Option<String>,
    ttl: Option<String>,
    ttl_us: Option<i64>,
}

impl NewThreadRow {
    pub(super) fn of(owner: &str, t: &Thread) -> DbResult<Self> {
        let ttl = ttl_value(t.ttl.as_ref());
        Ok(Self {
            id: t.thread_id.clone(),
            owner: owner.to_owned(),
            metadata: text(&t.metadata)?,
            config: text(&t.config)?,
            status: t.status.as_str(),
            values: text(&t.values)?,
            interrupts: text(&t.interrupts)?,
            error: t.error.as_ref().filter(|e| !e.is_null()).map(text).transpose()?,
            ttl: ttl.map(text).transpose()?,
            ttl_us: ttl_micros(ttl),
        })
    }

    /// Insert the thread at `now` unless one has its id: whether it was inserted.
    pub(super) fn insert(&self, c: &Connection, now: i64) -> DbResult<bool> {
        let n = exec(
            c,
            "INSERT INTO server_threads (thread_id, owner, created_at, updated_at, state_updated_at, \
             metadata, config, status, state_values, interrupts, error, ttl, ttl_us, expires_at) \
             VALUES (?1, ?2, ?3, ?3, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12) \
             ON CONFLICT (thread_id) DO NOTHING",
            params![
                self.id,
                self.owner,
                now,
                self.metadata,
                self.config,
                self.status,
                self.values,
                self.interrupts,
                self.error,
                self.ttl,
                self.ttl_us,
                self.ttl_us.map(|us| now.saturating_add(us))
            ],
        )?;
        Ok(n > 0)
    }
}

pub(super) async fn create(db: &SqliteDb, owner: &str, t: &Thread) -> DbResult<Thread> {
    let now = now_micros();
    let ttl = ttl_value(t.ttl.as_ref());
    let row = NewThreadRow::of(owner, t)?;
    let inserted = db.write(move |c| row.insert(c, now)).await?;
    if !inserted {
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

/// The SELECT of a thread of an owner by id, as `columns` (a thread's).
fn by_id(columns: &str) -> String {
    format!("SELECT {columns} FROM server_threads WHERE thread_id = ?1 AND owner = ?2")
}

pub(super) fn get(db: &SqliteDb, owner: &str, id: &str) -> DbResult<Option<Thread>> {
    db.read(|c| query_one(c, &by_id(Thread::COLUMNS), params![id, owner]))
}

/// [`get`] without the thread's values (`Null`; the column is not decoded, though SQLite
/// still walks a large one's overflow pages to reach the columns after it).
pub(super) fn head(db: &SqliteDb, owner: &str, id: &str) -> DbResult<Option<Thread>> {
    let sql = by_id(&Thread::COLUMNS.replace("state_values", "'null' AS state_values"));
    db.read(|c| query_one(c, &sql, params![id, owner]))
}

pub(super) async fn patch(
    db: &SqliteDb,
    owner: &str,
    id: &str,
    metadata: Option<&Map<String, Value>>,
    ttl: Option<Value>,
) -> DbResult<Option<Thread>> {
    let now = now_micros();
    let (owner, id, metadata) = (owner.to_owned(), id.to_owned(), metadata.cloned());
    db.write(move |c| {
        let Some(mut t) = query_one::<Thread>(c, &by_id(Thread::COLUMNS), params![id, owner])? else {
            return Ok(None);
        };
        if let Some(m) = &metadata {
            merge(&mut t.metadata, m);
        }
        if let Some(ttl) = &ttl {
            t.ttl = ttl_value(Some(ttl)).cloned();
        }
        let ttl_us = ttl_micros(t.ttl.as_ref());
        exec(
            c,
            "UPDATE server_threads SET metadata = ?1, ttl = ?2, ttl_us = ?3, expires_at = ?4, updated_at = ?5 \
             WHERE thread_id = ?6",
            params![
                text(&t.metadata)?,
                t.ttl.as_ref().map(text).transpose()?,
                ttl_us,
                ttl_us.map(|us| now.saturating_add(us)),
                now,
                id
            ],
        )?;
        t.updated_at = rfc3339_from_micros(now);
        Ok(Some(t))
    })
    .await
}

/// A thread outcome encoded for [`OUTCOME_SQL`].
pub(super) struct OutcomeRow {
    status: &'static str,
    values: Option<String>,
    interrupts: String,
    error: Option<String>,
}

/// The UPDATE that records a run's outcome on its thread.
const OUTCOME_SQL: &str =
    "UPDATE server_threads SET status = ?1, state_values = COALESCE(?2, state_values), \
    interrupts = ?3, error = ?4, state_updated_at = ?5, updated_at = ?5, \
    expires_at = CASE WHEN ttl_us IS NULL THEN NULL ELSE ?5 + ttl_us END WHERE thread_id = ?6";

impl OutcomeRow {
    /// `outcome`, encoded.
    pub(super) fn new(outcome: &ThreadOutcome) -> DbResult<Self> {
        Ok(Self {
            status: outcome.status.as_str(),
            values: outcome.values.as_ref().map(text).transpose()?,
            interrupts: text(&outcome.interrupts)?,
            error: outcome
                .error
                .as_ref()
                .filter(|e| !e.is_null())
                .map(text)
                .transpose()?,
        })
    }

    /// Record it on thread `thread_id` at `now`.
    pub(super) fn write(&self, c: &Connection, thread_id: &str, now: i64) -> DbResult<()> {
        exec(
            c,
            OUTCOME_SQL,
            params![
                self.status,
                self.values,
                self.interrupts,
                self.error,
                now,
                thread_id
            ],
        )?;
        Ok(())
    }
}

pub(super) async fn set_outcome(db: &SqliteDb, id: &str, outcome: &ThreadOutcome) -> DbResult<()> {
    let (row, id) = (OutcomeRow::new(outcome)?, id.to_owned());
    db.write(move |c| row.write(c, &id, now_micros())).await
}

pub(super) async fn set_status(db: &SqliteDb, id: &str, status: ThreadStatus) -> DbResult<()> {
    let id = id.to_owned();
    db.write(move |c| {
        exec(
            c,
            "UPDATE server_threads SET status = ?1, updated_at = ?2, \
             expires_at = CASE WHEN ttl_us IS NULL THEN NULL ELSE ?2 + ttl_us END WHERE thread_id = ?3",
            params![status.as_str(), now_micros(), id],
        )?;
        Ok(())
    })
    .await
}

/// Delete a thread (of `owner`, or of anyone) and its runs.
pub(super) async fn delete(db: &SqliteDb, owner: Option<&str>, id: &str) -> DbResult<bool> {
    let (owner, id) = (owner.map(str::to_owned), id.to_owned());
    db.write(move |c| {
        let n = exec(
            c,
            "DELETE FROM server_threads WHERE thread_id = ?1 AND (?2 IS NULL OR owner = ?2)",
            params![id, owner],
        )?;
        if n > 0 {
            exec(
                c,
                "DELETE FROM server_run_event_batches WHERE run_id IN \
                 (SELECT run_id FROM server_runs WHERE thread_id = ?1)",
                params![id],
            )?;
            exec(c, "DELETE FROM server_runs WHERE thread_id = ?1", params![id])?;
        }
        Ok(n > 0)
    })
    .await
}

/// The WHERE clause of a thread search (metadata and values are matched in Rust).
fn filters(owner: &str, q: &ThreadQuery) -> (String, Vec<SqlValue>) {
    let mut sql = String::from(" WHERE owner = ?");
    let mut params = vec![SqlValue::Text(owner.to_owned())];
    if let Some(ids) = &q.ids {
        sql.push_str(" AND thread_id IN (");
        for (i, id) in ids.iter().enumerate() {
            sql.push_str(if i == 0 { "?" } else { ", ?" });
            params.push(SqlValue::Text(id.clone()));
        }
        sql.push(')');
    }
    if let Some(s) = q.status {
        sql.push_str(" AND status = ?");
        params.push(SqlValue::Text(s.as_str().to_owned()));
    }
    (sql, params)
}

pub(super) async fn search(db: &SqliteDb, owner: &str, q: &ThreadQuery) -> DbResult<(Vec<Thread>, i64)> {
    if q.ids.as_ref().is_some_and(Vec::is_empty) {
        return Ok((Vec::new(), 0));
    }
    let col = thread_sort_column(q.sort_by.as_deref());
    let ord = order_keyword(q.sort_order);
    let (filter, params) = filters(owner, q);
    let mut sql = format!(
        "SELECT {} FROM server_threads{filter} ORDER BY {col} {ord}, thread_id {ord}",
        Thread::COLUMNS
    );
    let q = q.clone();
    db.scan(move |c| {
        if q.metadata.is_empty() && q.values.is_empty() {
            let mut page_params = params.clone();
            push_page(&mut sql, &mut page_params, q.limit, q.offset);
            let page = query_all_once(c, &sql, rusqlite::params_from_iter(page_params))?;
            let total: i64 = c
                .prepare(&format!("SELECT COUNT(*) FROM server_threads{filter}"))
                .db()?
                .query_row(rusqlite::params_from_iter(params), |r| r.get(0))
                .db()?;
            return Ok((page, total));
        }
        let values = Value::Object(q.values.clone());
        let all: Vec<Thread> = query_all_once::<Thread>(c, &sql, rusqlite::params_from_iter(params))?
            .into_iter()
            .filter(|t| {
                map_contains(&t.metadata, &q.metadata)
                    && (q.values.is_empty() || json_contains(&t.values, &values))
            })
            .collect();
        let total = all.len() as i64;
        Ok((slice_page(all, q.limit, q.offset), total))
    })
    .await
}

pub(super) async fn expired(db: &SqliteDb, limit: i64) -> DbResult<Vec<String>> {
    let (limit, _) = page(limit, 0);
    db.scan(move |c| {
        c.prepare_cached(
            "SELECT thread_id FROM server_threads WHERE expires_at IS NOT NULL AND expires_at <= ?1 \
             AND status <> 'busy' ORDER BY expires_at, thread_id LIMIT ?2",
        )
        .db()?
        .query_map(params![now_micros(), limit.unwrap_or(-1)], |r| r.get(0))
        .db()?
        .collect::<rusqlite::Result<Vec<String>>>()
        .db()
    })
    .await
}
