//! The saver's rows: how each is read from a query, decoded, encoded and inserted.

use super::aad;
use crate::error::{other, SqlResultExt};
use crate::row::{bytes_of, FromRow};
use graphloom_core::checkpoint::{BlobCodec, Checkpoint, CheckpointConfig, CheckpointMetadata};
use graphloom_core::{Error, Result};

/// A checkpoint row as read.
pub(super) struct CpRow {
    pub(super) thread_id: String,
    pub(super) ns: String,
    pub(super) id: String,
    pub(super) parent: Option<String>,
    pub(super) enc: String,
    pub(super) body: Vec<u8>,
    pub(super) metadata: String,
}

/// A stored checkpoint that does not decode, named by its thread and id.
pub(super) fn corrupt_cp(thread: &str, id: &str, message: impl Into<String>) -> Error {
    Error::CorruptCheckpoint {
        thread_id: thread.to_owned(),
        checkpoint_id: id.to_owned(),
        message: message.into(),
    }
}

/// `value` encoded with `codec`, sealed with `aad`: `(encoding tag, bytes)`.
pub(super) fn encode<T: serde::Serialize + ?Sized>(
    codec: &BlobCodec,
    value: &T,
    aad: &[u8],
) -> Result<(String, Vec<u8>)> {
    codec
        .encode(value, aad)
        .map(|(tag, bytes)| (tag.to_owned(), bytes))
        .map_err(|e| other(e.to_string()))
}

impl FromRow for CpRow {
    const COLUMNS: &'static str =
        "thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, enc, checkpoint, metadata";
    type Error = Error;

    /// The key columns first: a column after them that does not decode is a corrupt
    /// checkpoint naming the row.
    fn from_row(row: &rusqlite::Row<'_>) -> Result<CpRow> {
        let thread_id: String = row.get(0).sql()?;
        let ns: String = row.get(1).sql()?;
        let id: String = row.get(2).sql()?;
        let bad = |what: &str, e: rusqlite::Error| {
            corrupt_cp(&thread_id, &id, format!("checkpoint row: {what}: {e}"))
        };
        let parent: Option<String> = row.get(3).map_err(|e| bad("parent id", e))?;
        let enc: String = row.get(4).map_err(|e| bad("encoding", e))?;
        let body: Vec<u8> = bytes_of(row, 5).map_err(|e| bad("body", e))?;
        let metadata: String = row.get(6).map_err(|e| bad("metadata", e))?;
        Ok(CpRow {
            thread_id,
            ns,
            id,
            parent,
            enc,
            body,
            metadata,
        })
    }
}

/// A checkpoint row decoded, channel values not yet resolved.
pub(super) struct Decoded {
    pub(super) row: CpRow,
    pub(super) checkpoint: Checkpoint,
    pub(super) metadata: CheckpointMetadata,
}

/// Decode a checkpoint row's metadata and body (checking the body is the row's checkpoint).
pub(super) fn decode_cp(codec: &BlobCodec, row: CpRow) -> Result<Decoded> {
    let metadata: CheckpointMetadata = serde_json::from_str(&row.metadata).map_err(|e| {
        corrupt_cp(
            &row.thread_id,
            &row.id,
            format!("checkpoint metadata does not decode: {e}"),
        )
    })?;
    let aad = aad::checkpoint(
        &row.thread_id,
        &row.ns,
        &row.id,
        row.parent.as_deref(),
        &row.metadata,
    );
    let mut checkpoint: Checkpoint = codec
        .decode(&row.enc, &row.body, &aad)
        .map_err(|e| corrupt_cp(&row.thread_id, &row.id, format!("checkpoint row: {e}")))?;
    if checkpoint.id != row.id {
        return Err(corrupt_cp(
            &row.thread_id,
            &row.id,
            "checkpoint row holds another checkpoint's id",
        ));
    }
    checkpoint.channel_values.clear();
    Ok(Decoded {
        row,
        checkpoint,
        metadata,
    })
}

