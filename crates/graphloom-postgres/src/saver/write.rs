//! Writing: `put`, `put_writes`, `delete_thread`, `copy_thread`.

use super::{aad, PostgresSaver};
use crate::error::{backend, SqlxResultExt};
use graphloom_core::checkpoint::codec::TAG_JSON;
use graphloom_core::checkpoint::{
    write_idx, ChannelValue, Checkpoint, CheckpointConfig, CheckpointMetadata, TaskWrites, Version,
};
use graphloom_core::{BackendError, BackendErrorKind, Error, Result};
use serde_json::Value;
use sqlx::types::Json;
use std::collections::{BTreeMap, HashMap};

/// The blobs CTE and the checkpoint insert shared by [`PUT_SQL`] and
/// [`WRITES_THEN_PUT_SQL`] (arguments `$1..$12`).
macro_rules! put_body {
    () => {
        r#"blobs AS (
    INSERT INTO graphloom_checkpoint_blobs
        (thread_id, checkpoint_ns, channel, version, base_version, encoding, value)
    SELECT $1, $2, b.channel, b.version, b.base_version, b.encoding, b.value
    FROM unnest($3::text[], $4::text[], $5::text[], $6::text[], $7::bytea[])
        AS b(channel, version, base_version, encoding, value)
    ON CONFLICT DO NOTHING
)
INSERT INTO graphloom_checkpoints
    (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, encoding, checkpoint, metadata)
VALUES ($1, $2, $8, $9, $10, $11, $12)
ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id) DO UPDATE SET
    parent_checkpoint_id = EXCLUDED.parent_checkpoint_id,
    encoding = EXCLUDED.encoding,
    checkpoint = EXCLUDED.checkpoint,
    metadata = EXCLUDED.metadata
"#
    };
}

