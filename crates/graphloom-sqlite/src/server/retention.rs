//! Retention: the threads whose time to live has passed (their own, or the server's
//! default), and the mark that a `keep_latest` thread was pruned.

use super::{exec, SqliteDb};
use crate::error::ServerResultExt;
use graphloom_server_db::kit::ttl_strategy;
use graphloom_server_db::{DbResult, DefaultTtl, ExpiredThread};
use rusqlite::params;
use serde_json::Value;

/// Threads with a ttl of their own that passed (`?1` = now), not pruned since they changed.
const OWN: &str = "SELECT thread_id, ttl FROM server_threads \
     WHERE expires_at IS NOT NULL AND expires_at <= ?1 AND status <> 'busy' \
       AND (retained_at IS NULL OR retained_at < updated_at) \
     ORDER BY expires_at, thread_id LIMIT ?2";

/// Threads without a ttl unchanged since `?1`, not pruned since they changed.
const DEFAULTED: &str = "SELECT thread_id FROM server_threads \
     WHERE ttl IS NULL AND updated_at <= ?1 AND status <> 'busy' \
       AND (retained_at IS NULL OR retained_at < updated_at) \
     ORDER BY updated_at, thread_id LIMIT ?2";

pub(super) async fn expired(
    db: &SqliteDb,
    now: i64,
    default: Option<DefaultTtl>,
    limit: i64,
) -> DbResult<Vec<ExpiredThread>> {
    let limit = limit.max(1);
    db.scan(move |c| {
        let mut out = Vec::new();
        let own = c
            .prepare_cached(OWN)
            .db()?
            .query_map(params![now, limit], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, Option<Value>>(1)?))
            })
            .db()?
            .collect::<rusqlite::Result<Vec<_>>>()
            .db()?;
        for (thread_id, ttl) in own {
            if let Some(strategy) = ttl_strategy(ttl.as_ref()) {
                out.push(ExpiredThread { thread_id, strategy });
            }
        }
        if let Some(d) = default {
            let room = limit - out.len() as i64;
            if room > 0 {
                let since = now.saturating_sub(i64::try_from(d.ttl.as_micros()).unwrap_or(i64::MAX));
                let ids = c
                    .prepare_cached(DEFAULTED)
                    .db()?
                    .query_map(params![since, room], |r| r.get::<_, String>(0))
                    .db()?
                    .collect::<rusqlite::Result<Vec<_>>>()
                    .db()?;
                out.extend(ids.into_iter().map(|thread_id| ExpiredThread {
                    thread_id,
                    strategy: d.strategy,
                }));
            }
        }
        Ok(out)
    })
    .await
}

pub(super) async fn mark_retained(db: &SqliteDb, thread_id: &str, now: i64) -> DbResult<()> {
    let thread_id = thread_id.to_owned();
    db.write(move |c| {
        exec(
            c,
            "UPDATE server_threads SET retained_at = MAX(?1, updated_at) WHERE thread_id = ?2",
            params![now, thread_id],
        )?;
        Ok(())
    })
    .await
}

pub(super) fn exists(db: &SqliteDb, thread_id: &str) -> DbResult<bool> {
    db.read(|c| {
        let n: i64 = c
            .prepare_cached("SELECT COUNT(*) FROM server_threads WHERE thread_id = ?1")
            .db()?
            .query_row(params![thread_id], |r| r.get(0))
            .db()?;
        Ok(n > 0)
    })
}
