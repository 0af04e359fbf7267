//! The connection layer shared by [`crate::SqliteSaver`] and [`crate::SqliteStore`]: one
//! writer thread that group-commits queued operations on its own connection, a small pool
//! of read connections, WAL setup, migrations and error classification.

use crate::migrate;
use crate::options::SqliteOptions;
use graphloom_core::checkpoint::BlobCodec;
use graphloom_core::{BackendError, BackendErrorKind, Error, Result};
use sqlx::sqlite::{SqliteConnectOptions, SqliteConnection, SqlitePool, SqlitePoolOptions};
use sqlx::{ConnectOptions, Connection};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot};

/// Page size of new database files. Every commit appends each page it changed to the WAL
/// whole, so many small commits (a server's queue rows, checkpoints of short steps) favour
/// small pages; rows of a few KB (messages) stay inline only in larger ones. 8 KB is the
/// measured middle: against 16 KB the server benchmark went 454 -> 668-713 runs/s, against
/// 4 KB (589 runs/s) the 1,000-turn storage test's file stays at 5.0x its raw bytes (6.3x).
const PAGE_SIZE: u32 = 8192;
/// Most operations committed in one transaction.
const MAX_BATCH: usize = 256;
/// Operations that may wait for the writer before callers are held back.
const QUEUE: usize = 4096;

/// An operation run by the writer thread inside the batch's transaction.
type WriteOp<T, E> = Box<dyn FnOnce(&rusqlite::Connection) -> std::result::Result<T, E> + Send + 'static>;

/// A queued write: runs inside a savepoint, is answered once the batch committed.
trait Job: Send {
    /// Run the operation; `true` if it succeeded (its changes are kept).
    fn run(&mut self, conn: &rusqlite::Connection) -> bool;
    /// Answer the caller with the operation's outcome, or the batch's commit error.
    fn finish(self: Box<Self>, commit: std::result::Result<(), &BackendError>);
}

struct Pending<T, E> {
    op: Option<WriteOp<T, E>>,
    out: Option<std::result::Result<T, E>>,
    reply: oneshot::Sender<std::result::Result<T, E>>,
}

impl<T: Send + 'static, E: From<Error> + Send + 'static> Job for Pending<T, E> {
    fn run(&mut self, conn: &rusqlite::Connection) -> bool {
        let Some(op) = self.op.take() else {
            return false;
        };
        let out = op(conn);
        let ok = out.is_ok();
        self.out = Some(out);
        ok
    }

    fn finish(self: Box<Self>, commit: std::result::Result<(), &BackendError>) {
        let answer = match (self.out, commit) {
            // The operation's own error: its savepoint was rolled back.
            (Some(Err(e)), _) => Err(e),
            (Some(Ok(v)), Ok(())) => Ok(v),
            (_, Err(e)) => Err(Error::Backend(e.clone()).into()),
            (None, Ok(())) => Err(other("write operation was not run").into()),
        };
        // The caller may have gone away; the write is committed all the same.
        let _ = self.reply.send(answer);
    }
}

/// How the writer thread has committed so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CommitStats {
    /// Transactions committed (each one batch of queued operations).
    pub commits: u64,
    /// Operations committed (a `put`, `put_writes`, store `put`, ...), successful or not.
    pub operations: u64,
}

#[derive(Debug, Default)]
struct Counters {
    commits: AtomicU64,
    operations: AtomicU64,
}

/// An open database: the writer queue, the read pool and the codec of stored values.
#[derive(Debug)]
pub(crate) struct Db {
    writer: mpsc::Sender<Box<dyn Job>>,
    reader: SqlitePool,
    reads: ReadPool,
    pub(crate) codec: BlobCodec,
    path: PathBuf,
    counters: Arc<Counters>,
}

