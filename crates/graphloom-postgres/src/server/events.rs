//! Stored events of resumable runs, for readers in another process (a replica, or this
//! server after a restart).

use crate::error::ServerResultExt;
use graphloom_server_db::kit::event_record;
use graphloom_server_db::{DbError, DbResult, RunEventRecord};
use sqlx::postgres::PgPool;
use sqlx::PgExecutor;

/// Events as the columns of one insert, encoded before a transaction begins.
pub(super) struct EventRows {
    seqs: Vec<i64>,
    names: Vec<String>,
    datas: Vec<String>,
}

impl EventRows {
    pub(super) fn new(events: Vec<RunEventRecord>) -> DbResult<Self> {
        let mut rows = Self {
            seqs: Vec::with_capacity(events.len()),
            names: Vec::with_capacity(events.len()),
            datas: Vec::with_capacity(events.len()),
        };
        for e in events {
            rows.seqs.push(i64::try_from(e.id).unwrap_or(i64::MAX));
            rows.names.push(e.event);
            rows.datas.push(
                serde_json::to_string(e.data.as_ref())
                    .map_err(|e| DbError::Backend(format!("cannot encode JSON: {e}")))?,
            );
        }
        Ok(rows)
    }

    /// Insert them as events of run `run_id` (one already stored stays as it is).
    pub(super) async fn insert<'e>(self, db: impl PgExecutor<'e>, run_id: &str) -> DbResult<()> {
        if self.seqs.is_empty() {
            return Ok(());
        }
        sqlx::query(
            "INSERT INTO server_run_events (run_id, seq, event, data) \
             SELECT $1, s, e, d FROM unnest($2::bigint[], $3::text[], $4::text[]) AS t(s, e, d) \
             ON CONFLICT (run_id, seq) DO NOTHING",
        )
        .bind(run_id)
        .bind(self.seqs)
        .bind(self.names)
        .bind(self.datas)
        .execute(db)
        .await
        .db()?;
        Ok(())
    }
}

pub(super) async fn append(pool: &PgPool, run_id: &str, events: Vec<RunEventRecord>) -> DbResult<()> {
    EventRows::new(events)?.insert(pool, run_id).await
}

pub(super) async fn read(
    pool: &PgPool,
    run_id: &str,
    from: u64,
    limit: i64,
) -> DbResult<Vec<RunEventRecord>> {
    let rows: Vec<(i64, String, String)> = sqlx::query_as(
        "SELECT seq, event, data FROM server_run_events WHERE run_id = $1 AND seq >= $2 ORDER BY seq LIMIT $3",
    )
    .bind(run_id)
    .bind(i64::try_from(from).unwrap_or(i64::MAX))
    .bind(limit)
    .fetch_all(pool)
    .await
    .db()?;
    rows.into_iter()
        .map(|(seq, event, data)| event_record(seq, event, &data))
        .collect()
}

pub(super) async fn delete(pool: &PgPool, run_id: &str) -> DbResult<()> {
    sqlx::query("DELETE FROM server_run_events WHERE run_id = $1")
        .bind(run_id)
        .execute(pool)
        .await
        .db()?;
    Ok(())
}
