//! The server's domain error, [`ServiceError`]: what a service, a job or the auth core
//! answers when an operation fails, in the server's own terms (not found, invalid,
//! conflict, ...), with no HTTP in it. The HTTP edge turns it into a status and a typed
//! JSON body (`api::error::ApiError`); the thread protocol into an error frame; A2A into
//! a JSON-RPC error.
//!
//! An internal error or an outage is logged where it is made, with the id of the request
//! being handled (the `x-request-id` of the request and its response), and nothing of its
//! cause goes to the client.

use crate::db::DbError;
use graphloom_core::BackendErrorKind;
use graphloom_server_wire::protocol::{ErrorCode, ProtocolError};
use std::future::Future;

tokio::task_local! {
    /// The `x-request-id` of the request this task is handling.
    static REQUEST_ID: String;
}

/// Handle a request with id `id` in `fut`: the errors it answers and logs carry the id.
pub(crate) async fn with_request_id<F: Future>(id: String, fut: F) -> F::Output {
    REQUEST_ID.scope(id, fut).await
}

/// The id of the request being handled on this task, if any.
#[must_use]
pub fn current_request_id() -> Option<String> {
    REQUEST_ID.try_with(Clone::clone).ok()
}

/// The message of a panic payload (`panic!` with a literal or a formatted message).
pub(crate) fn panic_message(panic: &(dyn std::any::Any + Send)) -> &str {
    panic
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| panic.downcast_ref::<&str>().copied())
        .unwrap_or("(no message)")
}

/// What a client sees of an internal error.
pub(crate) const INTERNAL: &str = "internal error";

/// What kind of failure a [`ServiceError`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// No identity, or one the authenticator refused.
    Unauthenticated,
    /// The identity may not do this.
    Forbidden,
    /// What the operation names does not exist (for this owner).
    NotFound,
    /// The operation clashes with what exists (a duplicate, a busy thread).
    Conflict,
    /// The request is malformed or out of bounds.
    Invalid,
    /// A dependency (the database, the authenticator) is out of reach: retry.
    Unavailable,
    /// Anything else: the server's fault.
    Internal,
}

/// A failed operation: its kind and what went wrong, for a person.
#[derive(Debug, thiserror::Error)]
#[error("{detail}")]
pub struct ServiceError {
    /// What kind of failure.
    pub kind: ErrorKind,
    /// What went wrong, for a person ("internal error" for an internal one).
    pub detail: String,
}

/// Result of a service.
pub type ServiceResult<T> = Result<T, ServiceError>;

impl ServiceError {
    /// An error of this kind with this detail.
    pub fn new(kind: ErrorKind, detail: impl Into<String>) -> Self {
        Self {
            kind,
            detail: detail.into(),
        }
    }
    /// `<what> not found`.
    pub fn not_found(what: impl std::fmt::Display) -> Self {
        Self::new(ErrorKind::NotFound, format!("{what} not found"))
    }
    /// Invalid input.
    pub fn invalid(detail: impl Into<String>) -> Self {
        Self::new(ErrorKind::Invalid, detail)
    }
    /// A conflict.
    pub fn conflict(detail: impl Into<String>) -> Self {
        Self::new(ErrorKind::Conflict, detail)
    }
    /// Forbidden.
    pub fn forbidden(detail: impl Into<String>) -> Self {
        Self::new(ErrorKind::Forbidden, detail)
    }
    /// The server's fault: the cause is logged with the request id; the client gets a
    /// generic message (and the request id, to quote).
    pub fn internal(e: impl std::fmt::Display) -> Self {
        let request_id = current_request_id();
        tracing::error!(
            request_id = request_id.as_deref().unwrap_or("-"),
            error = %e,
            "internal error"
        );
        Self::new(ErrorKind::Internal, INTERNAL)
    }
    /// A database that could not be reached: the cause logged once, the client told to
    /// retry (nothing of the cause, which may name hosts, goes out).
    pub fn unavailable(e: impl std::fmt::Display) -> Self {
        let request_id = current_request_id();
        tracing::warn!(
            request_id = request_id.as_deref().unwrap_or("-"),
            error = %e,
            "database unavailable"
        );
        Self::new(
            ErrorKind::Unavailable,
            "the database is unavailable; retry the request",
        )
    }
    /// Whether the request is at fault (fixing it, not retrying it, helps).
    #[must_use]
    pub fn is_client_error(&self) -> bool {
        matches!(
            self.kind,
            ErrorKind::Unauthenticated
                | ErrorKind::Forbidden
                | ErrorKind::NotFound
                | ErrorKind::Conflict
                | ErrorKind::Invalid
        )
    }
}

impl From<DbError> for ServiceError {
    fn from(e: DbError) -> Self {
        match e {
            DbError::Conflict(what) => Self::conflict(format!("{what} already exists")),
            DbError::Busy(thread) => Self::conflict(format!(
                "thread {thread} is already running a run; use multitask_strategy \
                 \"enqueue\", \"interrupt\" or \"rollback\" to run another"
            )),
            DbError::Invalid(m) => Self::invalid(m),
            DbError::Unavailable(m) => Self::unavailable(m),
            DbError::Backend(m) => Self::internal(m),
        }
    }
}

impl From<graphloom_core::Error> for ServiceError {
    fn from(e: graphloom_core::Error) -> Self {
        use graphloom_core::Error as E;
        match &e {
            E::NotFound(_) => Self::new(ErrorKind::NotFound, e.to_string()),
            E::UnknownNode(_) | E::InvalidResume(_) | E::Decode(_) | E::State { .. } => {
                Self::invalid(e.to_string())
            }
            // What a checkpointer or store refuses as the request's fault (a malformed
            // store filter, a bad namespace, a value the database will not hold) is the
            // client's to fix.
            E::Backend(b) => match b.kind() {
                BackendErrorKind::InvalidInput => Self::invalid(b.message.clone()),
                BackendErrorKind::NotFound => Self::new(ErrorKind::NotFound, b.message.clone()),
                BackendErrorKind::Connection => Self::unavailable(e),
                _ => Self::internal(e),
            },
            _ => Self::internal(e),
        }
    }
}

impl From<ServiceError> for ProtocolError {
    fn from(e: ServiceError) -> Self {
        let code = match e.kind {
            ErrorKind::Unauthenticated | ErrorKind::Forbidden => ErrorCode::PermissionDenied,
            _ if e.is_client_error() => ErrorCode::InvalidArgument,
            _ => ErrorCode::UnknownError,
        };
        Self::new(code, e.detail)
    }
}
