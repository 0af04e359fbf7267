//! Connection settings shared by the saver and the store.

use graphloom_core::checkpoint::BlobCodec;
use std::path::PathBuf;
use std::time::Duration;

/// Default [`SqliteOptions::busy_timeout`].
pub const DEFAULT_BUSY_TIMEOUT: Duration = Duration::from_secs(30);
/// Default [`SqliteOptions::read_connections`].
pub const DEFAULT_READ_CONNECTIONS: u32 = 4;
/// Default [`SqliteOptions::value_cache_bytes`]: 32 MiB.
pub const DEFAULT_VALUE_CACHE_BYTES: usize = 32 << 20;

/// How hard SQLite syncs commits to disk (`PRAGMA synchronous`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Synchronous {
    /// Every commit is fsynced before `put` / `put_writes` return: a committed checkpoint
    /// survives a power loss. The default.
    #[default]
    Full,
    /// In WAL mode, commits are synced at WAL checkpoints only: the database stays
    /// consistent, but the last commits before a power loss (not a process crash) may be
    /// lost. Faster on slow disks.
    Normal,
}

/// Where and how to open a database file. Built by [`crate::SqliteSaver::builder`] and
/// [`crate::SqliteStore::builder`], or directly.
#[derive(Debug, Clone)]
pub struct SqliteOptions {
    /// The database file (created if missing).
    pub path: PathBuf,
    /// Durability of commits; [`Synchronous::Full`] by default.
    pub synchronous: Synchronous,
    /// How long a connection waits for another process's lock before failing with a
    /// `Conflict` error ([`DEFAULT_BUSY_TIMEOUT`] by default).
    pub busy_timeout: Duration,
    /// How stored values are encoded (plain JSON by default; see [`BlobCodec::encrypted`]
    /// with the `encryption` feature).
    pub codec: BlobCodec,
    /// Size of the pool of read connections ([`DEFAULT_READ_CONNECTIONS`] by default).
    pub read_connections: u32,
    /// Memory a saver may use to keep resolved channel values between reads, so reading
    /// the latest checkpoint of a long thread decodes only what changed since the last
    /// read ([`DEFAULT_VALUE_CACHE_BYTES`] by default; 0 disables the cache). The budget
    /// counts memory: each value at the estimated size of its decoded JSON (several times
    /// its stored size: about six times for a conversation's messages), with its key. Values
    /// are cached after they were read and decoded; a thread deleted through this saver
    /// leaves the cache at once.
    pub value_cache_bytes: usize,
}

impl SqliteOptions {
    /// Default settings for the file at `path`.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            synchronous: Synchronous::Full,
            busy_timeout: DEFAULT_BUSY_TIMEOUT,
            codec: BlobCodec::plain(),
            read_connections: DEFAULT_READ_CONNECTIONS,
            value_cache_bytes: DEFAULT_VALUE_CACHE_BYTES,
        }
    }

    /// Set the durability of commits.
    #[must_use]
    pub fn synchronous(mut self, synchronous: Synchronous) -> Self {
        self.synchronous = synchronous;
        self
    }

    /// Set how long to wait for another process's lock.
    #[must_use]
    pub fn busy_timeout(mut self, timeout: Duration) -> Self {
        self.busy_timeout = timeout;
        self
    }

    /// Set the codec of stored values.
    #[must_use]
    pub fn codec(mut self, codec: BlobCodec) -> Self {
        self.codec = codec;
        self
    }

    /// Set the number of read connections (at least 1).
    #[must_use]
    pub fn read_connections(mut self, n: u32) -> Self {
        self.read_connections = n.max(1);
        self
    }

    /// Set the memory for cached channel values (0 disables the cache).
    #[must_use]
    pub fn value_cache_bytes(mut self, bytes: usize) -> Self {
        self.value_cache_bytes = bytes;
        self
    }
}