/// The pending-writes insert of [`WRITES_SQL`] and [`WRITES_THEN_PUT_SQL`]: thread `$1`,
/// then the eight column arrays given as `unnest(...)` arguments.
macro_rules! writes_insert {
    ($arrays:literal) => {
        concat!(
            r#"INSERT INTO graphloom_checkpoint_writes
    (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, task_path, encoding, value)
SELECT $1, w.checkpoint_ns, w.checkpoint_id, w.task_id, w.idx, w.channel, w.task_path, w.encoding, w.value
FROM unnest("#,
            $arrays,
            r#")
    WITH ORDINALITY AS w(checkpoint_ns, checkpoint_id, task_id, idx, channel, task_path, encoding, value, ord)
ORDER BY w.ord
ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO UPDATE SET
    channel = EXCLUDED.channel,
    task_path = EXCLUDED.task_path,
    encoding = EXCLUDED.encoding,
    value = EXCLUDED.value
WHERE EXCLUDED.idx < 0
"#
        )
    };
}

/// Blobs and the checkpoint row in one statement: atomic, one round trip.
const PUT_SQL: &str = concat!("WITH ", put_body!());

/// Pending writes of one or more tasks. An ordinary write (idx >= 0) already stored keeps its
/// first value; a special one (idx < 0) is replaced in place (its `seq`, so its position in
/// write order, is kept).
const WRITES_SQL: &str = writes_insert!(
    "$2::text[], $3::text[], $4::text[], $5::bigint[], $6::text[], $7::text[], $8::text[], $9::bytea[]"
);

/// A task's writes (as [`WRITES_SQL`], arrays `$13..$20`), then blobs and the checkpoint row
/// (as [`PUT_SQL`]) of the same thread: one statement, so one round trip and one commit.
const WRITES_THEN_PUT_SQL: &str = concat!(
    "WITH writes AS (\n",
    writes_insert!(
        "$13::text[], $14::text[], $15::text[], $16::bigint[], $17::text[], $18::text[], $19::text[], $20::bytea[]"
    ),
    "),\n",
    put_body!()
);

/// A query with its arguments bound so far.
type PgQuery = sqlx::query::Query<'static, sqlx::Postgres, sqlx::postgres::PgArguments>;

/// The arguments `$1..$12` of [`PUT_SQL`] / [`WRITES_THEN_PUT_SQL`].
struct PutArgs {
    thread: String,
    ns: String,
    channels: Vec<String>,
    versions: Vec<String>,
    bases: Vec<Option<String>>,
    encodings: Vec<String>,
    blobs: Vec<Vec<u8>>,
    id: String,
    parent: Option<String>,
    tag: String,
    bytes: Vec<u8>,
    metadata: Value,
}

impl PutArgs {
    fn config(&self) -> CheckpointConfig {
        CheckpointConfig {
            thread_id: self.thread.clone(),
            checkpoint_ns: self.ns.clone(),
            checkpoint_id: Some(self.id.clone()),
        }
    }

    fn bind(self, sql: &'static str) -> PgQuery {
        sqlx::query(sql)
            .bind(self.thread)
            .bind(self.ns)
            .bind(self.channels)
            .bind(self.versions)
            .bind(self.bases)
            .bind(self.encodings)
            .bind(self.blobs)
            .bind(self.id)
            .bind(self.parent)
            .bind(self.tag)
            .bind(self.bytes)
            .bind(Json(self.metadata))
    }
}

/// A checkpoint row of a thread: ns, id, parent, encoding, checkpoint, metadata.
type CheckpointRow = (String, String, Option<String>, String, Vec<u8>, Json<Value>);
/// A blob row of a thread: ns, channel, version, base version, encoding, value.
type BlobRow = (String, String, String, Option<String>, String, Vec<u8>);
/// A write row of a thread: ns, checkpoint id, task id, idx, channel, task path, encoding, value.
type WriteRow = (String, String, String, i64, String, String, String, Vec<u8>);

/// Rows for [`WRITES_SQL`], in write order.
#[derive(Default)]
struct WriteRows {
    /// Position of each `(ns, checkpoint, task, idx)` in the columns below.
    seen: HashMap<(String, String, String, i64), usize>,
    ns: Vec<String>,
    checkpoint_id: Vec<String>,
    task_id: Vec<String>,
    idx: Vec<i64>,
    channel: Vec<String>,
    task_path: Vec<String>,
    encoding: Vec<String>,
    value: Vec<Vec<u8>>,
}

impl WriteRows {
    /// Add a write, folding a repeat of `(ns, checkpoint, task, idx)` within this batch the
    /// way the table would (one statement may not touch a row twice).
    #[allow(clippy::too_many_arguments)]
    fn push(
        &mut self,
        ns: &str,
        checkpoint_id: &str,
        task_id: &str,
        idx: i64,
        channel: String,
        task_path: &str,
        encoding: String,
        value: Vec<u8>,
    ) {
        let key = (ns.to_owned(), checkpoint_id.to_owned(), task_id.to_owned(), idx);
        match self.seen.get(&key).copied() {
            Some(i) if idx < 0 => {
                self.channel[i] = channel;
                self.task_path[i] = task_path.to_owned();
                self.encoding[i] = encoding;
                self.value[i] = value;
            }
            Some(_) => {}
            None => {
                self.seen.insert(key, self.idx.len());
                self.ns.push(ns.to_owned());
                self.checkpoint_id.push(checkpoint_id.to_owned());
                self.task_id.push(task_id.to_owned());
                self.idx.push(idx);
                self.channel.push(channel);
                self.task_path.push(task_path.to_owned());
                self.encoding.push(encoding);
                self.value.push(value);
            }
        }
    }

    async fn insert<'e, E>(self, executor: E, thread_id: &str, what: &str) -> Result<()>
    where
        E: sqlx::PgExecutor<'e>,
    {
        if self.idx.is_empty() {
            return Ok(());
        }
        self.bind_arrays(sqlx::query(WRITES_SQL).bind(thread_id.to_owned()))
            .execute(executor)
            .await
            .during(what)?;
        Ok(())
    }

    /// Bind the eight column arrays, in [`WRITES_SQL`]'s order.
    fn bind_arrays(self, query: PgQuery) -> PgQuery {
        query
            .bind(self.ns)
            .bind(self.checkpoint_id)
            .bind(self.task_id)
            .bind(self.idx)
            .bind(self.channel)
            .bind(self.task_path)
            .bind(self.encoding)
            .bind(self.value)
    }
}

fn encode_failed<E: std::error::Error + Send + Sync + 'static>(what: &str, e: E) -> Error {
    Error::Backend(BackendError::caused_by(
        BackendErrorKind::Other,
        format!("{what}: {e}"),
        e,
    ))
}

