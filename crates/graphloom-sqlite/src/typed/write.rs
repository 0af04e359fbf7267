//! `put` and `put_writes`: one writer operation each, so a checkpoint with its new channel
//! versions (or one task's writes) commits whole or not at all.

use super::{TypedPut, TypedSaver, TypedWrites};
use crate::error::{invalid_input, SqlResultExt};
use graphloom_core::Result;
use rusqlite::params;
use std::sync::Arc;

impl TypedSaver {
    /// Store a checkpoint (replacing one stored under the same id) and the channel
    /// versions it writes first (a version already stored is kept: versions are written
    /// once). Returns once the transaction committed.
    ///
    /// # Errors
    /// A backend error if the write fails; nothing of it is kept then.
    pub async fn put(&self, put: TypedPut) -> Result<()> {
        let versions = serde_json::to_string(&put.channel_versions)
            .map_err(|e| invalid_input(format!("channel versions: {e}")))?;
        let run_id = put
            .metadata
            .get("run_id")
            .and_then(|v| v.as_str())
            .map(str::to_owned);
        let metadata = serde_json::Value::Object(put.metadata.clone()).to_string();
        let put = Arc::new(put);
        self.db
            .write(move |conn| {
                let mut blob = conn
                    .prepare_cached(
                        "INSERT OR IGNORE INTO typed_blobs \
                         (thread_id, checkpoint_ns, channel, version, type, value) \
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                    )
                    .sql()?;
                for (channel, version, value) in &put.blobs {
                    blob.execute(params![
                        put.thread_id,
                        put.checkpoint_ns,
                        channel,
                        version,
                        value.type_tag,
                        value.bytes
                    ])
                    .sql()?;
                }
                conn.prepare_cached(
                    "INSERT OR REPLACE INTO typed_checkpoints \
                     (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, \
                      checkpoint, channel_versions, metadata, run_id) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                )
                .sql()?
                .execute(params![
                    put.thread_id,
                    put.checkpoint_ns,
                    put.checkpoint_id,
                    put.parent_id,
                    put.checkpoint.type_tag,
                    put.checkpoint.bytes,
                    versions,
                    metadata,
                    run_id
                ])
                .sql()?;
                Ok(())
            })
            .await
    }

    /// Store one task's writes against a checkpoint. Returns once the transaction
    /// committed.
    ///
    /// # Errors
    /// A backend error if the write fails; none of the writes is kept then.
    pub async fn put_writes(&self, writes: TypedWrites) -> Result<()> {
        if writes.writes.is_empty() {
            return Ok(());
        }
        let writes = Arc::new(writes);
        self.db
            .write(move |conn| {
                let sql = if writes.replace {
                    "INSERT OR REPLACE INTO typed_writes \
                     (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, task_path, type, value) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"
                } else {
                    "INSERT OR IGNORE INTO typed_writes \
                     (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, task_path, type, value) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"
                };
                let mut stmt = conn.prepare_cached(sql).sql()?;
                for (idx, channel, value) in &writes.writes {
                    stmt.execute(params![
                        writes.thread_id,
                        writes.checkpoint_ns,
                        writes.checkpoint_id,
                        writes.task_id,
                        idx,
                        channel,
                        writes.task_path,
                        value.type_tag,
                        value.bytes
                    ])
                    .sql()?;
                }
                Ok(())
            })
            .await
    }
}
