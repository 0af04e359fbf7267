//! Retention: the threads whose time to live has passed (their own, or the server's
//! default), and the mark that a `keep_latest` thread was pruned.

use crate::error::ServerResultExt;
use graphloom_server_db::kit::ttl_strategy;
use graphloom_server_db::{DbResult, DefaultTtl, ExpiredThread};
use serde_json::Value;
use sqlx::postgres::PgPool;
use sqlx::types::Json;

pub(super) async fn expired(
    pool: &PgPool,
    now: i64,
    default: Option<DefaultTtl>,
    limit: i64,
) -> DbResult<Vec<ExpiredThread>> {
    let limit = limit.max(1);
    let own: Vec<(String, Option<Json<Value>>)> = sqlx::query_as(
        "SELECT thread_id, ttl FROM server_threads \
         WHERE expires_at IS NOT NULL AND expires_at <= $1 AND status <> 'busy' \
           AND (retained_at IS NULL OR retained_at < updated_at) \
         ORDER BY expires_at, thread_id LIMIT $2",
    )
    .bind(now)
    .bind(limit)
    .fetch_all(pool)
    .await
    .db()?;
    let mut out: Vec<ExpiredThread> = own
        .into_iter()
        .filter_map(|(thread_id, ttl)| {
            ttl_strategy(ttl.as_ref().map(|j| &j.0)).map(|strategy| ExpiredThread { thread_id, strategy })
        })
        .collect();
    if let Some(d) = default {
        let room = limit - out.len() as i64;
        if room > 0 {
            let since = now.saturating_sub(i64::try_from(d.ttl.as_micros()).unwrap_or(i64::MAX));
            let ids: Vec<String> = sqlx::query_scalar(
                "SELECT thread_id FROM server_threads \
                 WHERE ttl IS NULL AND updated_at <= $1 AND status <> 'busy' \
                   AND (retained_at IS NULL OR retained_at < updated_at) \
                 ORDER BY updated_at, thread_id LIMIT $2",
            )
            .bind(since)
            .bind(room)
            .fetch_all(pool)
            .await
            .db()?;
            out.extend(ids.into_iter().map(|thread_id| ExpiredThread {
                thread_id,
                strategy: d.strategy,
            }));
        }
    }
    Ok(out)
}

pub(super) async fn mark_retained(pool: &PgPool, thread_id: &str, now: i64) -> DbResult<()> {
    sqlx::query("UPDATE server_threads SET retained_at = GREATEST($1, updated_at) WHERE thread_id = $2")
        .bind(now)
        .bind(thread_id)
        .execute(pool)
        .await
        .db()?;
    Ok(())
}

pub(super) async fn exists(pool: &PgPool, thread_id: &str) -> DbResult<bool> {
    sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM server_threads WHERE thread_id = $1)")
        .bind(thread_id)
        .fetch_one(pool)
        .await
        .db()
}
