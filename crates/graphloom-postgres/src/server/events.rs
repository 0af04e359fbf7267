//! Stored events of resumable runs, for readers in another process (a replica, or this
//! server after a restart).

use crate::error::ServerResultExt;
use graphloom_server_db::kit::event_record;
use graphloom_server_db::{DbError, DbResult, RunEventRecord};
use sqlx::postgres::PgPool;

pub(super) async fn append(pool: &PgPool, run_id: &str, events: Vec<RunEventRecord>) -> DbResult<()> {
    let mut seqs = Vec::with_capacity(events.len());
    let mut names = Vec::with_capacity(events.len());
    let mut datas = Vec::with_capacity(events.len());
    for e in events {
        seqs.push(i64::try_from(e.id).unwrap_or(i64::MAX));
        names.push(e.event);
        datas.push(
            serde_json::to_string(e.data.as_ref())
                .map_err(|e| DbError::Backend(format!("cannot encode JSON: {e}")))?,
        );
    }
    sqlx::query(
        "INSERT INTO server_run_events (run_id, seq, event, data) \
         SELECT $1, s, e, d FROM unnest($2::bigint[], $3::text[], $4::text[]) AS t(s, e, d) \
         ON CONFLICT (run_id, seq) DO NOTHING",
    )
    .bind(run_id)
    .bind(seqs)
    .bind(names)
    .bind(datas)
    .execute(pool)
    .await
    .db()?;
    Ok(())
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