impl PostgresSaver {
    pub(super) async fn write_checkpoint(
        &self,
        config: &CheckpointConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: BTreeMap<String, Version>,
    ) -> Result<CheckpointConfig> {
        let hooks = self.wanted_hooks(config, &checkpoint, &metadata);
        if hooks.is_empty() {
            return self
                .put_on(&self.pool, config, checkpoint, metadata, new_versions)
                .await;
        }
        // The hooks see the checkpoint as `put` got it; the insert consumes it.
        let (seen, seen_metadata) = (checkpoint.clone(), metadata.clone());
        self.ready(&hooks).await?;
        let mut tx = self.pool.begin().await.during("put: begin")?;
        let out = self
            .put_on(&mut *tx, config, checkpoint, metadata, new_versions)
            .await?;
        self.apply_hooks(&mut tx, &hooks, config, &seen, &seen_metadata)
            .await?;
        tx.commit().await.during("put: commit")?;
        Ok(out)
    }

    /// A task's writes and then a checkpoint in one transaction: one commit.
    pub(super) async fn write_pending_then_checkpoint(
        &self,
        writes: TaskWrites,
        config: &CheckpointConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: BTreeMap<String, Version>,
    ) -> Result<CheckpointConfig> {
        let hooks = self.wanted_hooks(config, &checkpoint, &metadata);
        if writes.config.thread_id != config.thread_id || !hooks.is_empty() {
            // Other threads: never from the executor (a task writes on its own thread);
            // keep it correct. Hooks: their writes join the same transaction.
            let seen = (!hooks.is_empty()).then(|| (checkpoint.clone(), metadata.clone()));
            self.ready(&hooks).await?;
            let mut tx = self.pool.begin().await.during("put: begin")?;
            self.pending_on(
                &mut *tx,
                &writes.config,
                writes.writes,
                &writes.task_id,
                &writes.task_path,
            )
            .await?;
            let out = self
                .put_on(&mut *tx, config, checkpoint, metadata, new_versions)
                .await?;
            if let Some((seen, seen_metadata)) = &seen {
                self.apply_hooks(&mut tx, &hooks, config, seen, seen_metadata)
                    .await?;
            }
            tx.commit().await.during("put: commit")?;
            return Ok(out);
        }
        let rows = self.pending_rows(&writes.config, writes.writes, &writes.task_id, &writes.task_path)?;
        let args = self.put_args(config, checkpoint, metadata, new_versions)?;
        let out = args.config();
        rows.bind_arrays(args.bind(WRITES_THEN_PUT_SQL))
            .execute(&self.pool)
            .await
            .during("put")?;
        Ok(out)
    }

    async fn put_on<'e, E: sqlx::PgExecutor<'e>>(
        &self,
        executor: E,
        config: &CheckpointConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: BTreeMap<String, Version>,
    ) -> Result<CheckpointConfig> {
        let args = self.put_args(config, checkpoint, metadata, new_versions)?;
        let out = args.config();
        args.bind(PUT_SQL).execute(executor).await.during("put")?;
        Ok(out)
    }

