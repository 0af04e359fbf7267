//! [`SqliteSaver`]: the SQLite [`Checkpointer`].
//!
//! # Tables
//!
//! | table | key | holds |
//! |---|---|---|
//! | `checkpoints` | thread, namespace, checkpoint id | the checkpoint *without* channel values, encoded with the [`BlobCodec`]; its parent id; its metadata as plaintext JSON |
//! | `checkpoint_blobs` | thread, namespace, channel, version | one encoded [`ChannelValue`](graphloom_core::checkpoint::ChannelValue) per channel version: a full value, or items appended to an earlier version |
//! | `checkpoint_writes` | thread, namespace, checkpoint id, task id, idx | pending writes, encoded; `seq` keeps first-write order |
//!
//! | file | what |
//! |---|---|
//! | `read.rs` | `get_tuple`, `list`: rows to tuples, append chains resolved, the value cache |
//! | `write.rs` | `put`, `put_writes`, deletes |
//! | `copy.rs` | `copy_thread` |
//! | `prune.rs` | `prune_to_latest` (retention's `keep_latest`) |
//! | `rows.rs` | the row types: how each is read, encoded and inserted |
//! | `aad.rs` | the associated data each stored value is sealed with |
//! | `cache.rs` | the bounded cache of resolved channel values |

mod aad;
pub(crate) mod cache;
mod copy;
mod prune;
mod read;
mod rows;
mod write;

use crate::db::Db;
use crate::error::other;
use crate::options::{SqliteOptions, Synchronous};
use crate::writer::CommitStats;
use cache::ValueCache;
use graphloom_core::checkpoint::{
    BlobCodec, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointTuple, Checkpointer, ListQuery,
    TaskWrites, Version,
};
use graphloom_core::Result;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// A [`Checkpointer`] keeping checkpoints in one SQLite file (WAL mode).
///
/// - **Storage grows with what changed.** A checkpoint row holds everything but the channel
///   values; each `(thread, namespace, channel, version)` is stored once as a blob holding
///   the [`ChannelValue`](graphloom_core::checkpoint::ChannelValue) `put` received (a full value or an append to an earlier version)
///   and is never rewritten. Reads fetch the blobs of the needed channels in one query and
///   resolve append chains in memory.
/// - **Durable.** `put` and `put_writes` return once their transaction is committed (and,
///   with [`Synchronous::Full`], the default, fsynced). All writes go through one writer
///   task that commits whatever is queued in one transaction (group commit), so many
///   concurrent runs share commits and never see "database is locked". Reads use a small
///   pool of `rusqlite` connections: `get_tuple` on the calling thread (a read by key costs
///   less than a hand-off to another thread), `list` and `copy_thread` on tokio's blocking
///   pool (a long history must not hold a runtime thread).
/// - **Safe decoding.** Every stored value goes through the [`BlobCodec`] with associated
///   data naming its row; an undecodable, tampered or (with encryption on) plaintext row is
///   reported as [`Error::CorruptCheckpoint`](graphloom_core::Error::CorruptCheckpoint) naming the thread and checkpoint.
///   Checkpoint *metadata* is stored as plaintext JSON (so list filters can use it), but
///   with encryption on it is authenticated as part of the sealed checkpoint row.
/// - **Reads cost what changed.** Resolved channel values are kept in a bounded cache
///   ([`SqliteSaverBuilder::value_cache_bytes`]), so reading the latest checkpoint of a long
///   thread reads and decodes only the blobs written since the last read. Blobs are never
///   rewritten, and a thread deleted through this saver leaves the cache at once; a thread
///   deleted and rewritten with the very same checkpoint ids and channel versions by
///   *another* process may be served stale from this saver's cache (versions carry a
///   per-run salt, so runs do not do that).
///
/// The writer is a thread of its own with its own connection: it runs a whole batch of
/// statements without a hand-off per statement, and stops when the last clone is dropped.
/// A write whose caller stops waiting (its future dropped) is still committed. Cloning is
/// cheap; clones share the connections, the writer and the cache.
#[derive(Debug, Clone)]
pub struct SqliteSaver {
    db: Arc<Db>,
    cache: Arc<ValueCache>,
}

