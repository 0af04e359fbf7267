//! [`PostgresSaver`]: the [`Checkpointer`] on PostgreSQL.
//!
//! # Tables
//!
//! | table | key | holds |
//! |---|---|---|
//! | `graphloom_checkpoints` | thread, namespace, checkpoint id | the checkpoint *without* channel values (versions, `versions_seen`, pending sends, ...), encoded with the [`BlobCodec`]; its parent id; its metadata as plaintext JSONB |
//! | `graphloom_checkpoint_blobs` | thread, namespace, channel, version | one encoded [`ChannelValue`](graphloom_core::checkpoint::ChannelValue) per channel version: a full value, or items appended to an earlier version (whose id is kept in `base_version` so reads fetch just the chain) |
//! | `graphloom_checkpoint_writes` | thread, namespace, checkpoint id, task id, idx | pending writes, encoded; `seq` keeps first-write order |
//!
//! A channel that did not change in a step is not written again, and a list that only grew
//! stores just the new items, so storage grows with what changed.
//!
//! # Promises
//!
//! - **No global lock.** Every call takes its own pooled connection; threads checkpoint in
//!   parallel (up to the pool size).
//! - **Durable on return.** [`put`](Checkpointer::put) (blobs and checkpoint in one
//!   statement) and [`put_writes`](Checkpointer::put_writes) (all writes of the call in one
//!   statement) are committed before they return; with PostgreSQL's default
//!   `synchronous_commit = on` that means flushed to the WAL.
//! - **Idempotent writes.** A blob is never rewritten (`ON CONFLICT DO NOTHING`); a pending
//!   write with a repeated `(task_id, idx)` keeps its first value, except the special
//!   channels (negative idx: error, interrupt, resume), which replace it in place. Retrying
//!   a call after a [`Connection`](graphloom_core::BackendErrorKind::Connection) error is safe.
//! - **Consistent reads.** A read runs in one `REPEATABLE READ` transaction and resolves
//!   append chains with one recursive query. The exact version missing means the channel is
//!   empty; a broken chain or an undecodable row is
//!   [`Error::CorruptCheckpoint`](graphloom_core::Error::CorruptCheckpoint) naming the thread
//!   and checkpoint.
//! - **Safe decoding.** Rows decode into their declared types only
//!   ([`BlobCodec`]); every encoded value is bound (as AEAD associated data when encrypted)
//!   to the row it belongs to, so a sealed value moved to another row does not decode.
//!   With an encrypted codec, plaintext rows are refused.
//! - **Metadata is plaintext JSONB**, so [`list`](Checkpointer::list) filters run in SQL
//!   (`metadata @> $filter`, GIN-indexed, then exact per-key equality; numbers compare by
//!   value, so `1` matches `1.0`). Do not put secrets in run metadata; it is not encrypted.
//!
//! # Hooks
//!
//! [`PostgresSaver::with_hook`] adds a [`CheckpointHook`]: application rows written in the
//! same transaction as the checkpoints the hook wants (a final record, an outbox row), so
//! both are committed or neither is. See [`hook`](mod@hook).

mod aad;
pub mod hook;
mod prune;
mod read;
mod write;

pub use hook::{CheckpointHook, HookCheckpoint, HookError, HookFuture};

use crate::error::SqlxResultExt;
use crate::migrate::Migrated;
use graphloom_core::checkpoint::{
    BlobCodec, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointTuple, Checkpointer,
    DynCheckpointer, ListQuery, TaskWrites, Version,
};
use graphloom_core::Result;
use serde_json::Value;
use sqlx::postgres::{PgPool, PgPoolOptions};
use std::collections::BTreeMap;

/// A [`Checkpointer`] storing checkpoints, channel blobs and pending writes in PostgreSQL.
///
/// Cheap to clone; clones share the pool. Several savers (in several processes) may use one
/// database at once. See the [module docs](self) for the tables and the promises.
#[derive(Debug, Clone)]
pub struct PostgresSaver {
    pool: PgPool,
    codec: BlobCodec,
    migrated: Migrated,
    hooks: std::sync::Arc<[hook::Hooked]>,
}