    /// Encode a checkpoint and its new channel values as [`PUT_SQL`]'s arguments.
    fn put_args(
        &self,
        config: &CheckpointConfig,
        mut checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: BTreeMap<String, Version>,
    ) -> Result<PutArgs> {
        let (thread, ns) = (config.thread_id.as_str(), config.checkpoint_ns.as_str());
        let values = std::mem::take(&mut checkpoint.channel_values);
        let mut channels = Vec::with_capacity(new_versions.len());
        let mut versions = Vec::with_capacity(new_versions.len());
        let mut bases: Vec<Option<String>> = Vec::with_capacity(new_versions.len());
        let mut encodings = Vec::with_capacity(new_versions.len());
        let mut blobs = Vec::with_capacity(new_versions.len());
        for (channel, version) in &new_versions {
            // A channel with a new version but no value was emptied: nothing to store.
            let Some(value) = values.get(channel) else {
                continue;
            };
            let version = version.to_string();
            let (tag, bytes) = self
                .codec
                .encode(value, &aad::blob(thread, ns, channel, &version))
                .map_err(|m| encode_failed("put: channel value", m))?;
            bases.push(match value {
                ChannelValue::Append { base, .. } => Some(base.to_string()),
                ChannelValue::Full(_) | ChannelValue::Items(_) => None,
            });
            channels.push(channel.clone());
            versions.push(version);
            encodings.push(tag.to_owned());
            blobs.push(bytes);
        }
        let id = checkpoint.id.clone();
        let (tag, bytes) = self
            .codec
            .encode(&checkpoint, &aad::checkpoint(thread, ns, &id))
            .map_err(|m| encode_failed("put: checkpoint", m))?;
        let metadata = serde_json::to_value(&metadata).map_err(|e| encode_failed("put: metadata", e))?;
        Ok(PutArgs {
            thread: thread.to_owned(),
            ns: ns.to_owned(),
            channels,
            versions,
            bases,
            encodings,
            blobs,
            id,
            parent: config.checkpoint_id.clone(),
            tag: tag.to_owned(),
            bytes,
            metadata,
        })
    }

    pub(super) async fn write_pending(
        &self,
        config: &CheckpointConfig,
        writes: Vec<(String, Value)>,
        task_id: &str,
        task_path: &str,
    ) -> Result<()> {
        self.pending_on(&self.pool, config, writes, task_id, task_path)
            .await
    }

    async fn pending_on<'e, E: sqlx::PgExecutor<'e>>(
        &self,
        executor: E,
        config: &CheckpointConfig,
        writes: Vec<(String, Value)>,
        task_id: &str,
        task_path: &str,
    ) -> Result<()> {
        let rows = self.pending_rows(config, writes, task_id, task_path)?;
        rows.insert(executor, &config.thread_id, "put_writes").await
    }

    /// Encode a task's writes as [`WRITES_SQL`]'s rows.
    fn pending_rows(
        &self,
        config: &CheckpointConfig,
        writes: Vec<(String, Value)>,
        task_id: &str,
        task_path: &str,
    ) -> Result<WriteRows> {
        let Some(checkpoint_id) = config.checkpoint_id.as_deref() else {
            return Err(backend(
                BackendErrorKind::InvalidInput,
                "put_writes needs a config with a checkpoint id",
            ));
        };
        let (thread, ns) = (config.thread_id.as_str(), config.checkpoint_ns.as_str());
        let mut rows = WriteRows::default();
        for (position, (channel, value)) in writes.into_iter().enumerate() {
            let idx = write_idx(&channel, position);
            let (tag, bytes) = self
                .codec
                .encode(
                    &value,
                    &aad::write(thread, ns, checkpoint_id, task_id, idx, &channel),
                )
                .map_err(|m| encode_failed("put_writes", m))?;
            rows.push(
                ns,
                checkpoint_id,
                task_id,
                idx,
                channel,
                task_path,
                tag.to_owned(),
                bytes,
            );
        }
        Ok(rows)
    }

