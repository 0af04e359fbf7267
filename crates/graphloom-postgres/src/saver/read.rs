//! Reading: `get_tuple` and `list`, resolving delta-encoded channel values.
//!
//! A read runs in one `REPEATABLE READ READ ONLY` transaction (so a concurrent
//! `delete_thread` cannot leave it half a thread) and takes three queries, whatever the
//! number of checkpoints: the checkpoint rows, the blobs of their channel versions with the
//! append chains behind them (one recursive query following `base_version`), and their
//! pending writes. Chains are then resolved in memory with
//! [`resolve_channel`], each blob decoded once.

use super::{aad, PostgresSaver};
use crate::error::SqlxResultExt;
use graphloom_core::checkpoint::{
    resolve_channel, ChannelValue, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointTuple,
    ListQuery, PendingWrite,
};
use graphloom_core::{Error, Result};
use serde_json::Value;
use sqlx::types::Json;
use sqlx::{PgConnection, Postgres, QueryBuilder};
use std::collections::{BTreeMap, HashMap, HashSet};

const CHECKPOINT_COLUMNS: &str =
    "thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, encoding, checkpoint, metadata";

/// The blobs at the wanted `(thread, ns, channel, version)`s and every blob their append
/// chains reach. The walk follows `base_version` only backwards (`base < version`), so a
/// tampered link cannot loop; `UNION` visits each blob once however many chains share it.
const CHAIN_SQL: &str = r#"
WITH RECURSIVE chain(thread_id, checkpoint_ns, channel, version, base_version) AS (
    SELECT b.thread_id, b.checkpoint_ns, b.channel, b.version, b.base_version
    FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS w(thread_id, checkpoint_ns, channel, version)
    JOIN graphloom_checkpoint_blobs b
      ON b.thread_id = w.thread_id AND b.checkpoint_ns = w.checkpoint_ns
     AND b.channel = w.channel AND b.version = w.version
  UNION
    SELECT b.thread_id, b.checkpoint_ns, b.channel, b.version, b.base_version
    FROM chain c
    JOIN graphloom_checkpoint_blobs b
      ON b.thread_id = c.thread_id AND b.checkpoint_ns = c.checkpoint_ns
     AND b.channel = c.channel AND b.version = c.base_version
    WHERE c.base_version < c.version
)
SELECT b.thread_id, b.checkpoint_ns, b.channel, b.version, b.encoding, b.value
FROM chain c
JOIN graphloom_checkpoint_blobs b
  ON b.thread_id = c.thread_id AND b.checkpoint_ns = c.checkpoint_ns
 AND b.channel = c.channel AND b.version = c.version
"#;

const WRITES_SQL: &str = r#"
SELECT w.thread_id, w.checkpoint_ns, w.checkpoint_id, w.task_id, w.idx, w.channel, w.encoding, w.value
FROM graphloom_checkpoint_writes w
JOIN unnest($1::text[], $2::text[], $3::text[]) AS k(thread_id, checkpoint_ns, checkpoint_id)
  ON w.thread_id = k.thread_id AND w.checkpoint_ns = k.checkpoint_ns AND w.checkpoint_id = k.checkpoint_id
ORDER BY w.seq
"#;

type CheckpointRow = (
    String,
    String,
    String,
    Option<String>,
    String,
    Vec<u8>,
    Json<Value>,
);
type BlobRow = (String, String, String, String, String, Vec<u8>);
type WriteRow = (String, String, String, String, i64, String, String, Vec<u8>);
/// `(thread, namespace, channel, version)`.
type BlobKey = (String, String, String, String);
/// `(thread, namespace, checkpoint id)`.
type CheckpointKey = (String, String, String);

/// A checkpoint row, decoded, before its channel values are resolved.
struct Head {
    config: CheckpointConfig,
    parent: Option<String>,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
}

fn corrupt(config: &CheckpointConfig, message: String) -> Error {
    Error::CorruptCheckpoint {
        thread_id: config.thread_id.clone(),
        checkpoint_id: config.checkpoint_id.clone().unwrap_or_default(),
        message,
    }
}

