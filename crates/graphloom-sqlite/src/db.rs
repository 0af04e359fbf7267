//! The connection layer shared by [`crate::SqliteSaver`], [`crate::SqliteStore`] and the
//! server's tables: opening a file (WAL, migrations), the writer thread that group-commits
//! queued operations ([`crate::writer`]) and the read connections ([`ReadPool`]).

use crate::error::{connection, is_busy, other, rusqlite_error};
use crate::migrate::{self, Migration};
use crate::options::SqliteOptions;
use crate::pool::{open_setup, open_writer, ReadPool};
use crate::writer::{writer_thread, CommitStats, Counters, Job, Pending, WriteOp, QUEUE};
use graphloom_core::checkpoint::BlobCodec;
use graphloom_core::{Error, Result};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot};

/// Page size of new database files. Every commit appends each page it changed to the WAL
/// whole, so many small commits (a server's queue rows, checkpoints of short steps) favour
/// small pages; rows of a few KB (messages) stay inline only in larger ones. 8 KB is the
/// measured middle: against 16 KB the server benchmark went 454 -> 668-713 runs/s, against
/// 4 KB (589 runs/s) the 1,000-turn storage test's file stays at 5.0x its raw bytes (6.3x).
const PAGE_SIZE: u32 = 8192;

/// An open database: the writer queue, the read connections and the codec of stored values.
#[derive(Debug)]
pub(crate) struct Db {
    writer: mpsc::Sender<Box<dyn Job>>,
    reads: ReadPool,
    pub(crate) codec: BlobCodec,
    opts: SqliteOptions,
    counters: Arc<Counters>,
}

impl Db {
    /// Open (creating if needed) the file, switch it to WAL, run the checkpoint and store
    /// tables' pending migrations and start the writer thread.
    pub(crate) async fn open(opts: &SqliteOptions) -> Result<Self> {
        // Opening waits for other processes' locks (busy timeout, WAL switch): not on a
        // runtime thread.
        let setup = opts.clone();
        blocking(move || migrate_file(&setup, migrate::MIGRATIONS)).await?;
        let writer_conn = open_writer(opts)?;
        let (tx, rx) = mpsc::channel(QUEUE);
        let counters = Arc::new(Counters::default());
        let thread_counters = Arc::clone(&counters);
        std::thread::Builder::new()
            .name("graphloom-sqlite-writer".into())
            .spawn(move || writer_thread(&writer_conn, rx, &thread_counters))
            .map_err(|e| other(format!("cannot start the sqlite writer thread: {e}")))?;
        Ok(Self {
            writer: tx,
            reads: ReadPool::new(opts),
            codec: opts.codec.clone(),
            opts: opts.clone(),
            counters,
        })
    }

    /// Apply the pending migrations of `migrations` (another component's tables) to the
    /// open file, on a connection of their own.
    pub(crate) async fn migrate(&self, migrations: &'static [Migration]) -> Result<()> {
        let opts = self.opts.clone();
        blocking(move || migrate_file(&opts, migrations)).await
    }

    /// How the writer has committed so far.
    pub(crate) fn commit_stats(&self) -> CommitStats {
        self.counters.stats()
    }

    /// The database file.
    pub(crate) fn path(&self) -> &Path {
        &self.opts.path
    }

    /// Run `op` in a read transaction on an idle read connection (a new one when none is
    /// idle), on the calling thread. Every statement of `op` sees one snapshot of the file.
    pub(crate) fn read<T, E, F>(&self, op: F) -> std::result::Result<T, E>
    where
        E: From<Error>,
        F: FnOnce(&rusqlite::Connection) -> std::result::Result<T, E>,
    {
        self.reads.run(op)
    }

    /// Queue `op` for the writer and wait until the transaction holding it committed. `op`
    /// may run more than once (when an operation of its batch fails, the batch runs again
    /// with a savepoint for each); only its last run's changes and answer count.
    pub(crate) async fn write<T, F>(&self, op: F) -> Result<T>
    where
        T: Send + 'static,
        F: Fn(&rusqlite::Connection) -> Result<T> + Send + 'static,
    {
        self.write_as(op).await
    }

    /// [`write`](Self::write) for an operation with its own error type.
    pub(crate) async fn write_as<T, E, F>(&self, op: F) -> std::result::Result<T, E>
    where
        T: Send + 'static,
        E: From<Error> + Send + 'static,
        F: Fn(&rusqlite::Connection) -> std::result::Result<T, E> + Send + 'static,
    {
        self.queue(WriteOp::Again(Box::new(op))).await
    }

    /// Queue `op`, which can run only once, for the writer (its batch runs each operation
    /// in a savepoint) and wait until the transaction holding it committed.
    pub(crate) async fn write_once<T, E, F>(&self, op: F) -> std::result::Result<T, E>
    where
        T: Send + 'static,
        E: From<Error> + Send + 'static,
        F: FnOnce(&rusqlite::Connection) -> std::result::Result<T, E> + Send + 'static,
    {
        self.queue(WriteOp::Once(Some(Box::new(op)))).await
    }

    async fn queue<T, E>(&self, op: WriteOp<T, E>) -> std::result::Result<T, E>
    where
        T: Send + 'static,
        E: From<Error> + Send + 'static,
    {
        let (reply, answer) = oneshot::channel();
        let job: Box<dyn Job> = Box::new(Pending::new(op, reply));
        self.writer
            .send(job)
            .await
            .map_err(|_| connection("the writer thread has stopped"))?;
        answer
            .await
            .map_err(|_| connection("the writer thread stopped before answering"))?
    }
}

/// Run blocking work on tokio's blocking pool.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| other(format!("opening the database stopped: {e}")))?
}

/// Open the file of `opts` (creating it), switch it to WAL and apply `migrations`.
fn migrate_file(opts: &SqliteOptions, migrations: &'static [Migration]) -> Result<()> {
    let conn = open_setup(opts, PAGE_SIZE)?;
    enable_wal(&conn, opts.busy_timeout)?;
    migrate::run(conn, migrations)
}

/// Switch the file to WAL. Changing the journal mode takes a lock that SQLite's busy
/// timeout does not wait for, so retry while another connection holds it.
fn enable_wal(conn: &rusqlite::Connection, patience: Duration) -> Result<()> {
    let deadline = Instant::now() + patience.max(Duration::from_secs(1));
    loop {
        let res: rusqlite::Result<String> = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0));
        match res {
            Ok(mode) if mode.eq_ignore_ascii_case("wal") => return Ok(()),
            Ok(mode) if Instant::now() >= deadline => {
                return Err(other(format!(
                    "could not switch the database to WAL mode (journal mode is `{mode}`)"
                )))
            }
            Err(e) if !is_busy(&e) || Instant::now() >= deadline => return Err(rusqlite_error(e)),
            // Another process holds the lock for a moment: try again shortly (on a blocking
            // thread, not a runtime one).
            _ => std::thread::sleep(Duration::from_millis(10)),
        }
    }
}