    pub(super) async fn remove_thread(&self, thread_id: &str) -> Result<()> {
        sqlx::query(
            "WITH w AS (DELETE FROM graphloom_checkpoint_writes WHERE thread_id = $1),
                  b AS (DELETE FROM graphloom_checkpoint_blobs WHERE thread_id = $1)
             DELETE FROM graphloom_checkpoints WHERE thread_id = $1",
        )
        .bind(thread_id)
        .execute(&self.pool)
        .await
        .during("delete_thread")?;
        Ok(())
    }

    pub(super) async fn remove_run(&self, thread_id: &str, run_id: &str) -> Result<()> {
        sqlx::query(
            "WITH gone AS (DELETE FROM graphloom_checkpoints \
                 WHERE thread_id = $1 AND metadata @> jsonb_build_object('run_id', $2::text) \
                 RETURNING checkpoint_ns, checkpoint_id) \
             DELETE FROM graphloom_checkpoint_writes w USING gone \
             WHERE w.thread_id = $1 AND w.checkpoint_ns = gone.checkpoint_ns \
               AND w.checkpoint_id = gone.checkpoint_id",
        )
        .bind(thread_id)
        .bind(run_id)
        .execute(&self.pool)
        .await
        .during("delete_run")?;
        Ok(())
    }

    /// Re-encode a value for its row in the target thread. Plaintext rows are copied as they
    /// are; sealed ones are opened with the source row's associated data and sealed again
    /// with the target's (a moved sealed value would not decode).
    fn reseal(
        &self,
        tag: String,
        bytes: Vec<u8>,
        from: &[u8],
        to: &[u8],
    ) -> Result<(String, Vec<u8>), String> {
        if tag == TAG_JSON && !self.codec.is_encrypted() {
            return Ok((tag, bytes));
        }
        let value: Value = self.codec.decode(&tag, &bytes, from).map_err(|e| e.to_string())?;
        let (tag, bytes) = self.codec.encode(&value, to).map_err(|e| e.to_string())?;
        Ok((tag.to_owned(), bytes))
    }