impl Db {
    /// Open (creating if needed) the file, switch it to WAL, run pending migrations and
    /// start the writer thread.
    pub(crate) async fn open(opts: &SqliteOptions) -> Result<Self> {
        let base = SqliteConnectOptions::new()
            .filename(&opts.path)
            .create_if_missing(true)
            .busy_timeout(opts.busy_timeout)
            .foreign_keys(false);
        let mut conn = base
            .clone()
            .synchronous(opts.synchronous.into())
            .page_size(PAGE_SIZE)
            .connect()
            .await
            .map_err(db_err)?;
        enable_wal(&mut conn, opts.busy_timeout).await?;
        migrate::run(&mut conn).await?;
        conn.close().await.map_err(db_err)?;
        let reader = SqlitePoolOptions::new()
            .max_connections(opts.read_connections.max(1))
            .min_connections(0)
            .test_before_acquire(false)
            .connect_lazy_with(base.pragma("query_only", "ON"));
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
            reader,
            reads: ReadPool {
                path: opts.path.clone(),
                busy_timeout: opts.busy_timeout,
                idle: Mutex::new(Vec::new()),
                max_idle: usize::try_from(opts.read_connections.max(1)).unwrap_or(1),
            },
            codec: opts.codec.clone(),
            path: opts.path.clone(),
            counters,
        })
    }

    /// How the writer has committed so far.
    pub(crate) fn commit_stats(&self) -> CommitStats {
        CommitStats {
            commits: self.counters.commits.load(Ordering::Relaxed),
            operations: self.counters.operations.load(Ordering::Relaxed),
        }
    }

    /// The database file.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The read pool.
    pub(crate) fn reader(&self) -> &SqlitePool {
        &self.reader
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

    /// Queue `op` for the writer and wait until the transaction holding it committed.
    pub(crate) async fn write<T, F>(&self, op: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&rusqlite::Connection) -> Result<T> + Send + 'static,
    {
        self.write_as(op).await
    }

    /// [`write`](Self::write) for an operation with its own error type.
    pub(crate) async fn write_as<T, E, F>(&self, op: F) -> std::result::Result<T, E>
    where
        T: Send + 'static,
        E: From<Error> + Send + 'static,
        F: FnOnce(&rusqlite::Connection) -> std::result::Result<T, E> + Send + 'static,
    {
        let (reply, answer) = oneshot::channel();
        let job: Box<dyn Job> = Box::new(Pending {
            op: Some(Box::new(op)),
            out: None,
            reply,
        });
        self.writer
            .send(job)
            .await
            .map_err(|_| connection("the writer thread has stopped"))?;
        answer
            .await
            .map_err(|_| connection("the writer thread stopped before answering"))?
    }
}

/// Read connections (`query_only`), kept open between reads. A read takes an idle one or
/// opens another; at most `max_idle` are kept afterwards. Each is used by one thread at a
/// time, and its prepared statements stay cached.
#[derive(Debug)]
struct ReadPool {
    path: PathBuf,
    busy_timeout: Duration,
    idle: Mutex<Vec<rusqlite::Connection>>,
    max_idle: usize,
}

impl ReadPool {
    fn open(&self) -> Result<rusqlite::Connection> {
        use rusqlite::OpenFlags;
        let conn = rusqlite::Connection::open_with_flags(
            &self.path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(rs_err)?;
        conn.busy_timeout(self.busy_timeout).map_err(rs_err)?;
        conn.execute_batch("PRAGMA query_only = ON; PRAGMA foreign_keys = OFF;")
            .map_err(rs_err)?;
        conn.set_prepared_statement_cache_capacity(64);
        Ok(conn)
    }

    fn run<T, E, F>(&self, op: F) -> std::result::Result<T, E>
    where
        E: From<Error>,
        F: FnOnce(&rusqlite::Connection) -> std::result::Result<T, E>,
    {
        let idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner).pop();
        let conn = match idle {
            Some(c) => c,
            None => self.open()?,
        };
        // A deferred transaction: one snapshot for every statement of `op`, and no lock a
        // writer waits for (WAL).
        exec(&conn, "BEGIN").map_err(Error::Backend)?;
        let out = op(&conn);
        let ended = exec(&conn, "COMMIT").or_else(|_| exec(&conn, "ROLLBACK"));
        // A connection whose transaction could not be ended is dropped, not reused.
        if ended.is_ok() && conn.is_autocommit() {
            let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
            if idle.len() < self.max_idle {
                idle.push(conn);
            }
        }
        out
    }
}

