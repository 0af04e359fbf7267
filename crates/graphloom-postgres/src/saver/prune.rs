//! `prune_to_latest`: a thread's history cut down to its latest checkpoint per namespace
//! (retention's `keep_latest`). The latest checkpoints are read with their values
//! resolved; one transaction, holding the thread's checkpoint rows locked, then drops every
//! other checkpoint, their pending writes and every blob of the namespace, and stores the
//! kept checkpoints' values whole again (an append chain they leaned on is gone). A
//! namespace whose latest checkpoint changed between the read and the write is left alone.

use super::{aad, PostgresSaver};
use crate::error::{backend, SqlxResultExt};
use graphloom_core::checkpoint::CheckpointConfig;
use graphloom_core::{BackendErrorKind, Result};

/// One namespace's latest checkpoint, and its values encoded as whole blobs.
struct Kept {
    ns: String,
    id: String,
    /// Every channel of the checkpoint and its version.
    at_channels: Vec<String>,
    at_versions: Vec<String>,
    /// The values to store whole.
    channels: Vec<String>,
    versions: Vec<String>,
    encodings: Vec<String>,
    blobs: Vec<Vec<u8>>,
}

impl PostgresSaver {
    pub(super) async fn prune_history(&self, thread_id: &str) -> Result<usize> {
        let namespaces: Vec<String> = sqlx::query_scalar(
            "SELECT DISTINCT checkpoint_ns FROM graphloom_checkpoints WHERE thread_id = $1",
        )
        .bind(thread_id)
        .fetch_all(&self.pool)
        .await
        .during("prune_to_latest")?;
        let mut kept = Vec::with_capacity(namespaces.len());
        for ns in namespaces {
            let config = CheckpointConfig {
                thread_id: thread_id.to_owned(),
                checkpoint_ns: ns.clone(),
                checkpoint_id: None,
            };
            let Some(tuple) = self.read_tuple(&config).await? else {
                continue;
            };
            let cp = tuple.checkpoint;
            let mut k = Kept {
                ns,
                id: cp.id.clone(),
                at_channels: cp.channel_versions.keys().cloned().collect(),
                at_versions: cp.channel_versions.values().map(ToString::to_string).collect(),
                channels: Vec::new(),
                versions: Vec::new(),
                encodings: Vec::new(),
                blobs: Vec::new(),
            };
            for (channel, value) in &cp.channel_values {
                let Some(version) = cp.channel_versions.get(channel) else {
                    continue;
                };
                let version = version.to_string();
                let (tag, bytes) = self
                    .codec
                    .encode(value, &aad::blob(thread_id, &k.ns, channel, &version))
                    .map_err(|m| backend(BackendErrorKind::Other, format!("prune_to_latest: {m}")))?;
                k.channels.push(channel.clone());
                k.versions.push(version);
                k.encodings.push(tag.to_owned());
                k.blobs.push(bytes);
            }
            kept.push(k);
        }
        let mut tx = self.pool.begin().await.during("prune_to_latest")?;
        let mut dropped = 0u64;
        for k in kept {
            // Lock the latest checkpoint; a checkpoint put meanwhile is newer and is kept, as
            // are the blobs of versions newer than the kept checkpoint's.
            let latest: Option<String> = sqlx::query_scalar(
                "SELECT checkpoint_id FROM graphloom_checkpoints WHERE thread_id = $1 AND checkpoint_ns = $2 \
                 ORDER BY checkpoint_id DESC LIMIT 1 FOR UPDATE",
            )
            .bind(thread_id)
            .bind(&k.ns)
            .fetch_optional(&mut *tx)
            .await
            .during("prune_to_latest")?;
            if latest.as_deref() != Some(k.id.as_str()) {
                continue;
            }
            sqlx::query(
                "DELETE FROM graphloom_checkpoint_writes WHERE thread_id = $1 AND checkpoint_ns = $2 \
                 AND checkpoint_id < $3",
            )
            .bind(thread_id)
            .bind(&k.ns)
            .bind(&k.id)
            .execute(&mut *tx)
            .await
            .during("prune_to_latest")?;
            dropped += sqlx::query(
                "DELETE FROM graphloom_checkpoints WHERE thread_id = $1 AND checkpoint_ns = $2 \
                 AND checkpoint_id < $3",
            )
            .bind(thread_id)
            .bind(&k.ns)
            .bind(&k.id)
            .execute(&mut *tx)
            .await
            .during("prune_to_latest")?
            .rows_affected();
            // Versions sort as text: every version up to the kept one of each channel goes.
            sqlx::query(
                "DELETE FROM graphloom_checkpoint_blobs b \
                 USING unnest($3::text[], $4::text[]) AS k(channel, version) \
                 WHERE b.thread_id = $1 AND b.checkpoint_ns = $2 AND b.channel = k.channel \
                 AND b.version <= k.version",
            )
            .bind(thread_id)
            .bind(&k.ns)
            .bind(k.at_channels)
            .bind(k.at_versions)
            .execute(&mut *tx)
            .await
            .during("prune_to_latest")?;
            sqlx::query(
                "INSERT INTO graphloom_checkpoint_blobs \
                 (thread_id, checkpoint_ns, channel, version, base_version, encoding, value) \
                 SELECT $1, $2, b.channel, b.version, NULL, b.encoding, b.value \
                 FROM unnest($3::text[], $4::text[], $5::text[], $6::bytea[]) AS b(channel, version, encoding, value) \
                 ON CONFLICT (thread_id, checkpoint_ns, channel, version) DO UPDATE SET \
                 base_version = NULL, encoding = EXCLUDED.encoding, value = EXCLUDED.value",
            )
            .bind(thread_id)
            .bind(&k.ns)
            .bind(k.channels)
            .bind(k.versions)
            .bind(k.encodings)
            .bind(k.blobs)
            .execute(&mut *tx)
            .await
            .during("prune_to_latest")?;
        }
        tx.commit().await.during("prune_to_latest")?;
        Ok(usize::try_from(dropped).unwrap_or(usize::MAX))
    }
}