    pub(super) async fn duplicate_thread(&self, source: &str, target: &str) -> Result<()> {
        if source == target {
            return Ok(());
        }
        let corrupt = |checkpoint_id: &str, message: String| Error::CorruptCheckpoint {
            thread_id: source.to_owned(),
            checkpoint_id: checkpoint_id.to_owned(),
            message: format!("copy_thread: {message}"),
        };
        let mut tx = self
            .pool
            .begin_with("BEGIN ISOLATION LEVEL REPEATABLE READ")
            .await
            .during("copy_thread: begin")?;

        // Checkpoints.
        let rows: Vec<CheckpointRow> = sqlx::query_as(
            "SELECT checkpoint_ns, checkpoint_id, parent_checkpoint_id, encoding, checkpoint, metadata
             FROM graphloom_checkpoints WHERE thread_id = $1",
        )
        .bind(source)
        .fetch_all(&mut *tx)
        .await
        .during("copy_thread: read checkpoints")?;
        if rows.is_empty() {
            tx.commit().await.during("copy_thread: commit")?;
            return Ok(());
        }
        let n = rows.len();
        let (mut nss, mut ids, mut parents, mut encs, mut cps, mut metas) = (
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
        );
        for (ns, id, parent, enc, bytes, meta) in rows {
            let (enc, bytes) = self
                .reseal(
                    enc,
                    bytes,
                    &aad::checkpoint(source, &ns, &id),
                    &aad::checkpoint(target, &ns, &id),
                )
                .map_err(|m| corrupt(&id, m))?;
            nss.push(ns);
            ids.push(id);
            parents.push(parent);
            encs.push(enc);
            cps.push(bytes);
            metas.push(meta);
        }
        sqlx::query(
            "INSERT INTO graphloom_checkpoints
                 (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, encoding, checkpoint, metadata)
             SELECT $1, c.checkpoint_ns, c.checkpoint_id, c.parent_checkpoint_id, c.encoding, c.checkpoint, c.metadata
             FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::bytea[], $7::jsonb[])
                 AS c(checkpoint_ns, checkpoint_id, parent_checkpoint_id, encoding, checkpoint, metadata)
             ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id) DO UPDATE SET
                 parent_checkpoint_id = EXCLUDED.parent_checkpoint_id,
                 encoding = EXCLUDED.encoding,
                 checkpoint = EXCLUDED.checkpoint,
                 metadata = EXCLUDED.metadata",
        )
        .bind(target)
        .bind(nss)
        .bind(ids)
        .bind(parents)
        .bind(encs)
        .bind(cps)
        .bind(metas)
        .execute(&mut *tx)
        .await
        .during("copy_thread: write checkpoints")?;

        // Channel blobs.
        let rows: Vec<BlobRow> = sqlx::query_as(
            "SELECT checkpoint_ns, channel, version, base_version, encoding, value
             FROM graphloom_checkpoint_blobs WHERE thread_id = $1",
        )
        .bind(source)
        .fetch_all(&mut *tx)
        .await
        .during("copy_thread: read blobs")?;
        let n = rows.len();
        let (mut nss, mut channels, mut versions, mut bases, mut encs, mut values) = (
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
        );
        for (ns, channel, version, base, enc, bytes) in rows {
            let (enc, bytes) = self
                .reseal(
                    enc,
                    bytes,
                    &aad::blob(source, &ns, &channel, &version),
                    &aad::blob(target, &ns, &channel, &version),
                )
                .map_err(|m| {
                    backend(
                        BackendErrorKind::Corrupt,
                        format!(
                            "copy_thread: blob of channel `{channel}` version {version} of thread `{source}`: {m}"
                        ),
                    )
                })?;
            nss.push(ns);
            channels.push(channel);
            versions.push(version);
            bases.push(base);
            encs.push(enc);
            values.push(bytes);
        }
        sqlx::query(
            "INSERT INTO graphloom_checkpoint_blobs
                 (thread_id, checkpoint_ns, channel, version, base_version, encoding, value)
             SELECT $1, b.checkpoint_ns, b.channel, b.version, b.base_version, b.encoding, b.value
             FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::bytea[])
                 AS b(checkpoint_ns, channel, version, base_version, encoding, value)
             ON CONFLICT DO NOTHING",
        )
        .bind(target)
        .bind(nss)
        .bind(channels)
        .bind(versions)
        .bind(bases)
        .bind(encs)
        .bind(values)
        .execute(&mut *tx)
        .await
        .during("copy_thread: write blobs")?;

        // Pending writes, in their write order.
        let rows: Vec<WriteRow> = sqlx::query_as(
            "SELECT checkpoint_ns, checkpoint_id, task_id, idx, channel, task_path, encoding, value
             FROM graphloom_checkpoint_writes WHERE thread_id = $1 ORDER BY seq",
        )
        .bind(source)
        .fetch_all(&mut *tx)
        .await
        .during("copy_thread: read writes")?;
        let mut writes = WriteRows::default();
        for (ns, checkpoint_id, task_id, idx, channel, task_path, enc, bytes) in rows {
            let (enc, bytes) = self
                .reseal(
                    enc,
                    bytes,
                    &aad::write(source, &ns, &checkpoint_id, &task_id, idx, &channel),
                    &aad::write(target, &ns, &checkpoint_id, &task_id, idx, &channel),
                )
                .map_err(|m| corrupt(&checkpoint_id, m))?;
            writes.push(
                &ns,
                &checkpoint_id,
                &task_id,
                idx,
                channel,
                &task_path,
                enc,
                bytes,
            );
        }
        writes
            .insert(&mut *tx, target, "copy_thread: write writes")
            .await?;
        tx.commit().await.during("copy_thread: commit")?;
        Ok(())
    }
}