/// The writer's own connection. It runs every statement of a batch on its thread, without a
/// hand-off per statement, with cached prepared statements.
fn open_writer(opts: &SqliteOptions) -> Result<rusqlite::Connection> {
    use rusqlite::OpenFlags;
    let conn = rusqlite::Connection::open_with_flags(
        &opts.path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(rs_err)?;
    conn.busy_timeout(opts.busy_timeout).map_err(rs_err)?;
    let synchronous = match opts.synchronous {
        crate::options::Synchronous::Full => "FULL",
        crate::options::Synchronous::Normal => "NORMAL",
    };
    // temp_store: each operation of a shared batch runs in a savepoint, and SQLite copies
    // every page a savepoint changes to a sub-journal first; in a temp file that was as
    // many bytes of pwrite as the WAL and its checkpoints together.
    conn.execute_batch(&format!(
        "PRAGMA synchronous = {synchronous}; PRAGMA foreign_keys = OFF; PRAGMA temp_store = MEMORY;"
    ))
    .map_err(rs_err)?;
    conn.set_prepared_statement_cache_capacity(64);
    Ok(conn)
}

/// Take whatever is queued (up to [`MAX_BATCH`]), run it in one transaction, answer after
/// the commit. Operations queued while a batch commits form the next batch. Ends when every
/// sender is gone (the database was dropped).
fn writer_thread(conn: &rusqlite::Connection, mut rx: mpsc::Receiver<Box<dyn Job>>, counters: &Counters) {
    while let Some(first) = rx.blocking_recv() {
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        let outcome = run_batch(conn, &mut batch);
        match &outcome {
            Ok(()) => {
                counters.commits.fetch_add(1, Ordering::Relaxed);
                counters
                    .operations
                    .fetch_add(batch.len() as u64, Ordering::Relaxed);
            }
            Err(e) => tracing::warn!(error = %e, ops = batch.len(), "sqlite write batch failed"),
        }
        for job in batch {
            job.finish(outcome.as_ref().map(|_| ()));
        }
    }
}

fn run_batch(conn: &rusqlite::Connection, batch: &mut [Box<dyn Job>]) -> Result<(), BackendError> {
    exec(conn, "BEGIN IMMEDIATE")?;
    let outcome = run_jobs(conn, batch);
    match outcome {
        Ok(true) => match exec(conn, "COMMIT") {
            Ok(()) => Ok(()),
            Err(e) => {
                let _ = exec(conn, "ROLLBACK");
                Err(e)
            }
        },
        Ok(false) => exec(conn, "ROLLBACK"),
        Err(e) => {
            let _ = exec(conn, "ROLLBACK");
            Err(e)
        }
    }
}

/// Run the jobs of a batch; `Ok(false)` when the transaction must be rolled back (a lone
/// job failed).
fn run_jobs(conn: &rusqlite::Connection, batch: &mut [Box<dyn Job>]) -> Result<bool, BackendError> {
    if let [job] = batch {
        // Alone in its transaction: no savepoint needed, a failure rolls everything back.
        return Ok(job.run(conn));
    }
    for job in batch.iter_mut() {
        exec(conn, "SAVEPOINT graphloom_op")?;
        if job.run(conn) {
            exec(conn, "RELEASE graphloom_op")?;
        } else {
            exec(conn, "ROLLBACK TO graphloom_op")?;
            exec(conn, "RELEASE graphloom_op")?;
        }
    }
    Ok(true)
}

/// Run one statement without parameters on the writer connection.
fn exec(conn: &rusqlite::Connection, sql: &str) -> Result<(), BackendError> {
    conn.prepare_cached(sql)
        .and_then(|mut stmt| stmt.execute([]))
        .map(|_| ())
        .map_err(classify_rs)
}

/// Classify an error of the writer connection, as [`classify`] does for sqlx.
pub(crate) fn classify_rs(e: rusqlite::Error) -> BackendError {
    use BackendErrorKind as K;
    let kind = match &e {
        rusqlite::Error::SqliteFailure(f, _) => match f.extended_code & 0xff {
            5 | 6 | 19 => K::Conflict,
            11 | 26 => K::Corrupt,
            10 | 14 | 8 => K::Connection,
            _ => K::Other,
        },
        rusqlite::Error::FromSqlConversionFailure(..)
        | rusqlite::Error::InvalidColumnType(..)
        | rusqlite::Error::IntegralValueOutOfRange(..)
        | rusqlite::Error::Utf8Error(_) => K::Corrupt,
        _ => K::Other,
    };
    BackendError::caused_by(kind, format!("sqlite: {e}"), e)
}

/// An error of the writer connection as a graphloom error.
pub(crate) fn rs_err(e: rusqlite::Error) -> Error {
    Error::Backend(classify_rs(e))
}

/// Switch the file to WAL. Changing the journal mode takes a lock that SQLite's busy
/// timeout does not wait for, so retry while another connection holds it.
async fn enable_wal(conn: &mut SqliteConnection, patience: Duration) -> Result<()> {
    let deadline = Instant::now() + patience.max(Duration::from_secs(1));
    loop {
        let res: std::result::Result<String, sqlx::Error> = sqlx::query_scalar("PRAGMA journal_mode = WAL")
            .fetch_one(&mut *conn)
            .await;
        match res {
            Ok(mode) if mode.eq_ignore_ascii_case("wal") => return Ok(()),
            Ok(mode) if Instant::now() >= deadline => {
                return Err(other(format!(
                    "could not switch the database to WAL mode (journal mode is `{mode}`)"
                )))
            }
            Err(e) if !is_busy(&e) || Instant::now() >= deadline => return Err(db_err(e)),
            _ => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
}

/// Whether a sqlx error is SQLITE_BUSY or SQLITE_LOCKED.
pub(crate) fn is_busy(e: &sqlx::Error) -> bool {
    matches!(sqlite_code(e).map(|c| c & 0xff), Some(5 | 6))
}

fn sqlite_code(e: &sqlx::Error) -> Option<i32> {
    match e {
        sqlx::Error::Database(d) => d.code().and_then(|c| c.parse().ok()),
        _ => None,
    }
}

/// Classify a sqlx error: lost or unusable connections are `Connection`, lock contention
/// and constraint violations `Conflict`, a damaged file or an undecodable column `Corrupt`,
/// anything else `Other`.
pub(crate) fn classify(e: sqlx::Error) -> BackendError {
    use BackendErrorKind as K;
    let kind = match &e {
        sqlx::Error::Database(_) => match sqlite_code(&e).map(|c| c & 0xff) {
            // BUSY, LOCKED, CONSTRAINT
            Some(5 | 6 | 19) => K::Conflict,
            // CORRUPT, NOTADB
            Some(11 | 26) => K::Corrupt,
            // IOERR, CANTOPEN, READONLY (e.g. a vanished file)
            Some(10 | 14 | 8) => K::Connection,
            _ => K::Other,
        },
        sqlx::Error::Io(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed
        | sqlx::Error::Tls(_)
        | sqlx::Error::Protocol(_) => K::Connection,
        sqlx::Error::ColumnDecode { .. } | sqlx::Error::Decode(_) => K::Corrupt,
        _ => K::Other,
    };
    BackendError::caused_by(kind, format!("sqlite: {e}"), e)
}

/// A sqlx error as a graphloom error.
pub(crate) fn db_err(e: sqlx::Error) -> Error {
    Error::Backend(classify(e))
}

/// A backend error of kind `Other`.
pub(crate) fn other(message: impl Into<String>) -> Error {
    Error::Backend(BackendError::new(BackendErrorKind::Other, message))
}

/// A backend error of kind `Connection`.
pub(crate) fn connection(message: impl Into<String>) -> Error {
    Error::Backend(BackendError::new(BackendErrorKind::Connection, message))
}

/// A backend error of kind `InvalidInput`.
pub(crate) fn invalid_input(message: impl Into<String>) -> Error {
    Error::Backend(BackendError::new(BackendErrorKind::InvalidInput, message))
}

/// A backend error of kind `Corrupt`.
pub(crate) fn corrupt(message: impl Into<String>) -> Error {
    Error::Backend(BackendError::new(BackendErrorKind::Corrupt, message))
}

/// The associated data a stored value is sealed with: the row's kind and key, each part
/// length-prefixed so that parts containing separators cannot be confused.
pub(crate) fn aad(parts: &[&str]) -> Vec<u8> {
    let mut out = Vec::with_capacity(parts.iter().map(|p| p.len() + 4).sum());
    for part in parts {
        let len = u32::try_from(part.len()).unwrap_or(u32::MAX);
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(part.as_bytes());
    }
    out
}

/// Milliseconds since the Unix epoch.
pub(crate) fn now_ms() -> i64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(now.as_millis()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqlx::ConnectOptions;

    #[tokio::test]
    async fn sqlx_errors_are_classified() {
        assert_eq!(
            classify(sqlx::Error::PoolTimedOut).kind,
            BackendErrorKind::Connection
        );
        assert_eq!(
            classify(sqlx::Error::Io(std::io::Error::other("gone"))).kind,
            BackendErrorKind::Connection
        );
        assert_eq!(classify(sqlx::Error::RowNotFound).kind, BackendErrorKind::Other);

        let dir = tempfile::tempdir().unwrap();
        let opts = SqliteConnectOptions::new()
            .filename(dir.path().join("e.db"))
            .create_if_missing(true)
            .busy_timeout(Duration::ZERO);
        let mut a = opts.clone().connect().await.unwrap();
        let mut b = opts.connect().await.unwrap();
        sqlx::query("CREATE TABLE t (k TEXT PRIMARY KEY, n INTEGER)")
            .execute(&mut a)
            .await
            .unwrap();
        sqlx::query("INSERT INTO t VALUES ('x', 1)")
            .execute(&mut a)
            .await
            .unwrap();
        let dup = sqlx::query("INSERT INTO t VALUES ('x', 2)")
            .execute(&mut a)
            .await
            .unwrap_err();
        assert_eq!(classify(dup).kind, BackendErrorKind::Conflict);
        let syntax = sqlx::query("SELEKT 1").execute(&mut a).await.unwrap_err();
        assert_eq!(classify(syntax).kind, BackendErrorKind::Other);
        let text: sqlx::Error = sqlx::query_scalar::<_, i64>("SELECT 'not a number'")
            .fetch_one(&mut a)
            .await
            .unwrap_err();
        assert_eq!(classify(text).kind, BackendErrorKind::Corrupt);

        let mut held = a.begin_with("BEGIN IMMEDIATE").await.unwrap();
        sqlx::query("INSERT INTO t VALUES ('y', 1)")
            .execute(&mut *held)
            .await
            .unwrap();
        let busy = b.begin_with("BEGIN IMMEDIATE").await.err().unwrap();
        assert!(is_busy(&busy));
        let e = db_err(busy);
        assert!(
            matches!(e, Error::Backend(ref b) if b.kind == BackendErrorKind::Conflict),
            "{e}"
        );
        held.rollback().await.unwrap();
    }

    #[test]
    fn aad_parts_are_unambiguous() {
        assert_ne!(aad(&["a|b", "c"]), aad(&["a", "b|c"]));
        assert_ne!(aad(&["ab", ""]), aad(&["a", "b"]));
        assert_eq!(aad(&["x"]), [1, 0, 0, 0, b'x']);
    }
}
