//! The writer thread: one connection that runs every queued write and group-commits them.
//!
//! Whatever is queued when the writer gets to it (up to [`MAX_BATCH`] operations) runs in
//! one `BEGIN IMMEDIATE` transaction, each operation in a savepoint of its own when it
//! shares the batch, and every caller is answered after the commit. So many concurrent
//! runs share commits (and fsyncs), and a write never meets "database is locked" from
//! another writer of this process.

use crate::error::{backend_error, batch_failed, other};
use graphloom_core::{BackendError, Error};
use std::sync::atomic::{AtomicU64, Ordering};
use tokio::sync::{mpsc, oneshot};

/// Most operations committed in one transaction.
const MAX_BATCH: usize = 256;
/// Operations that may wait for the writer before callers are held back.
pub(crate) const QUEUE: usize = 4096;

/// An operation run by the writer thread inside the batch's transaction.
type WriteOp<T, E> = Box<dyn FnOnce(&rusqlite::Connection) -> std::result::Result<T, E> + Send + 'static>;

/// A queued write: runs inside a savepoint, is answered once the batch committed.
pub(crate) trait Job: Send {
    /// Run the operation; `true` if it succeeded (its changes are kept).
    fn run(&mut self, conn: &rusqlite::Connection) -> bool;
    /// Answer the caller with the operation's outcome, or the batch's commit error.
    fn finish(self: Box<Self>, commit: std::result::Result<(), &BackendError>);
}

/// A write operation and where its answer goes.
pub(crate) struct Pending<T, E> {
    op: Option<WriteOp<T, E>>,
    out: Option<std::result::Result<T, E>>,
    reply: oneshot::Sender<std::result::Result<T, E>>,
}

impl<T, E> Pending<T, E> {
    /// `op`, answered on `reply`.
    pub(crate) fn new(op: WriteOp<T, E>, reply: oneshot::Sender<std::result::Result<T, E>>) -> Self {
        Self {
            op: Some(op),
            out: None,
            reply,
        }
    }
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
            (_, Err(e)) => Err(batch_failed(e).into()),
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

/// The writer's counts, read by [`CommitStats`].
#[derive(Debug, Default)]
pub(crate) struct Counters {
    commits: AtomicU64,
    operations: AtomicU64,
}

impl Counters {
    /// The counts so far.
    pub(crate) fn stats(&self) -> CommitStats {
        CommitStats {
            commits: self.commits.load(Ordering::Relaxed),
            operations: self.operations.load(Ordering::Relaxed),
        }
    }
}

/// Take whatever is queued (up to [`MAX_BATCH`]), run it in one transaction, answer after
/// the commit. Operations queued while a batch commits form the next batch. Ends when every
/// sender is gone (the database was dropped).
pub(crate) fn writer_thread(
    conn: &rusqlite::Connection,
    mut rx: mpsc::Receiver<Box<dyn Job>>,
    counters: &Counters,
) {
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

/// Run one statement without parameters (a cached prepared statement).
pub(crate) fn exec(conn: &rusqlite::Connection, sql: &str) -> Result<(), BackendError> {
    conn.prepare_cached(sql)
        .and_then(|mut stmt| stmt.execute([]))
        .map(|_| ())
        .map_err(backend_error)
}
