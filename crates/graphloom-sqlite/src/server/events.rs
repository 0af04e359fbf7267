//! Stored events of resumable runs, for readers in another process (this server after a
//! restart).

use super::{exec, text, SqliteDb};
use crate::error::ServerResultExt;
use graphloom_server_db::kit::event_record;
use graphloom_server_db::{DbResult, RunEventRecord};
use rusqlite::{params, Connection};

/// Events as rows to insert, encoded off the writer thread.
pub(super) struct EventRows(Vec<(i64, String, String)>);

impl EventRows {
    pub(super) fn new(events: Vec<RunEventRecord>) -> DbResult<Self> {
        let rows = events
            .into_iter()
            .map(|e| {
                Ok((
                    i64::try_from(e.id).unwrap_or(i64::MAX),
                    e.event,
                    text(e.data.as_ref())?,
                ))
            })
            .collect::<DbResult<Vec<_>>>()?;
        Ok(Self(rows))
    }

    /// Insert them as events of run `run_id` (one already stored stays as it is).
    pub(super) fn insert(self, c: &Connection, run_id: &str) -> DbResult<()> {
        if self.0.is_empty() {
            return Ok(());
        }
        let mut st = c
            .prepare_cached(
                "INSERT INTO server_run_events (run_id, seq, event, data) VALUES (?1, ?2, ?3, ?4) \
                 ON CONFLICT (run_id, seq) DO NOTHING",
            )
            .db()?;
        for (seq, event, data) in self.0 {
            st.execute(params![run_id, seq, event, data]).db()?;
        }
        Ok(())
    }
}

pub(super) async fn append(db: &SqliteDb, run_id: &str, events: Vec<RunEventRecord>) -> DbResult<()> {
    let rows = EventRows::new(events)?;
    let run_id = run_id.to_owned();
    db.write(move |c| rows.insert(c, &run_id)).await
}

/// A run's stored events from `from` on, at most `limit`: a read by key, on this thread.
pub(super) fn read(db: &SqliteDb, run_id: &str, from: u64, limit: i64) -> DbResult<Vec<RunEventRecord>> {
    let rows: Vec<(i64, String, String)> = db.read(|c| {
        c.prepare_cached(
            "SELECT seq, event, data FROM server_run_events WHERE run_id = ?1 AND seq >= ?2 ORDER BY seq LIMIT ?3",
        )
        .db()?
        .query_map(
            params![run_id, i64::try_from(from).unwrap_or(i64::MAX), limit],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .db()?
        .collect::<rusqlite::Result<Vec<_>>>()
        .db()
    })?;
    rows.into_iter()
        .map(|(seq, event, data)| event_record(seq, event, &data))
        .collect()
}

pub(super) async fn delete(db: &SqliteDb, run_id: &str) -> DbResult<()> {
    let run_id = run_id.to_owned();
    db.write(move |c| {
        exec(
            c,
            "DELETE FROM server_run_events WHERE run_id = ?1",
            params![run_id],
        )?;
        Ok(())
    })
    .await
}
