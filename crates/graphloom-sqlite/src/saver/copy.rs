//! `copy_thread`: every row of a thread read in one snapshot, encoded again for the target
//! thread (values are sealed with their row's key), inserted in one write.

use super::aad;
use super::rows::{
    corrupt_cp, decode_cp, encode, insert_blob, insert_write, upsert_checkpoint, CpRow, WriteRow,
};
use super::SqliteSaver;
use crate::error::{other, SqlResultExt};
use crate::row::{bytes_of, each_row, FromRow};
use graphloom_core::checkpoint::{BlobCodec, ChannelValue};
use graphloom_core::{Error, Result};
use serde_json::Value;

impl SqliteSaver {
    pub(super) async fn copy_thread_now(&self, source: &str, target: &str) -> Result<()> {
        if source == target {
            return Ok(());
        }
        let (source, target) = (source.to_owned(), target.to_owned());
        let rows = {
            let saver = self.clone();
            let (source, target) = (source.clone(), target.clone());
            tokio::task::spawn_blocking(move || {
                saver
                    .db
                    .read(|conn| copy_rows(conn, saver.codec(), &source, &target))
            })
            .await
            .map_err(|e| other(format!("copying a thread stopped: {e}")))??
        };
        self.db.write(move |conn| rows.insert(conn, &target)).await
    }
}

/// A checkpoint row encoded for another thread.
struct CopiedCheckpoint {
    ns: String,
    id: String,
    parent: Option<String>,
    enc: String,
    body: Vec<u8>,
    metadata: String,
}

/// The rows of a thread, encoded again for another thread, ready to insert.
#[derive(Default)]
struct CopiedRows {
    checkpoints: Vec<CopiedCheckpoint>,
    /// `(ns, channel, version, enc, bytes)`.
    blobs: Vec<(String, String, String, String, Vec<u8>)>,
    /// `(ns, row)`.
    writes: Vec<(String, WriteRow)>,
}

impl CopiedRows {
    fn insert(&self, conn: &rusqlite::Connection, target: &str) -> Result<()> {
        for c in &self.checkpoints {
            upsert_checkpoint(
                conn,
                target,
                &c.ns,
                &c.id,
                c.parent.as_deref(),
                &c.enc,
                &c.body,
                &c.metadata,
            )?;
        }
        for (ns, channel, version, enc, bytes) in &self.blobs {
            insert_blob(conn, target, ns, channel, version, enc, bytes)?;
        }
        for (ns, w) in &self.writes {
            insert_write(conn, target, ns, w)?;
        }
        Ok(())
    }
}

/// Read every row of thread `source` and encode it for `target`. Values are sealed with
/// associated data naming their thread, so each is decoded and encoded again for its new
/// row (which also refuses to copy a corrupt row).
fn copy_rows(
    conn: &rusqlite::Connection,
    codec: &BlobCodec,
    source: &str,
    target: &str,
) -> Result<CopiedRows> {
    let mut out = CopiedRows::default();
    // The caller's read transaction: the three tables as of one moment.
    each_row(
        conn,
        &format!(
            "SELECT {} FROM checkpoints WHERE thread_id = ?1 ORDER BY checkpoint_ns, checkpoint_id",
            CpRow::COLUMNS
        ),
        [source],
        |row| {
            let d = decode_cp(codec, CpRow::from_row(row)?)?;
            let r = &d.row;
            let aad = aad::checkpoint(target, &r.ns, &r.id, r.parent.as_deref(), &r.metadata);
            let (enc, body) = encode(codec, &d.checkpoint, &aad)?;
            out.checkpoints.push(CopiedCheckpoint {
                ns: r.ns.clone(),
                id: r.id.clone(),
                parent: r.parent.clone(),
                enc,
                body,
                metadata: r.metadata.clone(),
            });
            Ok(())
        },
    )?;

    each_row(
        conn,
        "SELECT checkpoint_ns, channel, version, enc, value FROM checkpoint_blobs WHERE thread_id = ?1
         ORDER BY checkpoint_ns, channel, version",
        [source],
        |row| {
            let ns: String = row.get(0).sql()?;
            let channel: String = row.get(1).sql()?;
            let version: String = row.get(2).sql()?;
            let bad = |e: String| Error::CorruptCheckpoint {
                thread_id: source.to_owned(),
                checkpoint_id: String::new(),
                message: format!("namespace `{ns}` channel `{channel}` version {version}: {e}"),
            };
            let enc: String = row.get(3).map_err(|e| bad(e.to_string()))?;
            let bytes: Vec<u8> = bytes_of(row, 4).map_err(|e| bad(e.to_string()))?;
            let value: ChannelValue = codec
                .decode(&enc, &bytes, &aad::blob(source, &ns, &channel, &version))
                .map_err(|e| bad(e.to_string()))?;
            let (enc, bytes) = encode(codec, &value, &aad::blob(target, &ns, &channel, &version))?;
            out.blobs.push((ns, channel, version, enc, bytes));
            Ok(())
        },
    )?;

    each_row(
        conn,
        "SELECT checkpoint_ns, checkpoint_id, task_id, idx, channel, task_path, enc, value
         FROM checkpoint_writes WHERE thread_id = ?1 ORDER BY seq",
        [source],
        |row| {
            let ns: String = row.get(0).sql()?;
            let checkpoint_id: String = row.get(1).sql()?;
            let task_id: String = row.get(2).sql()?;
            let idx: i64 = row.get(3).sql()?;
            let bad = |e: String| {
                corrupt_cp(
                    source,
                    &checkpoint_id,
                    format!("pending write {idx} of task `{task_id}`: {e}"),
                )
            };
            let channel: String = row.get(4).map_err(|e| bad(e.to_string()))?;
            let task_path: String = row.get(5).map_err(|e| bad(e.to_string()))?;
            let enc: String = row.get(6).map_err(|e| bad(e.to_string()))?;
            let bytes: Vec<u8> = bytes_of(row, 7).map_err(|e| bad(e.to_string()))?;
            let value: Value = codec
                .decode(
                    &enc,
                    &bytes,
                    &aad::write(source, &ns, &checkpoint_id, &task_id, idx, &channel),
                )
                .map_err(|e| bad(e.to_string()))?;
            let (enc, bytes) = encode(
                codec,
                &value,
                &aad::write(target, &ns, &checkpoint_id, &task_id, idx, &channel),
            )?;
            let w = WriteRow {
                checkpoint_id,
                task_id,
                idx,
                channel,
                task_path,
                enc,
                bytes,
            };
            out.writes.push((ns, w));
            Ok(())
        },
    )?;
    Ok(out)
}
