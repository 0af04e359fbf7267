//! Turning `sqlx` errors into graphloom's typed backend errors.
//!
//! Every database failure leaves this crate as
//! [`Error::Backend`] with a [`BackendErrorKind`] a caller
//! can act on:
//!
//! | kind | sqlx error / SQLSTATE | what to do |
//! |---|---|---|
//! | `Connection` | I/O, TLS, protocol, pool timeout or closed, class `08` (connection exception), `57P01`..`57P03` (server shut the session down: `pg_terminate_backend`, restart), `53300` (too many connections) | retry: the pool opens a fresh connection |
//! | `Conflict` | class `23` (integrity: unique violation `23505`, ...), `40001` / `40P01` (serialization failure, deadlock) | retry or report |
//! | `InvalidInput` | class `22` (data exception: e.g. a `\u0000` in JSONB), a bad connection URL | fix the input |
//! | `Corrupt` | a column that does not decode into its declared type | inspect the row |
//! | `NotFound` | a query that had to return a row returned none | |
//! | `Other` | anything else (SQL errors are bugs) | |

use graphloom_core::{BackendError, BackendErrorKind, Error};

/// The class of a `sqlx` error (see the module docs for the table).
#[must_use]
pub fn classify(err: &sqlx::Error) -> BackendErrorKind {
    match err {
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::Protocol(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed
        | sqlx::Error::BeginFailed => BackendErrorKind::Connection,
        sqlx::Error::Database(db) => db
            .code()
            .map_or(BackendErrorKind::Other, |c| classify_sqlstate(&c)),
        sqlx::Error::Configuration(_) | sqlx::Error::InvalidArgument(_) | sqlx::Error::Encode(_) => {
            BackendErrorKind::InvalidInput
        }
        sqlx::Error::ColumnDecode { .. } | sqlx::Error::Decode(_) => BackendErrorKind::Corrupt,
        sqlx::Error::RowNotFound => BackendErrorKind::NotFound,
        _ => BackendErrorKind::Other,
    }
}

/// The class of a PostgreSQL SQLSTATE code.
#[must_use]
pub fn classify_sqlstate(code: &str) -> BackendErrorKind {
    match code {
        // admin_shutdown (pg_terminate_backend), crash_shutdown, cannot_connect_now,
        // too_many_connections: the session is gone or could not start; a retry may work.
        "57P01" | "57P02" | "57P03" | "53300" => BackendErrorKind::Connection,
        "40001" | "40P01" => BackendErrorKind::Conflict,
        c if c.starts_with("08") => BackendErrorKind::Connection,
        c if c.starts_with("23") => BackendErrorKind::Conflict,
        c if c.starts_with("22") => BackendErrorKind::InvalidInput,
        _ => BackendErrorKind::Other,
    }
}

/// A `sqlx` error as a graphloom error, with `what` (the operation) in the message.
pub(crate) fn db(what: &str, err: sqlx::Error) -> Error {
    let kind = classify(&err);
    Error::Backend(BackendError::caused_by(
        kind,
        format!("postgres {what}: {err}"),
        err,
    ))
}

/// Extension to map `sqlx` results.
pub(crate) trait SqlxResultExt<T> {
    /// Map the error with [`db`].
    fn during(self, what: &str) -> Result<T, Error>;
}

impl<T> SqlxResultExt<T> for Result<T, sqlx::Error> {
    fn during(self, what: &str) -> Result<T, Error> {
        self.map_err(|e| db(what, e))
    }
}

/// A backend error of `kind`.
pub(crate) fn backend(kind: BackendErrorKind, message: impl Into<String>) -> Error {
    Error::Backend(BackendError::new(kind, message))
}

/// A `sqlx` error as an error of the server's storage: PostgreSQL's data exceptions
/// (SQLSTATE class `22`: a `\u0000` in text or JSON, a number out of range) are the
/// request's to fix, a lost or refused connection is [`DbError::Unavailable`] (the caller
/// may retry), anything else is the database's.
#[cfg(feature = "server")]
pub(crate) fn server_error(e: sqlx::Error) -> graphloom_server_db::DbError {
    use graphloom_server_db::DbError;
    let data_exception = match &e {
        sqlx::Error::Database(db) => db
            .try_downcast_ref::<sqlx::postgres::PgDatabaseError>()
            .is_some_and(|pg| pg.code().starts_with("22")),
        _ => false,
    };
    if data_exception {
        DbError::Invalid(e.to_string())
    } else if classify(&e) == BackendErrorKind::Connection {
        DbError::Unavailable(e.to_string())
    } else {
        DbError::Backend(e.to_string())
    }
}

/// Extension to map `sqlx` results of the server's storage with [`server_error`].
#[cfg(feature = "server")]
pub(crate) trait ServerResultExt<T> {
    /// Map the error with [`server_error`].
    fn db(self) -> graphloom_server_db::DbResult<T>;
}

#[cfg(feature = "server")]
impl<T> ServerResultExt<T> for Result<T, sqlx::Error> {
    fn db(self) -> graphloom_server_db::DbResult<T> {
        self.map_err(server_error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlstates() {
        assert_eq!(classify_sqlstate("57P01"), BackendErrorKind::Connection);
        assert_eq!(classify_sqlstate("08006"), BackendErrorKind::Connection);
        assert_eq!(classify_sqlstate("23505"), BackendErrorKind::Conflict);
        assert_eq!(classify_sqlstate("23503"), BackendErrorKind::Conflict);
        assert_eq!(classify_sqlstate("40P01"), BackendErrorKind::Conflict);
        assert_eq!(classify_sqlstate("22P05"), BackendErrorKind::InvalidInput);
        assert_eq!(classify_sqlstate("42P01"), BackendErrorKind::Other);
    }

    #[test]
    fn sqlx_errors() {
        let io = sqlx::Error::Io(std::io::Error::new(std::io::ErrorKind::BrokenPipe, "gone"));
        assert_eq!(classify(&io), BackendErrorKind::Connection);
        assert_eq!(classify(&sqlx::Error::PoolTimedOut), BackendErrorKind::Connection);
        assert_eq!(classify(&sqlx::Error::RowNotFound), BackendErrorKind::NotFound);
        let e = db("get_tuple", sqlx::Error::PoolClosed);
        assert!(matches!(e, Error::Backend(ref b) if b.kind() == BackendErrorKind::Connection));
        assert!(e.to_string().contains("get_tuple"), "{e}");
    }
}
