//! The writer thread: one connection that runs every queued write and group-commits them.
//!
//! Whatever is queued when the writer gets to it (up to [`MAX_BATCH`] operations) runs in
//! one `BEGIN IMMEDIATE` transaction, and every caller is answered after the commit. So
//! many concurrent runs share commits (and fsyncs), and a write never meets "database is
//! locked" from another writer of this process.
//!
//! An operation that fails rolls back its own changes only. A batch first runs without
//! savepoints (SQLite copies every page an operation touches into its savepoint's journal:
//! a seventh of the writer's time under load); when one of its operations fails, the
//! transaction is rolled back and the batch runs again with a savepoint for each. So the
//! operations the writer runs are re-runnable ([`Fn`]); an operation that can run only once
//! (the public [`Database::write`](crate::Database::write)) puts its batch on savepoints
//! from the start.

use crate::error::{backend_error, batch_failed, other};
use graphloom_core::{BackendError, Error};
use std::sync::atomic::{AtomicU64, Ordering};
use tokio::sync::{mpsc, oneshot};

/// Most operations committed in one transaction.
const MAX_BATCH: usize = 256;
/// Operations that may wait for the writer before callers are held back.
pub(crate) const QUEUE: usize = 4096;

/// A re-runnable write operation.
type AgainOp<T, E> = Box<dyn Fn(&rusqlite::Connection) -> std::result::Result<T, E> + Send + 'static>;
/// A write operation that runs once.
type OnceOp<T, E> = Box<dyn FnOnce(&rusqlite::Connection) -> std::result::Result<T, E> + Send + 'static>;

/// A write operation run by the writer thread inside the batch's transaction.
pub(crate) enum WriteOp<T, E> {
    /// Re-runnable: run again when its batch is.
    Again(AgainOp<T, E>),
    /// Runs once: its batch runs in savepoints from the start.
    Once(Option<OnceOp<T, E>>),
}

/// A queued write: is answered once the batch committed.
pub(crate) trait Job: Send {
    /// Run the operation; `true` if it succeeded (its changes are kept). Run again (after
    /// the transaction was rolled back), a re-runnable operation's new outcome replaces
    /// the one before.
    fn run(&mut self, conn: &rusqlite::Connection) -> bool;
    /// Whether the operation can run again.
    fn rerunnable(&self) -> bool;
    /// Answer the caller with the operation's outcome, or the batch's commit error.
    fn finish(self: Box<Self>, commit: std::result::Result<(), &BackendError>);
}

/// A write operation and where its answer goes.
pub(crate) struct Pending<T, E> {
    op: WriteOp<T, E>,
    out: Option<std::result::Result<T, E>>,
    reply: oneshot::Sender<std::result::Result<T, E>>,
}

impl<T, E> Pending<T, E> {
    /// `op`, answered on `reply`.
    pub(crate) fn new(op: WriteOp<T, E>, reply: oneshot::Sender<std::result::Result<T, E>>) -> Self {
        Self { op, out: None, reply }
    }
}

impl<T: Send + 'static, E: From<Error> + Send + 'static> Job for Pending<T, E> {
    fn run(&mut self, conn: &rusqlite::Connection) -> bool {
        let out = match &mut self.op {
            WriteOp::Again(op) => op(conn),
            WriteOp::Once(op) => match op.take() {
                Some(op) => op(conn),
                None => return false,
            },
        };
        let ok = out.is_ok();
        self.out = Some(out);
        ok
    }

    fn rerunnable(&self) -> bool {
        matches!(self.op, WriteOp::Again(_))
    }