/// Opens a [`SqliteSaver`] with non-default settings; see [`SqliteSaver::builder`].
#[derive(Debug, Clone)]
pub struct SqliteSaverBuilder {
    opts: SqliteOptions,
}

impl SqliteSaverBuilder {
    /// Durability of commits ([`Synchronous::Full`] by default).
    #[must_use]
    pub fn synchronous(mut self, synchronous: Synchronous) -> Self {
        self.opts = self.opts.synchronous(synchronous);
        self
    }
    /// How long to wait for another process's lock (30 s by default).
    #[must_use]
    pub fn busy_timeout(mut self, timeout: Duration) -> Self {
        self.opts = self.opts.busy_timeout(timeout);
        self
    }
    /// How stored values are encoded, e.g. `BlobCodec::encrypted(&key)`.
    #[must_use]
    pub fn codec(mut self, codec: BlobCodec) -> Self {
        self.opts = self.opts.codec(codec);
        self
    }
    /// Number of read connections (4 by default).
    #[must_use]
    pub fn read_connections(mut self, n: u32) -> Self {
        self.opts = self.opts.read_connections(n);
        self
    }
    /// Memory for resolved channel values kept between reads (32 MiB by default, counted
    /// as the decoded values' estimated size; 0 disables the cache).
    #[must_use]
    pub fn value_cache_bytes(mut self, bytes: usize) -> Self {
        self.opts = self.opts.value_cache_bytes(bytes);
        self
    }
    /// Open the saver.
    ///
    /// # Errors
    /// See [`SqliteSaver::open`].
    pub async fn open(self) -> Result<SqliteSaver> {
        SqliteSaver::open_with(self.opts).await
    }
}

/// Row counts and stored value sizes of a [`SqliteSaver`] database.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StorageStats {
    /// Checkpoint rows.
    pub checkpoints: u64,
    /// Bytes of checkpoint rows' encoded bodies and metadata.
    pub checkpoint_bytes: u64,
    /// Channel blobs.
    pub blobs: u64,
    /// Bytes of encoded channel blobs.
    pub blob_bytes: u64,
    /// Pending-write rows.
    pub writes: u64,
    /// Bytes of encoded pending writes.
    pub write_bytes: u64,
}

impl StorageStats {
    /// Bytes of every stored value (checkpoints, metadata, blobs and writes).
    #[must_use]
    pub fn total_bytes(&self) -> u64 {
        self.checkpoint_bytes + self.blob_bytes + self.write_bytes
    }
}

impl SqliteSaver {
    /// Open (creating if needed) the database at `path` with default settings: WAL mode,
    /// `synchronous=FULL`, plain JSON values. Pending migrations run first.
    ///
    /// # Errors
    /// A backend error if the file cannot be opened or migrated (e.g. it was written by a
    /// newer version).
    pub async fn open(path: impl Into<PathBuf>) -> Result<Self> {
        Self::open_with(SqliteOptions::new(path)).await
    }

    /// A builder for the database at `path`, to change [`Synchronous`], the busy timeout,
    /// the codec or the read pool before opening.
    pub fn builder(path: impl Into<PathBuf>) -> SqliteSaverBuilder {
        SqliteSaverBuilder {
            opts: SqliteOptions::new(path),
        }
    }

    /// Open with explicit options.
    ///
    /// # Errors
    /// See [`SqliteSaver::open`].
    pub async fn open_with(opts: SqliteOptions) -> Result<Self> {
        Ok(Self::from_parts(
            Arc::new(Db::open(&opts).await?),
            Arc::new(ValueCache::new(opts.value_cache_bytes)),
        ))
    }

    pub(crate) fn from_parts(db: Arc<Db>, cache: Arc<ValueCache>) -> Self {
        Self { db, cache }
    }

    /// The database file.
    #[must_use]
    pub fn path(&self) -> &Path {
        self.db.path()
    }

    /// How many transactions the writer committed, for how many operations: with many
    /// concurrent runs, operations outnumber commits (group commit).
    #[must_use]
    pub fn commit_stats(&self) -> CommitStats {
        self.db.commit_stats()
    }

