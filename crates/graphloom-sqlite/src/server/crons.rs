//! Crons: create, read, patch, delete, search; the due ones; firing a tick (its run
//! created and the cron moved on in one writer transaction).

use super::rows::{Object, Time};
use super::runs::insert_op;
use super::{exec, push_page, text, SqliteDb};
use crate::error::ServerResultExt;
use crate::row::{query_all_once, query_one, FromRow};
use graphloom_server_db::kit::created;
use graphloom_server_db::kit::{
    cron_sort_column, map_contains, merge, now_micros, order_keyword, slice_page,
};
use graphloom_server_db::models::{rfc3339_from_micros, Cron};
use graphloom_server_db::{
    CronPatch, CronQuery, CronTick, DbError, DbResult, DueCron, Fired, NewCron, NewRun,
};
use rusqlite::types::Value as SqlValue;
use rusqlite::{params, Connection, OptionalExtension, Row};

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
    type Error = DbError;

    fn from_row(row: &Row<'_>) -> DbResult<Self> {
        let owner: String = row.get("owner").db()?;
        let next_run_us: Option<i64> = row.get("next_run_date").db()?;
        Ok(CronRow {
            cron: Cron {
                cron_id: row.get("cron_id").db()?,
                assistant_id: row.get("assistant_id").db()?,
                thread_id: row.get("thread_id").db()?,
                user_id: Some(owner.clone()),
                end_time: row.get::<_, Option<Time>>("end_time").db()?.map(|t| t.0),
                schedule: row.get("schedule").db()?,
                timezone: row.get("timezone").db()?,
                payload: row.get("payload").db()?,
                next_run_date: next_run_us.map(rfc3339_from_micros),
                metadata: row.get::<_, Object>("metadata").db()?.0,
                on_run_completed: row.get("on_run_completed").db()?,
                enabled: row.get("enabled").db()?,
                created_at: row.get::<_, Time>("created_at").db()?.0,
                updated_at: row.get::<_, Time>("updated_at").db()?.0,
            },
            owner,
            next_run_us,
        })
    }
}

/// The SELECT of a cron of an owner by id.
fn by_id() -> String {
    format!(
        "SELECT {} FROM server_crons WHERE cron_id = ?1 AND owner = ?2",
        CronRow::COLUMNS
    )
}

pub(super) async fn create(db: &SqliteDb, new: &NewCron) -> DbResult<Cron> {
    let now = now_micros();
    let c = &new.cron;
    let row = (
        c.cron_id.clone(),
        new.owner.clone(),
        c.assistant_id.clone(),
        c.thread_id.clone(),
        c.schedule.clone(),
        c.timezone.clone(),
        text(&c.payload)?,
        text(&c.metadata)?,
        c.on_run_completed.clone(),
        c.enabled,
        new.end_time_us,
        new.next_run_us,
    );
    let id = c.cron_id.clone();
    let (owner, sql) = (new.owner.clone(), by_id());
    let stored = db
        .write(move |conn| {
            let (cron_id, owner_col, assistant, thread, schedule, tz, payload, metadata, orc, enabled, end, next) =
                &row;
            let inserted = exec(
                conn,
                "INSERT INTO server_crons (cron_id, owner, assistant_id, thread_id, schedule, timezone, payload, \
                 metadata, on_run_completed, enabled, end_time, next_run_date, created_at, updated_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?13) \
                 ON CONFLICT (cron_id) DO NOTHING",
                params![
                    cron_id, owner_col, assistant, thread, schedule, tz, payload, metadata, orc, enabled, end, next,
                    now
                ],
            )?;
            if inserted == 0 {
                return Err(DbError::Conflict(format!("cron {cron_id}")));
            }
            query_one::<CronRow>(conn, &sql, params![id, owner])
        })
        .await?;
    stored
        .map(|r| r.cron)
        .ok_or_else(|| DbError::Backend("a cron just created cannot be read".into()))
}

pub(super) fn get(db: &SqliteDb, owner: &str, id: &str) -> DbResult<Option<Cron>> {
    Ok(db
        .read(|c| query_one::<CronRow>(c, &by_id(), params![id, owner]))?
        .map(|r| r.cron))
}

pub(super) async fn patch(db: &SqliteDb, owner: &str, id: &str, patch: &CronPatch) -> DbResult<Option<Cron>> {
    let now = now_micros();
    let (owner, id, patch) = (owner.to_owned(), id.to_owned(), patch.clone());
    let payload = patch.payload.as_ref().map(text).transpose()?;
    db.write(move |c| {
        let Some(mut row) = query_one::<CronRow>(c, &by_id(), params![id, owner])? else {
            return Ok(None);
        };
        if let Some(m) = &patch.metadata {
            merge(&mut row.cron.metadata, m);
        }
        exec(
            c,
            "UPDATE server_crons SET schedule = COALESCE(?1, schedule), \
             timezone = CASE WHEN ?2 THEN ?3 ELSE timezone END, \
             end_time = CASE WHEN ?4 THEN ?5 ELSE end_time END, \
             payload = COALESCE(?6, payload), metadata = ?7, \
             on_run_completed = CASE WHEN ?8 THEN ?9 ELSE on_run_completed END, \
             enabled = COALESCE(?10, enabled), \
             next_run_date = CASE WHEN ?11 THEN ?12 ELSE next_run_date END, updated_at = ?13 \
             WHERE cron_id = ?14",
            params![
                patch.schedule,
                patch.timezone.is_some(),
                patch.timezone.clone().flatten(),
                patch.end_time_us.is_some(),
                patch.end_time_us.flatten(),
                payload,
                text(&row.cron.metadata)?,
                patch.on_run_completed.is_some(),
                patch.on_run_completed.clone().flatten(),
                patch.enabled,
                patch.next_run_us.is_some(),
                patch.next_run_us.flatten(),
                now,
                id
            ],
        )?;
        Ok(query_one::<CronRow>(c, &by_id(), params![id, owner])?.map(|r| r.cron))
    })
    .await
}