/// An encoded checkpoint and its new channel values, ready to insert.
pub(super) struct CheckpointRow {
    pub(super) thread: String,
    pub(super) ns: String,
    pub(super) id: String,
    pub(super) parent: Option<String>,
    pub(super) enc: String,
    pub(super) body: Vec<u8>,
    pub(super) metadata: String,
    /// `(channel, version, enc, bytes)`.
    pub(super) blobs: Vec<(String, String, String, Vec<u8>)>,
}

impl CheckpointRow {
    /// The config naming the checkpoint.
    pub(super) fn config(&self) -> CheckpointConfig {
        CheckpointConfig {
            thread_id: self.thread.clone(),
            checkpoint_ns: self.ns.clone(),
            checkpoint_id: Some(self.id.clone()),
        }
    }

    /// Insert its blobs, then the checkpoint row.
    pub(super) fn insert(&self, conn: &rusqlite::Connection) -> Result<()> {
        for (channel, version, enc, bytes) in &self.blobs {
            insert_blob(conn, &self.thread, &self.ns, channel, version, enc, bytes)?;
        }
        upsert_checkpoint(
            conn,
            &self.thread,
            &self.ns,
            &self.id,
            self.parent.as_deref(),
            &self.enc,
            &self.body,
            &self.metadata,
        )
    }
}

/// A pending write ready to insert.
pub(super) struct WriteRow {
    pub(super) checkpoint_id: String,
    pub(super) task_id: String,
    pub(super) idx: i64,
    pub(super) channel: String,
    pub(super) task_path: String,
    pub(super) enc: String,
    pub(super) bytes: Vec<u8>,
}

/// Insert a blob unless that `(thread, ns, channel, version)` is already stored: blobs are
/// never rewritten.
pub(super) fn insert_blob(
    conn: &rusqlite::Connection,
    thread: &str,
    ns: &str,
    channel: &str,
    version: &str,
    enc: &str,
    bytes: &[u8],
) -> Result<()> {
    conn.prepare_cached(
        "INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, enc, value)
         VALUES (?, ?, ?, ?, ?, ?)
         ON CONFLICT (thread_id, checkpoint_ns, channel, version) DO NOTHING",
    )
    .and_then(|mut stmt| stmt.execute(rusqlite::params![thread, ns, channel, version, enc, bytes]))
    .sql()?;
    Ok(())
}

#[allow(clippy::too_many_arguments)]
pub(super) fn upsert_checkpoint(
    conn: &rusqlite::Connection,
    thread: &str,
    ns: &str,
    id: &str,
    parent: Option<&str>,
    enc: &str,
    body: &[u8],
    metadata: &str,
) -> Result<()> {
    conn.prepare_cached(
        "INSERT INTO checkpoints
            (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, enc, checkpoint, metadata)
         VALUES (?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id) DO UPDATE SET
            parent_checkpoint_id = excluded.parent_checkpoint_id,
            enc = excluded.enc,
            checkpoint = excluded.checkpoint,
            metadata = excluded.metadata",
    )
    .and_then(|mut stmt| stmt.execute(rusqlite::params![thread, ns, id, parent, enc, body, metadata]))
    .sql()?;
    Ok(())
}

/// Insert a pending write: an ordinary write (idx >= 0) whose `(task_id, idx)` is already
/// stored is dropped; a special one (negative idx) replaces the stored one, keeping its
/// place (`seq`) in write order.
pub(super) fn insert_write(conn: &rusqlite::Connection, thread: &str, ns: &str, w: &WriteRow) -> Result<()> {
    const ORDINARY: &str = "INSERT INTO checkpoint_writes
            (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, task_path, enc, value)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO NOTHING";
    const SPECIAL: &str = "INSERT INTO checkpoint_writes
            (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, task_path, enc, value)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO UPDATE SET
            channel = excluded.channel, task_path = excluded.task_path,
            enc = excluded.enc, value = excluded.value";
    let sql = if w.idx < 0 { SPECIAL } else { ORDINARY };
    conn.prepare_cached(sql)
        .and_then(|mut stmt| {
            stmt.execute(rusqlite::params![
                thread,
                ns,
                &w.checkpoint_id,
                &w.task_id,
                w.idx,
                &w.channel,
                &w.task_path,
                &w.enc,
                &w.bytes
            ])
        })
        .sql()?;
    Ok(())
}
