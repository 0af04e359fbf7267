//! Turning SQLite failures into graphloom's typed backend errors.
//!
//! Every database failure leaves this crate as [`Error::Backend`] with a
//! [`BackendErrorKind`] a caller can act on (undecodable checkpoint rows are
//! [`Error::CorruptCheckpoint`] naming the row, see the saver):
//!
//! | kind | SQLite result code / rusqlite error | what to do |
//! |---|---|---|
//! | `Connection` | `IOERR`, `CANTOPEN`, `READONLY` (e.g. a vanished file), the writer thread gone | reopen |
//! | `Conflict` | `BUSY`, `LOCKED` (another process held the lock past the busy timeout), `CONSTRAINT` | retry or report |
//! | `Corrupt` | `CORRUPT`, `NOTADB`, a column that does not decode into its type | inspect the file |
//! | `InvalidInput` | a call the backend cannot serve as asked (e.g. `put_writes` without a checkpoint id) | fix the call |
//! | `Other` | anything else (SQL errors are bugs) | |

use graphloom_core::{BackendError, BackendErrorKind, Error};

/// Classify a `rusqlite` error (see the module docs for the table).
#[must_use]
pub fn classify(e: &rusqlite::Error) -> BackendErrorKind {
    use BackendErrorKind as K;
    match e {
        rusqlite::Error::SqliteFailure(f, _) => match f.extended_code & 0xff {
            // BUSY, LOCKED, CONSTRAINT
            5 | 6 | 19 => K::Conflict,
            // CORRUPT, NOTADB
            11 | 26 => K::Corrupt,
            // IOERR, CANTOPEN, READONLY
            10 | 14 | 8 => K::Connection,
            _ => K::Other,
        },
        rusqlite::Error::FromSqlConversionFailure(..)
        | rusqlite::Error::InvalidColumnType(..)
        | rusqlite::Error::IntegralValueOutOfRange(..)
        | rusqlite::Error::Utf8Error(_) => K::Corrupt,
        _ => K::Other,
    }
}

/// Whether a `rusqlite` error is `SQLITE_BUSY` or `SQLITE_LOCKED`.
pub(crate) fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(e, rusqlite::Error::SqliteFailure(f, _) if matches!(f.extended_code & 0xff, 5 | 6))
}

/// A `rusqlite` error as a classified backend error.
pub(crate) fn backend_error(e: rusqlite::Error) -> BackendError {
    BackendError::caused_by(classify(&e), format!("sqlite: {e}"), e)
}

/// A `rusqlite` error as a graphloom error, classified like the saver's own (busy,
/// constraint, corrupt, ...), for operations passed to
/// [`SqliteDatabase::write`](crate::SqliteDatabase::write).
#[must_use]
pub fn rusqlite_error(e: rusqlite::Error) -> Error {
    Error::Backend(backend_error(e))
}

/// The error a write gets when the transaction of its batch could not be committed: the
/// batch's error, for each of the batch's writes.
pub(crate) fn batch_failed(e: &BackendError) -> Error {
    Error::Backend(e.clone())
}

/// A backend error of `kind`.
pub(crate) fn backend(kind: BackendErrorKind, message: impl Into<String>) -> Error {
    Error::Backend(BackendError::new(kind, message))
}

/// A backend error of kind `Other`.
pub(crate) fn other(message: impl Into<String>) -> Error {
    backend(BackendErrorKind::Other, message)
}

/// A backend error of kind `Connection`.
pub(crate) fn connection(message: impl Into<String>) -> Error {
    backend(BackendErrorKind::Connection, message)
}

/// A backend error of kind `InvalidInput`.
pub(crate) fn invalid_input(message: impl Into<String>) -> Error {
    backend(BackendErrorKind::InvalidInput, message)
}

/// A backend error of kind `Corrupt`.
pub(crate) fn corrupt(message: impl Into<String>) -> Error {
    backend(BackendErrorKind::Corrupt, message)
}

/// Extension to map `rusqlite` results with [`rusqlite_error`].
pub(crate) trait SqlResultExt<T> {
    /// Map the error with [`rusqlite_error`].
    fn sql(self) -> Result<T, Error>;
}

impl<T> SqlResultExt<T> for rusqlite::Result<T> {
    fn sql(self) -> Result<T, Error> {
        self.map_err(rusqlite_error)
    }
}

/// A `rusqlite` error as an error of the server's storage.
#[cfg(feature = "server")]
pub(crate) fn server_error(e: rusqlite::Error) -> graphloom_server_db::DbError {
    graphloom_server_db::DbError::Backend(e.to_string())
}

/// Extension to map `rusqlite` results of the server's storage with [`server_error`].
#[cfg(feature = "server")]
pub(crate) trait ServerResultExt<T> {
    /// Map the error with [`server_error`].
    fn db(self) -> graphloom_server_db::DbResult<T>;
}

#[cfg(feature = "server")]
impl<T> ServerResultExt<T> for rusqlite::Result<T> {
    fn db(self) -> graphloom_server_db::DbResult<T> {
        self.map_err(server_error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rusqlite::Connection;
    use std::time::Duration;

    #[test]
    fn rusqlite_errors_are_classified() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("e.db");
        let a = Connection::open(&path).unwrap();
        let b = Connection::open(&path).unwrap();
        b.busy_timeout(Duration::ZERO).unwrap();
        a.execute_batch("CREATE TABLE t (k TEXT PRIMARY KEY, n INTEGER); INSERT INTO t VALUES ('x', 1)")
            .unwrap();
        let dup = a.execute("INSERT INTO t VALUES ('x', 2)", []).unwrap_err();
        assert_eq!(classify(&dup), BackendErrorKind::Conflict);
        let syntax = a.execute("SELEKT 1", []).unwrap_err();
        assert_eq!(classify(&syntax), BackendErrorKind::Other);
        let text = a
            .query_row("SELECT 'not a number'", [], |r| r.get::<_, i64>(0))
            .unwrap_err();
        assert_eq!(classify(&text), BackendErrorKind::Corrupt);
        let missing = Connection::open(dir.path().join("no/such/dir/x.db")).unwrap_err();
        assert_eq!(classify(&missing), BackendErrorKind::Connection);

        a.execute_batch("BEGIN IMMEDIATE; INSERT INTO t VALUES ('y', 1)")
            .unwrap();
        let busy = b.execute_batch("BEGIN IMMEDIATE").unwrap_err();
        assert!(is_busy(&busy));
        let e = rusqlite_error(busy);
        assert!(
            matches!(e, Error::Backend(ref b) if b.kind == BackendErrorKind::Conflict),
            "{e}"
        );
        a.execute_batch("ROLLBACK").unwrap();
    }
}