impl PostgresSaver {
    /// Connect to `url` (`postgres://user:password@host:port/database`) with sqlx's default
    /// pool options (up to 10 connections, connections checked before use).
    ///
    /// # Errors
    /// A [`Connection`](graphloom_core::BackendErrorKind::Connection) error if the server
    /// cannot be reached, `InvalidInput` for a malformed URL.
    pub async fn connect(url: &str) -> Result<Self> {
        Self::connect_with(url, PgPoolOptions::new()).await
    }

    /// Connect to `url` with these pool options (size, timeouts, lifetimes).
    ///
    /// # Errors
    /// As [`connect`](Self::connect).
    pub async fn connect_with(url: &str, options: PgPoolOptions) -> Result<Self> {
        let pool = options.connect(url).await.during("connect")?;
        Ok(Self::from_pool(pool))
    }

    /// Use an existing pool (shared with a [`PostgresStore`](crate::PostgresStore) or the
    /// application). Nothing is sent to the server until the first call.
    #[must_use]
    pub fn from_pool(pool: PgPool) -> Self {
        Self {
            pool,
            codec: BlobCodec::plain(),
            migrated: Migrated::default(),
            hooks: std::sync::Arc::new([]),
        }
    }

    /// This saver with `hook` (replacing a hook of the same
    /// [name](CheckpointHook::name)): for every checkpoint the hook
    /// [wants](CheckpointHook::wants), the hook's writes are committed in the checkpoint's
    /// own transaction, and a failing hook fails the put with nothing saved. Other clones of
    /// the saver keep their hooks. See [`hook`](mod@hook).
    #[must_use]
    pub fn with_hook(mut self, hook: impl CheckpointHook) -> Self {
        let name = hook.name().to_owned();
        let mut hooks: Vec<hook::Hooked> = self
            .hooks
            .iter()
            .filter(|h| h.hook.name() != name)
            .cloned()
            .collect();
        hooks.push(hook::Hooked::new(std::sync::Arc::new(hook)));
        self.hooks = hooks.into();
        self
    }

    /// The PostgreSQL saver behind a type-erased checkpointer (the one a server hands its
    /// graphs, say), held directly or in an `Arc`; `None` for any other backend. A graph
    /// can then use a clone of it [`with_hook`](Self::with_hook).
    #[must_use]
    pub fn downcast(checkpointer: &dyn DynCheckpointer) -> Option<&PostgresSaver> {
        let any = checkpointer.as_any();
        any.downcast_ref::<PostgresSaver>().or_else(|| {
            any.downcast_ref::<std::sync::Arc<PostgresSaver>>()
                .map(std::convert::AsRef::as_ref)
        })
    }

    /// Whether the saver has a hook called `name`.
    #[must_use]
    pub fn has_hook(&self, name: &str) -> bool {
        self.hooks.iter().any(|h| h.hook.name() == name)
    }

    /// Encode stored values with `codec`, e.g. `BlobCodec::encrypted(&key)` (feature
    /// `encryption`). An encrypting saver refuses rows written in plaintext.
    #[must_use]
    pub fn with_codec(mut self, codec: BlobCodec) -> Self {
        self.codec = codec;
        self
    }

    /// The connection pool.
    #[must_use]
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// The codec of stored values.
    #[must_use]
    pub fn codec(&self) -> &BlobCodec {
        &self.codec
    }

    /// Create or upgrade the tables now instead of on first use, and run the
    /// [setup](CheckpointHook::setup) of every hook not set up yet.
    ///
    /// # Errors
    /// A typed backend error if the migration fails (see [`crate::migrate`](mod@crate::migrate))
    /// or a hook's setup fails.
    pub async fn migrate(&self) -> Result<()> {
        self.migrated.ensure(&self.pool).await?;
        let hooks = self.hooks.clone();
        self.ready(&hooks).await
    }

    /// The saver's own tables, on first use (hooks are set up when first wanted).
    async fn tables(&self) -> Result<()> {
        self.migrated.ensure(&self.pool).await
    }