impl PostgresSaver {
    pub(super) async fn read_tuple(&self, config: &CheckpointConfig) -> Result<Option<CheckpointTuple>> {
        let mut tx = self
            .pool
            .begin_with("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            .await
            .during("get_tuple: begin")?;
        let tuple = self.read_tuple_on(&mut tx, config).await?;
        tx.commit().await.during("get_tuple: commit")?;
        Ok(tuple)
    }

    /// [`Self::read_tuple`] on a connection whose transaction the caller holds (a hook
    /// reading the checkpoint its put is writing).
    pub(super) async fn read_tuple_on(
        &self,
        conn: &mut PgConnection,
        config: &CheckpointConfig,
    ) -> Result<Option<CheckpointTuple>> {
        let by_id = format!(
            "SELECT {CHECKPOINT_COLUMNS} FROM graphloom_checkpoints
             WHERE thread_id = $1 AND checkpoint_ns = $2 AND checkpoint_id = $3"
        );
        let latest = format!(
            "SELECT {CHECKPOINT_COLUMNS} FROM graphloom_checkpoints
             WHERE thread_id = $1 AND checkpoint_ns = $2
             ORDER BY checkpoint_id DESC LIMIT 1"
        );
        let row: Option<CheckpointRow> = match &config.checkpoint_id {
            Some(id) => sqlx::query_as(&by_id)
                .bind(&config.thread_id)
                .bind(&config.checkpoint_ns)
                .bind(id),
            None => sqlx::query_as(&latest)
                .bind(&config.thread_id)
                .bind(&config.checkpoint_ns),
        }
        .fetch_optional(&mut *conn)
        .await
        .during("get_tuple")?;
        let tuples = match row {
            Some(row) => self.assemble(conn, vec![row]).await?,
            None => Vec::new(),
        };
        Ok(tuples.into_iter().next())
    }

    pub(super) async fn read_list(&self, query: &ListQuery) -> Result<Vec<CheckpointTuple>> {
        let mut qb = QueryBuilder::<Postgres>::new(format!(
            "SELECT {CHECKPOINT_COLUMNS} FROM graphloom_checkpoints WHERE TRUE"
        ));
        if let Some(thread_id) = &query.thread_id {
            qb.push(" AND thread_id = ").push_bind(thread_id.clone());
        }
        if let Some(ns) = &query.checkpoint_ns {
            qb.push(" AND checkpoint_ns = ").push_bind(ns.clone());
        }
        if let Some(before) = &query.before {
            qb.push(" AND checkpoint_id < ").push_bind(before.clone());
        }
        if !query.filter.is_empty() {
            // Containment finds candidates through the GIN index; the per-key equality makes
            // the match exact (containment alone lets `[1, 2]` match a filter of `[1]`).
            let filter = Value::Object(query.filter.clone());
            qb.push(" AND metadata @> ")
                .push_bind(Json(filter.clone()))
                .push("::jsonb AND NOT EXISTS (SELECT 1 FROM jsonb_each(")
                .push_bind(Json(filter))
                .push(
                    "::jsonb) AS f(key, value) \
                     WHERE graphloom_checkpoints.metadata -> f.key IS DISTINCT FROM f.value)",
                );
        }
        qb.push(" ORDER BY checkpoint_id DESC, thread_id, checkpoint_ns");
        if let Some(limit) = query.limit {
            qb.push(" LIMIT ")
                .push_bind(i64::try_from(limit).unwrap_or(i64::MAX));
        }
        let mut tx = self
            .pool
            .begin_with("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            .await
            .during("list: begin")?;
        let rows: Vec<CheckpointRow> = qb.build_query_as().fetch_all(&mut *tx).await.during("list")?;
        let tuples = if rows.is_empty() {
            Vec::new()
        } else {
            self.assemble(&mut tx, rows).await?
        };
        tx.commit().await.during("list: commit")?;
        Ok(tuples)
    }

    fn decode_head(&self, row: CheckpointRow) -> Result<Head> {
        let (thread_id, checkpoint_ns, checkpoint_id, parent, encoding, bytes, metadata) = row;
        let config = CheckpointConfig {
            thread_id,
            checkpoint_ns,
            checkpoint_id: Some(checkpoint_id),
        };
        let id = config.checkpoint_id.as_deref().unwrap_or_default();
        let checkpoint: Checkpoint = self
            .codec
            .decode(
                &encoding,
                &bytes,
                &aad::checkpoint(&config.thread_id, &config.checkpoint_ns, id),
            )
            .map_err(|m| corrupt(&config, format!("checkpoint row: {m}")))?;
        if checkpoint.id != id {
            return Err(corrupt(
                &config,
                format!("checkpoint row holds checkpoint `{}`", checkpoint.id),
            ));
        }
        let metadata: CheckpointMetadata = serde_json::from_value(metadata.0)
            .map_err(|e| corrupt(&config, format!("metadata does not decode: {e}")))?;
        Ok(Head {
            config,
            parent,
            checkpoint,
            metadata,
        })
    }

    /// Decode checkpoint rows and complete them with resolved channel values and writes.
    async fn assemble(
        &self,
        conn: &mut PgConnection,
        rows: Vec<CheckpointRow>,
    ) -> Result<Vec<CheckpointTuple>> {
        let heads: Vec<Head> = rows
            .into_iter()
            .map(|row| self.decode_head(row))
            .collect::<Result<_>>()?;

        // Every channel version the checkpoints need, once.
        let mut wanted: HashSet<BlobKey> = HashSet::new();
        for head in &heads {
            for (channel, version) in &head.checkpoint.channel_versions {
                wanted.insert((
                    head.config.thread_id.clone(),
                    head.config.checkpoint_ns.clone(),
                    channel.clone(),
                    version.to_string(),
                ));
            }
        }
        let mut columns: [Vec<String>; 4] = Default::default();
        for (t, n, c, v) in wanted {
            columns[0].push(t);
            columns[1].push(n);
            columns[2].push(c);
            columns[3].push(v);
        }
        let [threads, nss, channels, versions] = columns;
        let blob_rows: Vec<BlobRow> = sqlx::query_as(CHAIN_SQL)
            .bind(threads)
            .bind(nss)
            .bind(channels)
            .bind(versions)
            .fetch_all(&mut *conn)
            .await
            .during("read channel blobs")?;
        let raw: HashMap<BlobKey, (String, Vec<u8>)> = blob_rows
            .into_iter()
            .map(|(t, n, c, v, enc, bytes)| ((t, n, c, v), (enc, bytes)))
            .collect();

        // Pending writes of every checkpoint, in write order.
        let keys: HashSet<CheckpointKey> = heads
            .iter()
            .map(|h| {
                (
                    h.config.thread_id.clone(),
                    h.config.checkpoint_ns.clone(),
                    h.checkpoint.id.clone(),
                )
            })
            .collect();
        let mut columns: [Vec<String>; 3] = Default::default();
        for (t, n, c) in keys {
            columns[0].push(t);
            columns[1].push(n);
            columns[2].push(c);
        }
        let [threads, nss, ids] = columns;
        let write_rows: Vec<WriteRow> = sqlx::query_as(WRITES_SQL)
            .bind(threads)
            .bind(nss)
            .bind(ids)
            .fetch_all(&mut *conn)
            .await
            .during("read pending writes")?;
        let mut writes: HashMap<CheckpointKey, Vec<PendingWrite>> = HashMap::new();
        for (thread_id, ns, checkpoint_id, task_id, idx, channel, encoding, bytes) in write_rows {
            let value: Value = self
                .codec
                .decode(
                    &encoding,
                    &bytes,
                    &aad::write(&thread_id, &ns, &checkpoint_id, &task_id, idx, &channel),
                )
                .map_err(|m| Error::CorruptCheckpoint {
                    thread_id: thread_id.clone(),
                    checkpoint_id: checkpoint_id.clone(),
                    message: format!("pending write of task `{task_id}` to `{channel}`: {m}"),
                })?;
            writes
                .entry((thread_id, ns, checkpoint_id))
                .or_default()
                .push(PendingWrite {
                    task_id,
                    channel,
                    value,
                });
        }

        // Checkpoints listed together share most of their chains: decode each blob once.
        let mut decoded: Option<HashMap<BlobKey, ChannelValue>> = (heads.len() > 1).then(HashMap::new);
        let mut out = Vec::with_capacity(heads.len());
        for head in heads {
            let values = self.resolve(&head, &raw, decoded.as_mut())?;
            let Head {
                config,
                parent,
                mut checkpoint,
                metadata,
            } = head;
            checkpoint.channel_values = values;
            let pending_writes = writes
                .remove(&(
                    config.thread_id.clone(),
                    config.checkpoint_ns.clone(),
                    checkpoint.id.clone(),
                ))
                .unwrap_or_default();
            let parent_config = parent.map(|p| CheckpointConfig {
                checkpoint_id: Some(p),
                ..config.clone()
            });
            out.push(CheckpointTuple {
                config,
                checkpoint,
                metadata,
                parent_config,
                pending_writes,
            });
        }
        Ok(out)
    }

    /// Every channel of `head` at its version, resolved to a full value. A channel whose
    /// exact version has no blob is empty (it was emptied, or never had a value).
    fn resolve(
        &self,
        head: &Head,
        raw: &HashMap<BlobKey, (String, Vec<u8>)>,
        mut decoded: Option<&mut HashMap<BlobKey, ChannelValue>>,
    ) -> Result<BTreeMap<String, ChannelValue>> {
        let (thread, ns) = (&head.config.thread_id, &head.config.checkpoint_ns);
        let key = |channel: &str, version: String| (thread.clone(), ns.clone(), channel.to_owned(), version);
        let mut values = BTreeMap::new();
        for (channel, version) in &head.checkpoint.channel_versions {
            if !raw.contains_key(&key(channel, version.to_string())) {
                continue;
            }
            let mut decode_error: Option<String> = None;
            let resolved = resolve_channel(channel, version, |at| {
                let k = key(channel, at.to_string());
                if let Some(hit) = decoded.as_ref().and_then(|d| d.get(&k)) {
                    return Some(hit.clone());
                }
                let (encoding, bytes) = raw.get(&k)?;
                match self.codec.decode::<ChannelValue>(
                    encoding,
                    bytes,
                    &aad::blob(thread, ns, channel, &k.3),
                ) {
                    Ok(value) => {
                        if let Some(cache) = decoded.as_mut() {
                            cache.insert(k, value.clone());
                        }
                        Some(value)
                    }
                    Err(m) => {
                        decode_error = Some(format!("channel `{channel}` version {at}: {m}"));
                        None
                    }
                }
            });
            let value = resolved
                .map_err(|e| corrupt(&head.config, decode_error.take().unwrap_or_else(|| e.to_string())))?;
            values.insert(channel.clone(), ChannelValue::Full(value));
        }
        Ok(values)
    }
}
