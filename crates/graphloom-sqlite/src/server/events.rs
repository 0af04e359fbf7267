//! Stored events of resumable runs, for readers in another process (this server after a
//! restart).

use super::{exec, SqliteDb};
use crate::error::ServerResultExt;
use graphloom_server_db::{DbError, DbResult, RunEventRecord};
use rusqlite::{params, Connection};
use serde_json::Value;
use std::sync::Arc;

/// A batch of events as the one row that stores them, encoded off the writer thread: the
/// first and last sequence numbers, and the events as a JSON array of `[seq, event, data]`.
///
/// One row per batch instead of one per event: a run's events mostly arrive in one or two
/// batches, and each row costs an insert into the table and into its key's index.
pub(super) struct EventBatch(Option<(i64, i64, String)>);

impl EventBatch {
    pub(super) fn new(events: &[RunEventRecord]) -> DbResult<Self> {
        let ids = events.iter().map(|e| e.id);
        let (Some(first), Some(last)) = (ids.clone().min(), ids.max()) else {
            return Ok(Self(None));
        };
        let items: Vec<(u64, &str, &Value)> = events
            .iter()
            .map(|e| (e.id, e.event.as_str(), e.data.as_ref()))
            .collect();
        let text = serde_json::to_string(&items)
            .map_err(|e| DbError::Backend(format!("cannot encode JSON: {e}")))?;
        Ok(Self(Some((seq(first), seq(last), text))))
    }

    /// Insert them as events of run `run_id`. A batch already stored from the same first
    /// event stays, unless this one goes further: then this one replaces it (no event is
    /// lost; the events both hold are the same ones).
    pub(super) fn insert(&self, c: &Connection, run_id: &str) -> DbResult<()> {
        let Some((first, last, events)) = &self.0 else {
            return Ok(());
        };
        c.prepare_cached(
            "INSERT INTO server_run_event_batches (run_id, first_seq, last_seq, events) \
             VALUES (?1, ?2, ?3, ?4) ON CONFLICT (run_id, first_seq) DO UPDATE \
             SET last_seq = excluded.last_seq, events = excluded.events \
             WHERE excluded.last_seq > server_run_event_batches.last_seq",
        )
        .db()?
        .execute(params![run_id, first, last, events])
        .db()?;
        Ok(())
    }
}

/// A sequence number as stored.
fn seq(id: u64) -> i64 {
    i64::try_from(id).unwrap_or(i64::MAX)
}

pub(super) async fn append(db: &SqliteDb, run_id: &str, events: Vec<RunEventRecord>) -> DbResult<()> {
    let batch = EventBatch::new(&events)?;
    let run_id = run_id.to_owned();
    db.write(move |c| batch.insert(c, &run_id)).await
}

/// A run's stored events from `from` on, at most `limit` (none for a negative one), each
/// once and in order: a read by key, on this thread.
pub(super) fn read(db: &SqliteDb, run_id: &str, from: u64, limit: i64) -> DbResult<Vec<RunEventRecord>> {
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    if limit == 0 {
        return Ok(Vec::new());
    }
    let batches: Vec<String> = db.read(|c| {
        let mut st = c
            .prepare_cached(
                "SELECT events FROM server_run_event_batches WHERE run_id = ?1 AND last_seq >= ?2 \
                 ORDER BY first_seq",
            )
            .db()?;
        let mut rows = st.query(params![run_id, seq(from)]).db()?;
        let mut out = Vec::new();
        // A batch holds at least one event: `limit` batches are enough.
        while out.len() < limit {
            let Some(row) = rows.next().db()? else { break };
            out.push(row.get(0).db()?);
        }
        Ok(out)
    })?;
    let mut out: Vec<RunEventRecord> = Vec::new();
    for text in batches {
        let events: Vec<(u64, String, Value)> = serde_json::from_str(&text)
            .map_err(|e| DbError::Backend(format!("bad JSON in a run's stored events: {e}")))?;
        for (id, event, data) in events {
            let after_last = out.last().is_none_or(|l| id > l.id);
            if id >= from && after_last {
                out.push(RunEventRecord {
                    id,
                    event,
                    data: Arc::new(data),
                });
                if out.len() == limit {
                    return Ok(out);
                }
            }
        }
    }
    Ok(out)
}

pub(super) async fn delete(db: &SqliteDb, run_id: &str) -> DbResult<()> {
    let run_id = run_id.to_owned();
    db.write(move |c| {
        exec(
            c,
            "DELETE FROM server_run_event_batches WHERE run_id = ?1",
            params![run_id],
        )?;
        Ok(())
    })
    .await
}