pub(super) async fn delete(db: &SqliteDb, owner: &str, id: &str) -> DbResult<bool> {
    let (owner, id) = (owner.to_owned(), id.to_owned());
    db.write(move |c| {
        Ok(exec(
            c,
            "DELETE FROM server_crons WHERE cron_id = ?1 AND owner = ?2",
            params![id, owner],
        )? > 0)
    })
    .await
}

pub(super) async fn search(db: &SqliteDb, owner: &str, q: &CronQuery) -> DbResult<(Vec<Cron>, i64)> {
    let mut filter = String::from(" WHERE owner = ?");
    let mut params = vec![SqlValue::Text(owner.to_owned())];
    if let Some(a) = &q.assistant_id {
        filter.push_str(" AND assistant_id = ?");
        params.push(SqlValue::Text(a.clone()));
    }
    if let Some(t) = &q.thread_id {
        filter.push_str(" AND thread_id = ?");
        params.push(SqlValue::Text(t.clone()));
    }
    if let Some(e) = q.enabled {
        filter.push_str(" AND enabled = ?");
        params.push(SqlValue::Integer(i64::from(e)));
    }
    let col = cron_sort_column(q.sort_by.as_deref());
    let ord = order_keyword(q.sort_order);
    let mut sql = format!(
        "SELECT {} FROM server_crons{filter} ORDER BY {col} {ord}, cron_id {ord}",
        CronRow::COLUMNS
    );
    let q = q.clone();
    db.scan(move |c| {
        if q.metadata.is_empty() {
            let mut page_params = params.clone();
            push_page(&mut sql, &mut page_params, q.limit, q.offset);
            let page = query_all_once::<CronRow>(c, &sql, rusqlite::params_from_iter(page_params))?;
            let total: i64 = c
                .prepare(&format!("SELECT COUNT(*) FROM server_crons{filter}"))
                .db()?
                .query_row(rusqlite::params_from_iter(params), |r| r.get(0))
                .db()?;
            return Ok((page.into_iter().map(|r| r.cron).collect(), total));
        }
        let all: Vec<Cron> = query_all_once::<CronRow>(c, &sql, rusqlite::params_from_iter(params))?
            .into_iter()
            .map(|r| r.cron)
            .filter(|cron| map_contains(&cron.metadata, &q.metadata))
            .collect();
        let total = all.len() as i64;
        Ok((slice_page(all, q.limit, q.offset), total))
    })
    .await
}

pub(super) async fn due(db: &SqliteDb, now: i64, limit: i64) -> DbResult<Vec<DueCron>> {
    let sql = format!(
        "SELECT {} FROM server_crons WHERE enabled = 1 AND next_run_date IS NOT NULL AND next_run_date <= ?1 \
         ORDER BY next_run_date, cron_id LIMIT ?2",
        CronRow::COLUMNS
    );
    let rows = db
        .scan(move |c| query_all_once::<CronRow>(c, &sql, params![now, limit.max(1)]))
        .await?;
    Ok(rows
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

/// Whether the cron's next tick is still `due` (and it is enabled).
fn still_due(c: &Connection, tick: &CronTick) -> DbResult<bool> {
    let next: Option<Option<i64>> = c
        .prepare_cached("SELECT next_run_date FROM server_crons WHERE cron_id = ?1 AND enabled = 1")
        .db()?
        .query_row(params![tick.cron_id], |r| r.get(0))
        .optional()
        .db()?;
    Ok(next.flatten() == Some(tick.due_us))
}

pub(super) async fn fire(db: &SqliteDb, tick: &CronTick, run: Option<&NewRun>) -> DbResult<Fired> {
    let now = now_micros();
    let op = run.map(|r| insert_op(r, now)).transpose()?;
    // A run that makes its thread (a stateless cron's) has none to find.
    let thread_id = run
        .filter(|r| r.create_thread.is_none())
        .map(|r| r.run.thread_id.clone());
    let tick = tick.clone();
    let fired = db
        .write(move |c| {
            if !still_due(c, &tick)? {
                return Ok(None);
            }
            let made = match &op {
                Some(op) => {
                    if let Some(thread_id) = &thread_id {
                        let exists: Option<i64> = c
                            .prepare_cached("SELECT 1 FROM server_threads WHERE thread_id = ?1")
                            .db()?
                            .query_row(params![thread_id], |r| r.get(0))
                            .optional()
                            .db()?;
                        if exists.is_none() {
                            return Ok(Some(Err(Fired::ThreadGone)));
                        }
                    }
                    match op(c) {
                        Ok(made) => Some(made),
                        // Refused before anything was written.
                        Err(DbError::Busy(_)) => return Ok(Some(Err(Fired::Busy))),
                        Err(e) => return Err(e),
                    }
                }
                None => None,
            };
            exec(
                c,
                "UPDATE server_crons SET next_run_date = ?1, updated_at = ?2 WHERE cron_id = ?3",
                params![tick.next_us, now, tick.cron_id],
            )?;
            Ok(Some(Ok(made)))
        })
        .await?;
    Ok(match fired {
        None => Fired::Taken,
        Some(Err(refused)) => refused,
        Some(Ok(Some(made))) => match run {
            Some(new) => Fired::Run(created(&new.run, made)),
            None => Fired::Skipped,
        },
        Some(Ok(None)) => Fired::Skipped,
    })
}
