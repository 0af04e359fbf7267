//! What a thread's checkpoints take in the file: one aggregate per table, for the graph
//! checkpoint tables and the typed ones alike (they share their layout).

use crate::error::SqlResultExt;
use graphloom_core::checkpoint::{StoredCount, ThreadStorage};
use graphloom_core::Result;
use rusqlite::Connection;

/// The three tables of one kind of checkpoint.
pub(crate) struct Tables {
    pub checkpoints: &'static str,
    pub blobs: &'static str,
    pub writes: &'static str,
}

fn count(conn: &Connection, sql: &str, thread_id: &str) -> Result<StoredCount> {
    let (count, bytes): (i64, i64) = conn
        .prepare_cached(sql)
        .sql()?
        .query_row([thread_id], |r| Ok((r.get(0)?, r.get(1)?)))
        .sql()?;
    Ok(StoredCount {
        count: u64::try_from(count).unwrap_or(0),
        bytes: u64::try_from(bytes).unwrap_or(0),
    })
}

/// The storage of `thread_id` in `tables` (every namespace).
pub(crate) fn thread_storage(conn: &Connection, tables: &Tables, thread_id: &str) -> Result<ThreadStorage> {
    let checkpoints = count(
        conn,
        &format!(
            "SELECT COUNT(*), COALESCE(SUM(LENGTH(checkpoint) + LENGTH(metadata)), 0) FROM {} WHERE thread_id = ?1",
            tables.checkpoints
        ),
        thread_id,
    )?;
    let pending_writes = count(
        conn,
        &format!(
            "SELECT COUNT(*), COALESCE(SUM(LENGTH(value)), 0) FROM {} WHERE thread_id = ?1",
            tables.writes
        ),
        thread_id,
    )?;
    let mut stmt = conn
        .prepare_cached(&format!(
            "SELECT channel, COUNT(*), COALESCE(SUM(LENGTH(value)), 0) FROM {} WHERE thread_id = ?1 GROUP BY channel",
            tables.blobs
        ))
        .sql()?;
    let channels = stmt
        .query_map([thread_id], |r| {
            let (count, bytes): (i64, i64) = (r.get(1)?, r.get(2)?);
            Ok((
                r.get::<_, String>(0)?,
                StoredCount {
                    count: u64::try_from(count).unwrap_or(0),
                    bytes: u64::try_from(bytes).unwrap_or(0),
                },
            ))
        })
        .sql()?
        .collect::<rusqlite::Result<_>>()
        .sql()?;
    Ok(ThreadStorage {
        checkpoints,
        channels,
        pending_writes,
    })
}