    /// Bytes of column data (`pg_column_size`, so after PostgreSQL's compression) of every
    /// checkpoint, blob and pending-write row, all threads: what checkpointing costs in
    /// storage, without indexes and free space.
    ///
    /// # Errors
    /// A typed backend error if the query fails.
    pub async fn storage_bytes(&self) -> Result<u64> {
        self.tables().await?;
        let bytes: i64 = sqlx::query_scalar(STORAGE_BYTES_SQL)
            .fetch_one(&self.pool)
            .await
            .during("storage_bytes")?;
        Ok(u64::try_from(bytes).unwrap_or_default())
    }
}

const STORAGE_BYTES_SQL: &str = r#"
SELECT (
    (SELECT coalesce(sum(pg_column_size(thread_id) + pg_column_size(checkpoint_ns)
        + pg_column_size(checkpoint_id) + coalesce(pg_column_size(parent_checkpoint_id), 0)
        + pg_column_size(encoding) + pg_column_size(checkpoint) + pg_column_size(metadata)), 0)
     FROM graphloom_checkpoints)
  + (SELECT coalesce(sum(pg_column_size(thread_id) + pg_column_size(checkpoint_ns)
        + pg_column_size(channel) + pg_column_size(version) + coalesce(pg_column_size(base_version), 0)
        + pg_column_size(encoding) + pg_column_size(value)), 0)
     FROM graphloom_checkpoint_blobs)
  + (SELECT coalesce(sum(pg_column_size(thread_id) + pg_column_size(checkpoint_ns)
        + pg_column_size(checkpoint_id) + pg_column_size(task_id) + pg_column_size(idx)
        + pg_column_size(channel) + pg_column_size(task_path) + pg_column_size(encoding)
        + pg_column_size(value) + pg_column_size(seq)), 0)
     FROM graphloom_checkpoint_writes)
)::int8
"#;

impl Checkpointer for PostgresSaver {
    async fn get_tuple(&self, config: &CheckpointConfig) -> Result<Option<CheckpointTuple>> {
        self.tables().await?;
        self.read_tuple(config).await
    }

    async fn list(&self, query: &ListQuery) -> Result<Vec<CheckpointTuple>> {
        self.tables().await?;
        self.read_list(query).await
    }

    async fn put(
        &self,
        config: &CheckpointConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: BTreeMap<String, Version>,
    ) -> Result<CheckpointConfig> {
        self.tables().await?;
        self.write_checkpoint(config, checkpoint, metadata, new_versions)
            .await
    }

    async fn put_writes(
        &self,
        config: &CheckpointConfig,
        writes: Vec<(String, Value)>,
        task_id: &str,
        task_path: &str,
    ) -> Result<()> {
        self.tables().await?;
        self.write_pending(config, writes, task_id, task_path).await
    }

    async fn put_writes_then_checkpoint(
        &self,
        writes: TaskWrites,
        config: &CheckpointConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: BTreeMap<String, Version>,
    ) -> Result<CheckpointConfig> {
        self.tables().await?;
        self.write_pending_then_checkpoint(writes, config, checkpoint, metadata, new_versions)
            .await
    }

    async fn delete_thread(&self, thread_id: &str) -> Result<()> {
        self.tables().await?;
        self.remove_thread(thread_id).await
    }

    async fn copy_thread(&self, source: &str, target: &str) -> Result<()> {
        self.tables().await?;
        self.duplicate_thread(source, target).await
    }

    async fn delete_run(&self, thread_id: &str, run_id: &str) -> Result<()> {
        self.tables().await?;
        self.remove_run(thread_id, run_id).await
    }

    async fn prune_to_latest(&self, thread_id: &str) -> Result<usize> {
        self.tables().await?;
        self.prune_history(thread_id).await
    }

    async fn thread_storage(&self, thread_id: &str) -> Result<graphloom_core::checkpoint::ThreadStorage> {
        self.tables().await?;
        let tables = crate::storage::Tables {
            checkpoints: "graphloom_checkpoints",
            blobs: "graphloom_checkpoint_blobs",
            writes: "graphloom_checkpoint_writes",
        };
        crate::storage::thread_storage(&self.pool, &tables, thread_id).await
    }
}
