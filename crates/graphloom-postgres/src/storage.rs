//! What a thread's checkpoints take in the database: one query over the three tables of a
//! kind of checkpoint, for the graph checkpoint tables and the typed ones alike. Sizes are
//! the stored sizes of the values (`pg_column_size`, after compression).

use crate::error::SqlxResultExt;
use graphloom_core::checkpoint::{StoredCount, ThreadStorage};
use graphloom_core::Result;
use sqlx::PgPool;

/// The three tables of one kind of checkpoint.
pub(crate) struct Tables {
    pub checkpoints: &'static str,
    pub blobs: &'static str,
    pub writes: &'static str,
}

/// The storage of `thread_id` in `tables` (every namespace).
pub(crate) async fn thread_storage(pool: &PgPool, tables: &Tables, thread_id: &str) -> Result<ThreadStorage> {
    let rows: Vec<(String, Option<String>, i64, i64)> = sqlx::query_as(&format!(
        "SELECT 'checkpoint', NULL::text, COUNT(*), \
                COALESCE(SUM(pg_column_size(checkpoint) + pg_column_size(metadata)), 0)::bigint \
           FROM {cp} WHERE thread_id = $1 \
         UNION ALL \
         SELECT 'write', NULL::text, COUNT(*), COALESCE(SUM(pg_column_size(value)), 0)::bigint \
           FROM {w} WHERE thread_id = $1 \
         UNION ALL \
         SELECT 'blob', channel::text, COUNT(*), COALESCE(SUM(pg_column_size(value)), 0)::bigint \
           FROM {b} WHERE thread_id = $1 GROUP BY channel",
        cp = tables.checkpoints,
        w = tables.writes,
        b = tables.blobs,
    ))
    .bind(thread_id)
    .fetch_all(pool)
    .await
    .during("thread storage")?;
    let mut out = ThreadStorage::default();
    for (kind, channel, count, bytes) in rows {
        let c = StoredCount {
            count: u64::try_from(count).unwrap_or(0),
            bytes: u64::try_from(bytes).unwrap_or(0),
        };
        match (kind.as_str(), channel) {
            ("checkpoint", _) => out.checkpoints = c,
            ("write", _) => out.pending_writes = c,
            (_, Some(channel)) => {
                out.channels.insert(channel, c);
            }
            (_, None) => {}
        }
    }
    Ok(out)
}