    fn finish(self: Box<Self>, commit: std::result::Result<(), &BackendError>) {
        let answer = match (self.out, commit) {
            // The operation's own error: its changes were rolled back.
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
    /// Of the commits, the batches that ran each operation in a savepoint: they held a
    /// run-once operation, or one of their operations failed (SQLite copies every page an
    /// operation touches into its savepoint's journal, so these cost more).
    pub savepoint_batches: u64,
}

/// The writer's counts, read by [`CommitStats`].
#[derive(Debug, Default)]
pub(crate) struct Counters {
    commits: AtomicU64,
    operations: AtomicU64,
    savepoint_batches: AtomicU64,
}

impl Counters {
    /// The counts so far.
    pub(crate) fn stats(&self) -> CommitStats {
        CommitStats {
            commits: self.commits.load(Ordering::Relaxed),
            operations: self.operations.load(Ordering::Relaxed),
            savepoint_batches: self.savepoint_batches.load(Ordering::Relaxed),
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
            Ok(saved) => {
                counters.commits.fetch_add(1, Ordering::Relaxed);
                counters
                    .operations
                    .fetch_add(batch.len() as u64, Ordering::Relaxed);
                if *saved {
                    counters.savepoint_batches.fetch_add(1, Ordering::Relaxed);
                }
            }
            Err(e) => tracing::warn!(error = %e, ops = batch.len(), "sqlite write batch failed"),
        }
        for job in batch {
            job.finish(outcome.as_ref().map(|_| ()));
        }
    }
}

/// Run and commit (or roll back) one batch; whether it ran on savepoints.
fn run_batch(conn: &rusqlite::Connection, batch: &mut [Box<dyn Job>]) -> Result<bool, BackendError> {
    exec(conn, "BEGIN IMMEDIATE")?;
    let mut outcome = run_jobs(conn, batch);
    if matches!(outcome, Ok(Outcome::Again)) {
        // An operation failed in a batch without savepoints: the batch again, with them
        // (SQLite may have rolled the transaction back already, on some errors).
        let rolled_back = if conn.is_autocommit() {
            Ok(())
        } else {
            exec(conn, "ROLLBACK")
        };
        outcome = rolled_back
            .and_then(|()| exec(conn, "BEGIN IMMEDIATE"))
            .and_then(|()| run_saved(conn, batch).map(|()| Outcome::Commit { saved: true }));
    }
    match outcome {
        Ok(Outcome::Commit { saved }) => match exec(conn, "COMMIT") {
            Ok(()) => Ok(saved),
            Err(e) => {
                let _ = exec(conn, "ROLLBACK");
                Err(e)
            }
        },
        Ok(Outcome::RollBack | Outcome::Again) => exec(conn, "ROLLBACK").map(|()| false),
        Err(e) => {
            let _ = exec(conn, "ROLLBACK");
            Err(e)
        }
    }
}

/// What a batch's transaction comes to once its operations ran.
enum Outcome {
    /// Commit it; `saved` if its operations ran in savepoints.
    Commit { saved: bool },
    /// Roll it back: its one operation failed.
    RollBack,
    /// Roll it back and run the batch again, each operation in a savepoint: one failed.
    Again,
}

/// Run the operations of a batch: alone or all re-runnable, without savepoints; else
/// each in a savepoint.
fn run_jobs(conn: &rusqlite::Connection, batch: &mut [Box<dyn Job>]) -> Result<Outcome, BackendError> {
    if let [job] = batch {
        // Alone in its transaction: a failure rolls everything back.
        return Ok(if job.run(conn) {
            Outcome::Commit { saved: false }
        } else {
            Outcome::RollBack
        });
    }
    if !batch.iter().all(|j| j.rerunnable()) {
        return run_saved(conn, batch).map(|()| Outcome::Commit { saved: true });
    }
    for job in batch.iter_mut() {
        if !job.run(conn) {
            return Ok(Outcome::Again);
        }
    }
    Ok(Outcome::Commit { saved: false })
}

/// Run each operation of a batch in a savepoint of its own: one that fails rolls back its
/// own changes only.
fn run_saved(conn: &rusqlite::Connection, batch: &mut [Box<dyn Job>]) -> Result<(), BackendError> {
    for job in batch.iter_mut() {
        exec(conn, "SAVEPOINT graphloom_op")?;
        if job.run(conn) {
            exec(conn, "RELEASE graphloom_op")?;
        } else {
            exec(conn, "ROLLBACK TO graphloom_op")?;
            exec(conn, "RELEASE graphloom_op")?;
        }
    }
    Ok(())
}

/// Run one statement without parameters (a cached prepared statement).
pub(crate) fn exec(conn: &rusqlite::Connection, sql: &str) -> Result<(), BackendError> {
    conn.prepare_cached(sql)
        .and_then(|mut stmt| stmt.execute([]))
        .map(|_| ())
        .map_err(backend_error)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;

    type Answer = oneshot::Receiver<std::result::Result<(), Error>>;

    /// An operation inserting `name`, failing after the insert when `fail`; counts its runs.
    fn insert(name: &'static str, fail: bool, runs: &Arc<AtomicUsize>) -> WriteOp<(), Error> {
        let runs = Arc::clone(runs);
        WriteOp::Again(Box::new(move |c: &rusqlite::Connection| {
            runs.fetch_add(1, Ordering::SeqCst);
            c.execute("INSERT INTO t (name) VALUES (?1)", [name])
                .map_err(|e| other(e.to_string()))?;
            if fail {
                return Err(other("failed after writing"));
            }
            Ok(())
        }))
    }

    /// Run `ops` as one batch of the writer thread: the rows left, the answers.
    fn one_batch(ops: Vec<WriteOp<(), Error>>) -> (Vec<String>, Vec<bool>, CommitStats) {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        conn.execute_batch("CREATE TABLE t (name TEXT NOT NULL)").unwrap();
        let (tx, rx) = mpsc::channel(16);
        let mut answers: Vec<Answer> = Vec::new();
        for op in ops {
            let (reply, answer) = oneshot::channel();
            tx.try_send(Box::new(Pending::new(op, reply)) as Box<dyn Job>)
                .unwrap_or_else(|_| panic!("queue full"));
            answers.push(answer);
        }
        drop(tx);
        let counters = Counters::default();
        writer_thread(&conn, rx, &counters);
        let mut stmt = conn.prepare("SELECT name FROM t ORDER BY name").unwrap();
        let rows = stmt
            .query_map([], |r| r.get::<_, String>(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        let ok = answers
            .into_iter()
            .map(|mut a| a.try_recv().unwrap().is_ok())
            .collect();
        (rows, ok, counters.stats())
    }

    #[test]
    fn a_failing_operation_of_a_batch_without_savepoints_is_undone_alone() {
        let runs = Arc::new(AtomicUsize::new(0));
        let (rows, ok, stats) = one_batch(vec![
            insert("a", false, &runs),
            insert("b", true, &runs),
            insert("c", false, &runs),
        ]);
        assert_eq!(rows, ["a", "c"]);
        assert_eq!(ok, [true, false, true]);
        assert_eq!(
            (stats.commits, stats.operations, stats.savepoint_batches),
            (1, 3, 1)
        );
        // "a" and "b" ran without savepoints, then all three with them.
        assert_eq!(runs.load(Ordering::SeqCst), 5);
    }

    #[test]
    fn a_batch_that_succeeds_runs_each_operation_once() {
        let runs = Arc::new(AtomicUsize::new(0));
        let (rows, ok, stats) = one_batch(vec![insert("a", false, &runs), insert("b", false, &runs)]);
        assert_eq!(rows, ["a", "b"]);
        assert_eq!(ok, [true, true]);
        assert_eq!(stats.savepoint_batches, 0);
        assert_eq!(runs.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn an_operation_that_runs_once_puts_its_batch_on_savepoints() {
        let runs = Arc::new(AtomicUsize::new(0));
        let once = WriteOp::Once(Some(Box::new(|c: &rusqlite::Connection| {
            c.execute("INSERT INTO t (name) VALUES ('o')", [])
                .map_err(|e| other(e.to_string()))?;
            Err(other("failed after writing"))
        })));
        let (rows, ok, stats) = one_batch(vec![insert("a", false, &runs), once, insert("c", false, &runs)]);
        assert_eq!(rows, ["a", "c"]);
        assert_eq!(ok, [true, false, true]);
        assert_eq!(stats.savepoint_batches, 1);
        assert_eq!(runs.load(Ordering::SeqCst), 2);
    }
}
