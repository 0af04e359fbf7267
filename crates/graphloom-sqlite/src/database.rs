//! One open SQLite file shared by a saver, a store and other tables of the application.

use crate::db::Db;
use crate::error::rusqlite_error;
use crate::options::SqliteOptions;
use crate::saver::cache::ValueCache;
use crate::{CommitStats, SqliteSaver, SqliteStore};
use graphloom_core::Result;
use std::path::Path;
use std::sync::{Arc, Mutex};

/// An open database file: one writer thread that group-commits every queued write, and one
/// pool of read connections.
///
/// [`SqliteSaver::open`] and [`SqliteStore::open`] each open the file on their own, with a
/// writer each: on one file, their commits then wait for each other's write lock. Opening a
/// `SqliteDatabase` once and taking the saver ([`saver`](Self::saver)), the store
/// ([`store`](Self::store)) and the application's own writes ([`write`](Self::write)) from
/// it puts every commit through the same writer, so a checkpoint, a store item and a row of
/// the application queued at the same time share one transaction and one fsync.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use graphloom_sqlite::{SqliteDatabase, SqliteOptions};
/// let dir = tempfile::tempdir()?;
/// let db = SqliteDatabase::open(SqliteOptions::new(dir.path().join("app.db"))).await?;
/// let (saver, store) = (db.saver(), db.store().await?);
/// db.write(|conn| {
///     conn.execute_batch("CREATE TABLE IF NOT EXISTS notes (body TEXT)")
///         .map_err(graphloom_sqlite::rusqlite_error)?;
///     conn.execute("INSERT INTO notes (body) VALUES (?1)", ["hello"])
///         .map_err(graphloom_sqlite::rusqlite_error)?;
///     Ok::<_, graphloom_core::Error>(())
/// })
/// .await?;
/// let body: String = db.read(|conn| {
///     conn.query_row("SELECT body FROM notes", [], |row| row.get(0))
///         .map_err(graphloom_sqlite::rusqlite_error)
/// })?;
/// assert_eq!(body, "hello");
/// # drop((saver, store));
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct SqliteDatabase {
    db: Arc<Db>,
    value_cache_bytes: usize,
}

impl SqliteDatabase {
    /// Open (creating if needed) the file, switch it to WAL, run the saver's and the store's
    /// pending migrations and start the writer thread. Opening waits for other processes'
    /// locks on tokio's blocking pool, not on the caller's thread.
    ///
    /// # Errors
    /// A backend error if the file cannot be opened or migrated.
    pub async fn open(opts: SqliteOptions) -> Result<Self> {
        Ok(Self {
            db: Arc::new(Db::open(&opts).await?),
            value_cache_bytes: opts.value_cache_bytes,
        })
    }

    /// A checkpointer on this database (its own value cache, the shared writer and readers).
    #[must_use]
    pub fn saver(&self) -> SqliteSaver {
        SqliteSaver::from_parts(
            Arc::clone(&self.db),
            Arc::new(ValueCache::new(self.value_cache_bytes)),
        )
    }

    /// A store on this database (no index, default TTL settings).
    ///
    /// # Errors
    /// A backend error if the store's latest timestamp cannot be read.
    pub async fn store(&self) -> Result<SqliteStore> {
        let last: Option<String> = self.db.read(|conn| {
            conn.query_row("SELECT MAX(updated_at) FROM store_items", [], |r| r.get(0))
                .map_err(rusqlite_error)
        })?;
        Ok(SqliteStore::from_parts(
            Arc::clone(&self.db),
            Arc::new(Mutex::new(last)),
        ))
    }

    /// Run `op` on the writer's connection, inside the transaction of the next batch (in a
    /// savepoint of its own when it shares the batch), and wait until that transaction
    /// committed. An error returned by `op` rolls back its own changes only. `op` must not
    /// begin or end transactions itself. Its error type is the caller's (anything a
    /// graphloom error converts into, for the writer's own failures).
    ///
    /// # Errors
    /// The error of `op`, or the batch's commit error.
    pub async fn write<T, E, F>(&self, op: F) -> std::result::Result<T, E>
    where
        T: Send + 'static,
        E: From<graphloom_core::Error> + Send + 'static,
        F: FnOnce(&rusqlite::Connection) -> std::result::Result<T, E> + Send + 'static,
    {
        self.db.write_once(op).await
    }

    /// Whether checkpoint `checkpoint_id` of `thread_id` in namespace `checkpoint_ns` is
    /// saved, as seen by `conn` (inside an operation of [`write`](Self::write) that sees
    /// the checkpoints written before it in the same transaction, or inside
    /// [`read`](Self::read)). For a write that must only go with a saved checkpoint.
    ///
    /// # Errors
    /// The query's error.
    pub fn checkpoint_saved(
        conn: &rusqlite::Connection,
        thread_id: &str,
        checkpoint_ns: &str,
        checkpoint_id: &str,
    ) -> rusqlite::Result<bool> {
        conn.prepare_cached(
            "SELECT EXISTS (SELECT 1 FROM checkpoints \
             WHERE thread_id = ?1 AND checkpoint_ns = ?2 AND checkpoint_id = ?3)",
        )?
        .query_row(rusqlite::params![thread_id, checkpoint_ns, checkpoint_id], |r| {
            r.get(0)
        })
    }

    /// Run `op` on a read connection (`query_only`) inside one read transaction, on the
    /// calling thread: every statement of `op` sees the same snapshot, and no other thread
    /// is involved. Meant for reads of a few rows by key (what a request handler does on
    /// its way); a long scan from async code belongs in `tokio::task::spawn_blocking`.
    /// Connections are kept open between reads, with their prepared statements
    /// ([`SqliteOptions::read_connections`] of them at most while idle).
    ///
    /// # Errors
    /// The error of `op`, or a backend error if no read connection could be opened.
    pub fn read<T, E, F>(&self, op: F) -> std::result::Result<T, E>
    where
        E: From<graphloom_core::Error>,
        F: FnOnce(&rusqlite::Connection) -> std::result::Result<T, E>,
    {
        self.db.read(op)
    }

    /// How many transactions the writer committed, for how many operations.
    #[must_use]
    pub fn commit_stats(&self) -> CommitStats {
        self.db.commit_stats()
    }

    /// The database file.
    #[must_use]
    pub fn path(&self) -> &Path {
        self.db.path()
    }
}

impl SqliteDatabase {
    /// The shared database handle, for the server's and the typed tables of this crate.
    pub(crate) fn db(&self) -> &Arc<Db> {
        &self.db
    }
}
