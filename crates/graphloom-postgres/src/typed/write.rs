//! `put` and `put_writes`: one transaction each.

use super::{TypedPut, TypedSaver, TypedWrites};
use crate::error::SqlxResultExt;
use graphloom_core::Result;

impl TypedSaver {
    /// Store a checkpoint (replacing one stored under the same id) and the channel versions
    /// it writes first (a version already stored is kept). Returns once committed.
    ///
    /// # Errors
    /// A backend error; nothing of the write is kept then.
    pub async fn put(&self, put: TypedPut) -> Result<()> {
        let run_id = put
            .metadata
            .get("run_id")
            .and_then(|v| v.as_str())
            .map(str::to_owned);
        let metadata = serde_json::Value::Object(put.metadata).to_string();
        let (channels, versions): (Vec<String>, Vec<String>) = put.channel_versions.into_iter().unzip();
        let mut tx = self.pool.begin().await.during("put: begin")?;
        if !put.blobs.is_empty() {
            let mut b_channels = Vec::with_capacity(put.blobs.len());
            let mut b_versions = Vec::with_capacity(put.blobs.len());
            let mut b_types = Vec::with_capacity(put.blobs.len());
            let mut b_values = Vec::with_capacity(put.blobs.len());
            for (channel, version, value) in put.blobs {
                b_channels.push(channel);
                b_versions.push(version);
                b_types.push(value.type_tag);
                b_values.push(value.bytes);
            }
            sqlx::query(
                "INSERT INTO typed_blobs (thread_id, checkpoint_ns, channel, version, type, value) \
                 SELECT $1, $2, c, v, t, b FROM unnest($3::text[], $4::text[], $5::text[], $6::bytea[]) AS x(c, v, t, b) \
                 ON CONFLICT DO NOTHING",
            )
            .bind(&put.thread_id)
            .bind(&put.checkpoint_ns)
            .bind(b_channels)
            .bind(b_versions)
            .bind(b_types)
            .bind(b_values)
            .execute(&mut *tx)
            .await
            .during("put: blobs")?;
        }
        sqlx::query(
            "INSERT INTO typed_checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, \
             type, checkpoint, channels, versions, metadata, run_id) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) \
             ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id) DO UPDATE SET \
             parent_checkpoint_id = EXCLUDED.parent_checkpoint_id, type = EXCLUDED.type, \
             checkpoint = EXCLUDED.checkpoint, channels = EXCLUDED.channels, versions = EXCLUDED.versions, \
             metadata = EXCLUDED.metadata, run_id = EXCLUDED.run_id",
        )
        .bind(&put.thread_id)
        .bind(&put.checkpoint_ns)
        .bind(&put.checkpoint_id)
        .bind(&put.parent_id)
        .bind(&put.checkpoint.type_tag)
        .bind(&put.checkpoint.bytes)
        .bind(channels)
        .bind(versions)
        .bind(metadata)
        .bind(run_id)
        .execute(&mut *tx)
        .await
        .during("put: checkpoint")?;
        tx.commit().await.during("put: commit")
    }

    /// Store one task's writes against a checkpoint, in one statement. Returns once
    /// committed.
    ///
    /// # Errors
    /// A backend error; none of the writes is kept then.
    pub async fn put_writes(&self, writes: TypedWrites) -> Result<()> {
        if writes.writes.is_empty() {
            return Ok(());
        }
        let n = writes.writes.len();
        let (mut idxs, mut channels, mut types, mut values) = (
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
        );
        for (idx, channel, value) in writes.writes {
            idxs.push(i32::try_from(idx).unwrap_or(i32::MAX));
            channels.push(channel);
            types.push(value.type_tag);
            values.push(value.bytes);
        }
        let on_conflict = if writes.replace {
            "ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO UPDATE SET \
             channel = EXCLUDED.channel, task_path = EXCLUDED.task_path, type = EXCLUDED.type, value = EXCLUDED.value"
        } else {
            "ON CONFLICT DO NOTHING"
        };
        sqlx::query(&format!(
            "INSERT INTO typed_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, task_path, type, value) \
             SELECT $1, $2, $3, $4, i, c, $5, t, b \
             FROM unnest($6::int4[], $7::text[], $8::text[], $9::bytea[]) AS x(i, c, t, b) {on_conflict}"
        ))
        .bind(&writes.thread_id)
        .bind(&writes.checkpoint_ns)
        .bind(&writes.checkpoint_id)
        .bind(&writes.task_id)
        .bind(&writes.task_path)
        .bind(idxs)
        .bind(channels)
        .bind(types)
        .bind(values)
        .execute(&self.pool)
        .await
        .during("put_writes")
        .map(|_| ())
    }
}