    /// Row counts and stored value sizes.
    ///
    /// # Errors
    /// A backend error if the query fails.
    pub async fn storage_stats(&self) -> Result<StorageStats> {
        // Scans every row: on the blocking pool, not a runtime thread.
        let db = Arc::clone(&self.db);
        let counts = tokio::task::spawn_blocking(move || {
            db.read(|conn| {
                conn.query_row(
                    "SELECT
                        (SELECT COUNT(*) FROM checkpoints),
                        (SELECT COALESCE(SUM(LENGTH(checkpoint) + LENGTH(CAST(metadata AS BLOB))), 0) FROM checkpoints),
                        (SELECT COUNT(*) FROM checkpoint_blobs),
                        (SELECT COALESCE(SUM(LENGTH(value)), 0) FROM checkpoint_blobs),
                        (SELECT COUNT(*) FROM checkpoint_writes),
                        (SELECT COALESCE(SUM(LENGTH(value)), 0) FROM checkpoint_writes)",
                    [],
                    |row| {
                        let mut n = [0u64; 6];
                        for (i, slot) in n.iter_mut().enumerate() {
                            *slot = u64::try_from(row.get::<_, i64>(i)?).unwrap_or(0);
                        }
                        Ok(n)
                    },
                )
                .map_err(crate::error::rusqlite_error)
            })
        })
        .await
        .map_err(|e| other(format!("reading storage stats stopped: {e}")))??;
        let [checkpoints, checkpoint_bytes, blobs, blob_bytes, writes, write_bytes] = counts;
        Ok(StorageStats {
            checkpoints,
            checkpoint_bytes,
            blobs,
            blob_bytes,
            writes,
            write_bytes,
        })
    }

    fn codec(&self) -> &BlobCodec {
        &self.db.codec
    }
}

impl Checkpointer for SqliteSaver {
    async fn get_tuple(&self, config: &CheckpointConfig) -> Result<Option<CheckpointTuple>> {
        self.get_tuple_now(config).await
    }

    async fn list(&self, query: &ListQuery) -> Result<Vec<CheckpointTuple>> {
        self.list_now(query).await
    }

    async fn put(
        &self,
        config: &CheckpointConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: BTreeMap<String, Version>,
    ) -> Result<CheckpointConfig> {
        self.put_now(config, checkpoint, metadata, new_versions).await
    }

    async fn put_writes(
        &self,
        config: &CheckpointConfig,
        writes: Vec<(String, Value)>,
        task_id: &str,
        task_path: &str,
    ) -> Result<()> {
        self.put_writes_now(config, writes, task_id, task_path).await
    }

    async fn put_writes_then_checkpoint(
        &self,
        writes: TaskWrites,
        config: &CheckpointConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: BTreeMap<String, Version>,
    ) -> Result<CheckpointConfig> {
        self.put_writes_then_checkpoint_now(writes, config, checkpoint, metadata, new_versions)
            .await
    }

    async fn delete_run(&self, thread_id: &str, run_id: &str) -> Result<()> {
        self.delete_run_now(thread_id, run_id).await
    }

    /// One writer thread applies the saves in the order queued (each is queued when its
    /// future is first polled) and commits them in that order.
    fn saves_in_order(&self) -> bool {
        true
    }

    async fn delete_thread(&self, thread_id: &str) -> Result<()> {
        self.delete_thread_now(thread_id).await
    }

    async fn prune_to_latest(&self, thread_id: &str) -> Result<usize> {
        self.prune_to_latest_now(thread_id).await
    }

    async fn copy_thread(&self, source: &str, target: &str) -> Result<()> {
        self.copy_thread_now(source, target).await
    }

    async fn thread_storage(&self, thread_id: &str) -> Result<graphloom_core::checkpoint::ThreadStorage> {
        let tables = crate::storage::Tables {
            checkpoints: "checkpoints",
            blobs: "checkpoint_blobs",
            writes: "checkpoint_writes",
        };
        self.db
            .read(|conn| crate::storage::thread_storage(conn, &tables, thread_id))
    }
}
