//! Connections: the read connections kept between reads, and how every connection of a
//! file is opened.

use crate::error::{rusqlite_error, SqlResultExt};
use crate::options::{SqliteOptions, Synchronous};
use graphloom_core::{Error, Result};
use rusqlite::{Connection, OpenFlags};
use std::path::PathBuf;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

/// Prepared statements each connection keeps.
const STATEMENT_CACHE: usize = 64;

/// Open a connection to an existing file, with the busy timeout and without foreign keys.
fn open(path: &std::path::Path, busy_timeout: Duration, flags: OpenFlags) -> Result<Connection> {
    let conn = Connection::open_with_flags(path, flags).sql()?;
    conn.busy_timeout(busy_timeout).sql()?;
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    Ok(conn)
}

/// The connection that creates the file if needed, switches it to WAL and migrates it
/// (page size first: it takes effect when the first table is created).
pub(crate) fn open_setup(opts: &SqliteOptions, page_size: u32) -> Result<Connection> {
    let conn = open(
        &opts.path,
        opts.busy_timeout,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.execute_batch(&format!(
        "PRAGMA page_size = {page_size}; PRAGMA foreign_keys = OFF; PRAGMA synchronous = {};",
        synchronous(opts.synchronous)
    ))
    .sql()?;
    Ok(conn)
}

/// The writer's own connection. It runs every statement of a batch on its thread, without a
/// hand-off per statement, with cached prepared statements.
pub(crate) fn open_writer(opts: &SqliteOptions) -> Result<Connection> {
    let conn = open(
        &opts.path,
        opts.busy_timeout,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    // temp_store: each operation of a shared batch runs in a savepoint, and SQLite copies
    // every page a savepoint changes to a sub-journal first; in a temp file that was as
    // many bytes of pwrite as the WAL and its checkpoints together.
    conn.execute_batch(&format!(
        "PRAGMA synchronous = {}; PRAGMA foreign_keys = OFF; PRAGMA temp_store = MEMORY;",
        synchronous(opts.synchronous)
    ))
    .sql()?;
    Ok(conn)
}

fn synchronous(s: Synchronous) -> &'static str {
    match s {
        Synchronous::Full => "FULL",
        Synchronous::Normal => "NORMAL",
    }
}

/// Read connections (`query_only`), kept open between reads. A read takes an idle one or
/// opens another; at most `max_idle` are kept afterwards. Each is used by one thread at a
/// time, and its prepared statements stay cached.
#[derive(Debug)]
pub(crate) struct ReadPool {
    path: PathBuf,
    busy_timeout: Duration,
    idle: Mutex<Vec<Connection>>,
    max_idle: usize,
}

impl ReadPool {
    /// Read connections to the file of `opts`, none open yet.
    pub(crate) fn new(opts: &SqliteOptions) -> Self {
        Self {
            path: opts.path.clone(),
            busy_timeout: opts.busy_timeout,
            idle: Mutex::new(Vec::new()),
            max_idle: usize::try_from(opts.read_connections.max(1)).unwrap_or(1),
        }
    }

    fn open(&self) -> Result<Connection> {
        let conn = open(
            &self.path,
            self.busy_timeout,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        conn.execute_batch("PRAGMA query_only = ON; PRAGMA foreign_keys = OFF;")
            .sql()?;
        Ok(conn)
    }

    /// Run `op` in a read transaction on an idle read connection (a new one when none is
    /// idle), on the calling thread. Every statement of `op` sees one snapshot of the file.
    pub(crate) fn run<T, E, F>(&self, op: F) -> std::result::Result<T, E>
    where
        E: From<Error>,
        F: FnOnce(&Connection) -> std::result::Result<T, E>,
    {
        let idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner).pop();
        let conn = match idle {
            Some(c) => c,
            None => self.open()?,
        };
        // A deferred transaction: one snapshot for every statement of `op`, and no lock a
        // writer waits for (WAL).
        exec(&conn, "BEGIN")?;
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

/// Run one statement without parameters (a cached prepared statement).
fn exec(conn: &Connection, sql: &str) -> Result<()> {
    conn.prepare_cached(sql)
        .and_then(|mut stmt| stmt.execute([]))
        .map(|_| ())
        .map_err(rusqlite_error)
}
