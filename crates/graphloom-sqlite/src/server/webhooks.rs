//! The webhook delivery queue: enqueue, claim with a lease (only once the run has ended),
//! delivered, failed (retried later or given up), pruned.

use super::{exec, text, SqliteDb};
use crate::error::ServerResultExt;
use graphloom_server_db::kit::{after, now_micros};
use graphloom_server_db::{DbResult, NewWebhook, WebhookDelivery, WebhookStatus};
use rusqlite::{params, Connection, OptionalExtension};
use serde_json::Value;
use std::time::Duration;

/// The oldest claimable delivery (`?1` = now): pending, due, not held by a live lease, and
/// its run no longer queued or running.
const CLAIMABLE: &str = "SELECT w.run_id FROM server_webhooks w \
     WHERE w.status = 'pending' AND w.due_at <= ?1 \
       AND (w.lease_expires_at IS NULL OR w.lease_expires_at < ?1) \
       AND NOT EXISTS (SELECT 1 FROM server_runs r WHERE r.run_id = w.run_id \
         AND r.status IN ('pending', 'running')) \
     ORDER BY w.due_at, w.run_id LIMIT 1";

fn claimable(c: &Connection, now: i64) -> DbResult<Option<String>> {
    c.prepare_cached(CLAIMABLE)
        .db()?
        .query_row(params![now], |r| r.get(0))
        .optional()
        .db()
}

pub(super) async fn enqueue(db: &SqliteDb, new: &NewWebhook) -> DbResult<bool> {
    let now = now_micros();
    let row = (
        new.run_id.clone(),
        new.thread_id.clone(),
        new.url.clone(),
        text(&new.body)?,
    );
    db.write(move |c| {
        let (run_id, thread_id, url, body) = &row;
        Ok(exec(
            c,
            "INSERT INTO server_webhooks (run_id, thread_id, url, body, status, attempts, due_at, \
             created_at, updated_at) VALUES (?1, ?2, ?3, ?4, 'pending', 0, ?5, ?5, ?5) \
             ON CONFLICT (run_id) DO NOTHING",
            params![run_id, thread_id, url, body, now],
        )? > 0)
    })
    .await
}

pub(super) async fn claim(db: &SqliteDb, worker: &str, lease: Duration) -> DbResult<Option<WebhookDelivery>> {
    // A look on a read connection first: an idle dispatcher never queues behind the writer.
    if db.read(|c| claimable(c, now_micros()))?.is_none() {
        return Ok(None);
    }
    let worker = worker.to_owned();
    db.write(move |c| {
        let now = now_micros();
        let Some(run_id) = claimable(c, now)? else {
            return Ok(None);
        };
        let (url, body, attempts): (String, Value, i64) = c
            .prepare_cached(
                "UPDATE server_webhooks SET worker = ?1, lease_expires_at = ?2, updated_at = ?3 \
                 WHERE run_id = ?4 RETURNING url, body, attempts",
            )
            .db()?
            .query_row(params![worker, after(now, lease), now, run_id], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })
            .db()?;
        Ok(Some(WebhookDelivery {
            run_id,
            url,
            body,
            attempts,
        }))
    })
    .await
}

pub(super) async fn delivered(db: &SqliteDb, run_id: &str, worker: &str) -> DbResult<bool> {
    let (run_id, worker) = (run_id.to_owned(), worker.to_owned());
    db.write(move |c| {
        Ok(exec(
            c,
            "UPDATE server_webhooks SET status = 'delivered', attempts = attempts + 1, worker = NULL, \
             lease_expires_at = NULL, last_error = NULL, updated_at = ?1 \
             WHERE run_id = ?2 AND worker = ?3 AND status = 'pending'",
            params![now_micros(), run_id, worker],
        )? > 0)
    })
    .await
}

pub(super) async fn failed(
    db: &SqliteDb,
    run_id: &str,
    worker: &str,
    error: &str,
    retry_in: Option<Duration>,
) -> DbResult<bool> {
    let (run_id, worker, error) = (run_id.to_owned(), worker.to_owned(), error.to_owned());
    db.write(move |c| {
        let now = now_micros();
        let (status, due) = match retry_in {
            Some(d) => ("pending", after(now, d)),
            None => ("failed", now),
        };
        Ok(exec(
            c,
            "UPDATE server_webhooks SET status = ?1, attempts = attempts + 1, due_at = ?2, worker = NULL, \
             lease_expires_at = NULL, last_error = ?3, updated_at = ?4 \
             WHERE run_id = ?5 AND worker = ?6 AND status = 'pending'",
            params![status, due, error, now, run_id, worker],
        )? > 0)
    })
    .await
}

pub(super) fn status(db: &SqliteDb, run_id: &str) -> DbResult<Option<WebhookStatus>> {
    db.read(|c| {
        c.prepare_cached("SELECT status, attempts, last_error FROM server_webhooks WHERE run_id = ?1")
            .db()?
            .query_row(params![run_id], |r| {
                Ok(WebhookStatus {
                    status: r.get(0)?,
                    attempts: r.get(1)?,
                    last_error: r.get(2)?,
                })
            })
            .optional()
            .db()
    })
}

pub(super) async fn prune(db: &SqliteDb, before: i64, limit: i64) -> DbResult<usize> {
    db.write(move |c| {
        exec(
            c,
            "DELETE FROM server_webhooks WHERE run_id IN (SELECT run_id FROM server_webhooks \
             WHERE status <> 'pending' AND updated_at < ?1 ORDER BY updated_at LIMIT ?2)",
            params![before, limit.max(1)],
        )
    })
    .await
}
