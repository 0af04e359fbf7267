//! Writes: `put`, `put_writes` (and both in one transaction), and deleting a thread's or a
//! run's checkpoints. Values are encoded before they are queued for the writer thread.

use super::aad;
use super::rows::{encode, insert_write, CheckpointRow, WriteRow};
use super::SqliteSaver;
use crate::error::{invalid_input, other, SqlResultExt};
use graphloom_core::checkpoint::{
    write_idx, Checkpoint, CheckpointConfig, CheckpointMetadata, TaskWrites, Version,
};
use graphloom_core::Result;
use serde_json::Value;
use std::collections::BTreeMap;

impl SqliteSaver {
    pub(super) async fn put_now(
        &self,
        config: &CheckpointConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: BTreeMap<String, Version>,
    ) -> Result<CheckpointConfig> {
        let row = self.checkpoint_row(config, checkpoint, &metadata, new_versions)?;
        let out = row.config();
        self.db.write(move |conn| row.insert(conn)).await?;
        Ok(out)
    }

    /// A task's writes and then a checkpoint, in one transaction.
    pub(super) async fn put_writes_then_checkpoint_now(
        &self,
        writes: TaskWrites,
        config: &CheckpointConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: BTreeMap<String, Version>,
    ) -> Result<CheckpointConfig> {
        let rows = self.write_rows(&writes.config, writes.writes, &writes.task_id, &writes.task_path)?;
        let row = self.checkpoint_row(config, checkpoint, &metadata, new_versions)?;
        let out = row.config();
        let (thread, ns) = (writes.config.thread_id, writes.config.checkpoint_ns);
        self.db
            .write(move |conn| {
                for w in &rows {
                    insert_write(conn, &thread, &ns, w)?;
                }
                row.insert(conn)
            })
            .await?;
        Ok(out)
    }

    /// Encode a checkpoint and the channel values it brings, ready to insert.
    fn checkpoint_row(
        &self,
        config: &CheckpointConfig,
        mut checkpoint: Checkpoint,
        metadata: &CheckpointMetadata,
        new_versions: BTreeMap<String, Version>,
    ) -> Result<CheckpointRow> {
        let codec = self.codec();
        let thread = config.thread_id.clone();
        let ns = config.checkpoint_ns.clone();
        let id = checkpoint.id.clone();
        let parent = config.checkpoint_id.clone();
        let mut values = std::mem::take(&mut checkpoint.channel_values);
        let mut blobs = Vec::new();
        for (channel, version) in new_versions {
            // A channel with a new version but no value was emptied: nothing to store.
            if let Some(value) = values.remove(&channel) {
                let version = version.to_string();
                let (enc, bytes) = encode(codec, &value, &aad::blob(&thread, &ns, &channel, &version))?;
                blobs.push((channel, version, enc, bytes));
            }
        }
        let metadata =
            serde_json::to_string(metadata).map_err(|e| other(format!("cannot encode metadata: {e}")))?;
        let aad = aad::checkpoint(&thread, &ns, &id, parent.as_deref(), &metadata);
        let (enc, body) = encode(codec, &checkpoint, &aad)?;
        Ok(CheckpointRow {
            thread,
            ns,
            id,
            parent,
            enc,
            body,
            metadata,
            blobs,
        })
    }

    pub(super) async fn put_writes_now(
        &self,
        config: &CheckpointConfig,
        writes: Vec<(String, Value)>,
        task_id: &str,
        task_path: &str,
    ) -> Result<()> {
        let rows = self.write_rows(config, writes, task_id, task_path)?;
        if rows.is_empty() {
            return Ok(());
        }
        let thread = config.thread_id.clone();
        let ns = config.checkpoint_ns.clone();
        self.db
            .write(move |conn| {
                for w in &rows {
                    insert_write(conn, &thread, &ns, w)?;
                }
                Ok(())
            })
            .await
    }

    /// Encode a task's writes, ready to insert.
    fn write_rows(
        &self,
        config: &CheckpointConfig,
        writes: Vec<(String, Value)>,
        task_id: &str,
        task_path: &str,
    ) -> Result<Vec<WriteRow>> {
        let Some(checkpoint_id) = config.checkpoint_id.clone() else {
            return Err(invalid_input("put_writes needs a config with a checkpoint id"));
        };
        let (thread, ns) = (&config.thread_id, &config.checkpoint_ns);
        let mut rows = Vec::with_capacity(writes.len());
        for (position, (channel, value)) in writes.into_iter().enumerate() {
            let idx = write_idx(&channel, position);
            let aad = aad::write(thread, ns, &checkpoint_id, task_id, idx, &channel);
            let (enc, bytes) = encode(self.codec(), &value, &aad)?;
            rows.push(WriteRow {
                checkpoint_id: checkpoint_id.clone(),
                task_id: task_id.to_owned(),
                idx,
                channel,
                task_path: task_path.to_owned(),
                enc,
                bytes,
            });
        }
        Ok(rows)
    }

    pub(super) async fn delete_thread_now(&self, thread_id: &str) -> Result<()> {
        let thread = thread_id.to_owned();
        self.db
            .write(move |conn| {
                for sql in [
                    "DELETE FROM checkpoint_writes WHERE thread_id = ?",
                    "DELETE FROM checkpoint_blobs WHERE thread_id = ?",
                    "DELETE FROM checkpoints WHERE thread_id = ?",
                ] {
                    conn.prepare_cached(sql)
                        .and_then(|mut stmt| stmt.execute([&thread]))
                        .sql()?;
                }
                Ok(())
            })
            .await?;
        self.cache.forget_thread(thread_id);
        Ok(())
    }

    pub(super) async fn delete_run_now(&self, thread_id: &str, run_id: &str) -> Result<()> {
        let (thread, run) = (thread_id.to_owned(), run_id.to_owned());
        self.db
            .write(move |conn| {
                for sql in [
                    "DELETE FROM checkpoint_writes WHERE thread_id = ?1 AND (checkpoint_ns, checkpoint_id) IN \
                     (SELECT checkpoint_ns, checkpoint_id FROM checkpoints \
                      WHERE thread_id = ?1 AND json_extract(metadata, '$.run_id') = ?2)",
                    "DELETE FROM checkpoints WHERE thread_id = ?1 AND json_extract(metadata, '$.run_id') = ?2",
                ] {
                    conn.prepare_cached(sql)
                        .and_then(|mut stmt| stmt.execute([&thread, &run]))
                        .sql()?;
                }
                Ok(())
            })
            .await
    }
}
