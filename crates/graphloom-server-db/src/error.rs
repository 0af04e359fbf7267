//! [`DbError`]: what a call of the server's storage can fail with.

/// A storage error.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    /// A row with that id exists already.
    #[error("{0} already exists")]
    Conflict(String),
    /// The thread has an active run and the strategy is `reject`.
    #[error("thread {0} is busy")]
    Busy(String),
    /// The database refused a value of the request (PostgreSQL's data exceptions, SQLSTATE
    /// class `22`: a `\u0000` in text or JSON, a number out of range): the client's to fix.
    #[error("invalid input: {0}")]
    Invalid(String),
    /// The database could not be reached, or dropped the connection mid-call (a restart,
    /// a killed session, a pool that timed out): retrying later may succeed, and whether a
    /// write that failed this way was committed is unknown.
    #[error("database unavailable: {0}")]
    Unavailable(String),
    /// The database failed.
    #[error("database: {0}")]
    Backend(String),
}

impl DbError {
    /// Whether the call may succeed if made again ([`DbError::Unavailable`]).
    #[must_use]
    pub fn is_transient(&self) -> bool {
        matches!(self, DbError::Unavailable(_))
    }
}

impl From<graphloom_core::Error> for DbError {
    fn from(e: graphloom_core::Error) -> Self {
        match &e {
            graphloom_core::Error::Backend(b)
                if b.kind() == graphloom_core::BackendErrorKind::InvalidInput =>
            {
                DbError::Invalid(b.message.clone())
            }
            graphloom_core::Error::Backend(b) if b.kind() == graphloom_core::BackendErrorKind::Connection => {
                DbError::Unavailable(e.to_string())
            }
            _ => DbError::Backend(e.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use graphloom_core::{BackendError, BackendErrorKind};

    #[test]
    fn invalid_input_from_a_backend_is_the_clients_to_fix() {
        let e = graphloom_core::Error::Backend(BackendError::new(BackendErrorKind::InvalidInput, "nul byte"));
        assert!(matches!(DbError::from(e), DbError::Invalid(m) if m == "nul byte"));
        let e = graphloom_core::Error::Backend(BackendError::new(BackendErrorKind::Connection, "gone"));
        let e = DbError::from(e);
        assert!(e.is_transient());
        assert!(matches!(e, DbError::Unavailable(m) if m.contains("gone")));
        let e = graphloom_core::Error::Backend(BackendError::new(BackendErrorKind::Other, "disk full"));
        assert!(matches!(DbError::from(e), DbError::Backend(m) if m.contains("disk full")));
    }
}
