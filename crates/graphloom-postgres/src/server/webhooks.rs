//! The webhook delivery queue: enqueue, claim with a lease (`FOR UPDATE SKIP LOCKED`, only
//! once the run has ended), delivered, failed (retried later or given up), pruned.

use crate::error::ServerResultExt;
use graphloom_server_db::kit::{after, now_micros};
use graphloom_server_db::{DbResult, NewWebhook, WebhookDelivery, WebhookStatus};
use serde_json::Value;
use sqlx::postgres::PgPool;
use sqlx::types::Json;
use std::time::Duration;

pub(super) async fn enqueue(pool: &PgPool, new: &NewWebhook) -> DbResult<bool> {
    let done = sqlx::query(
        "INSERT INTO server_webhooks (run_id, thread_id, url, body, status, attempts, due_at, \
         created_at, updated_at) VALUES ($1, $2, $3, $4, 'pending', 0, $5, $5, $5) \
         ON CONFLICT (run_id) DO NOTHING",
    )
    .bind(&new.run_id)
    .bind(&new.thread_id)
    .bind(&new.url)
    .bind(Json(&new.body))
    .bind(now_micros())
    .execute(pool)
    .await
    .db()?;
    Ok(done.rows_affected() > 0)
}

pub(super) async fn claim(pool: &PgPool, worker: &str, lease: Duration) -> DbResult<Option<WebhookDelivery>> {
    let now = now_micros();
    let row: Option<(String, String, Json<Value>, i64)> = sqlx::query_as(
        "UPDATE server_webhooks SET worker = $1, lease_expires_at = $2, updated_at = $3 \
         WHERE run_id = (SELECT w.run_id FROM server_webhooks w \
             WHERE w.status = 'pending' AND w.due_at <= $3 \
               AND (w.lease_expires_at IS NULL OR w.lease_expires_at < $3) \
               AND NOT EXISTS (SELECT 1 FROM server_runs r WHERE r.run_id = w.run_id \
                 AND r.status IN ('pending', 'running')) \
             ORDER BY w.due_at, w.run_id LIMIT 1 FOR UPDATE SKIP LOCKED) \
         RETURNING run_id, url, body, attempts",
    )
    .bind(worker)
    .bind(after(now, lease))
    .bind(now)
    .fetch_optional(pool)
    .await
    .db()?;
    Ok(row.map(|(run_id, url, body, attempts)| WebhookDelivery {
        run_id,
        url,
        body: body.0,
        attempts,
    }))
}

pub(super) async fn delivered(pool: &PgPool, run_id: &str, worker: &str) -> DbResult<bool> {
    let done = sqlx::query(
        "UPDATE server_webhooks SET status = 'delivered', attempts = attempts + 1, worker = NULL, \
         lease_expires_at = NULL, last_error = NULL, updated_at = $1 \
         WHERE run_id = $2 AND worker = $3 AND status = 'pending'",
    )
    .bind(now_micros())
    .bind(run_id)
    .bind(worker)
    .execute(pool)
    .await
    .db()?;
    Ok(done.rows_affected() > 0)
}

pub(super) async fn failed(
    pool: &PgPool,
    run_id: &str,
    worker: &str,
    error: &str,
    retry_in: Option<Duration>,
) -> DbResult<bool> {
    let now = now_micros();
    let (status, due) = match retry_in {
        Some(d) => ("pending", after(now, d)),
        None => ("failed", now),
    };
    let done = sqlx::query(
        "UPDATE server_webhooks SET status = $1, attempts = attempts + 1, due_at = $2, worker = NULL, \
         lease_expires_at = NULL, last_error = $3, updated_at = $4 \
         WHERE run_id = $5 AND worker = $6 AND status = 'pending'",
    )
    .bind(status)
    .bind(due)
    .bind(error)
    .bind(now)
    .bind(run_id)
    .bind(worker)
    .execute(pool)
    .await
    .db()?;
    Ok(done.rows_affected() > 0)
}

pub(super) async fn status(pool: &PgPool, run_id: &str) -> DbResult<Option<WebhookStatus>> {
    let row: Option<(String, i64, Option<String>)> =
        sqlx::query_as("SELECT status, attempts, last_error FROM server_webhooks WHERE run_id = $1")
            .bind(run_id)
            .fetch_optional(pool)
            .await
            .db()?;
    Ok(row.map(|(status, attempts, last_error)| WebhookStatus {
        status,
        attempts,
        last_error,
    }))
}

pub(super) async fn prune(pool: &PgPool, before: i64, limit: i64) -> DbResult<usize> {
    let done = sqlx::query(
        "DELETE FROM server_webhooks WHERE run_id IN (SELECT run_id FROM server_webhooks \
         WHERE status <> 'pending' AND updated_at < $1 ORDER BY updated_at LIMIT $2)",
    )
    .bind(before)
    .bind(limit.max(1))
    .execute(pool)
    .await
    .db()?;
    Ok(usize::try_from(done.rows_affected()).unwrap_or(usize::MAX))
}
