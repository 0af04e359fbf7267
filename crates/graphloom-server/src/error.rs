//! Typed JSON errors: every failure answers `{"detail": "..."}` with a fitting status.

use crate::db::DbError;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

/// An error answered to a client.
#[derive(Debug)]
pub struct ApiError {
    /// HTTP status.
    pub status: StatusCode,
    /// What went wrong, for a person.
    pub detail: String,
}

impl ApiError {
    /// An error with this status and detail.
    pub fn new(status: StatusCode, detail: impl Into<String>) -> Self {
        Self {
            status,
            detail: detail.into(),
        }
    }
    /// 404.
    pub fn not_found(what: impl std::fmt::Display) -> Self {
        Self::new(StatusCode::NOT_FOUND, format!("{what} not found"))
    }
    /// 422.
    pub fn invalid(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::UNPROCESSABLE_ENTITY, detail)
    }
    /// 409.
    pub fn conflict(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, detail)
    }
    /// 500, logged; the client gets a generic message.
    pub fn internal(e: impl std::fmt::Display) -> Self {
        tracing::error!(error = %e, "internal error");
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, format!("internal error: {e}"))
    }
}

/// The body of every error answer.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub struct ErrorBody {
    /// What went wrong, for a person (for a 422: the field and why).
    pub detail: String,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, axum::Json(ErrorBody { detail: self.detail })).into_response()
    }
}

impl From<DbError> for ApiError {
    fn from(e: DbError) -> Self {
        match e {
            DbError::Conflict(what) => ApiError::conflict(format!("{what} already exists")),
            DbError::Busy(thread) => ApiError::conflict(format!(
                "thread {thread} is already running a run; use multitask_strategy \
                 \"enqueue\", \"interrupt\" or \"rollback\" to run another"
            )),
            DbError::Backend(m) => ApiError::internal(m),
        }
    }
}

impl From<graphloom_core::Error> for ApiError {
    fn from(e: graphloom_core::Error) -> Self {
        use graphloom_core::Error as E;
        match &e {
            E::NotFound(_) => ApiError::new(StatusCode::NOT_FOUND, e.to_string()),
            E::UnknownNode(_) | E::InvalidResume(_) | E::Decode(_) | E::State { .. } => {
                ApiError::invalid(e.to_string())
            }
            _ => ApiError::internal(e),
        }
    }
}

/// Result of handlers.
pub type ApiResult<T> = Result<T, ApiError>;

/// Parse a JSON body into `T`, answering 422 with the position and field on failure.
pub fn parse_body<T: serde::de::DeserializeOwned>(body: &[u8]) -> ApiResult<T> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return serde_json::from_slice(b"{}").map_err(|e| ApiError::invalid(format!("invalid body: {e}")));
    }
    serde_json::from_slice(body).map_err(|e| ApiError::invalid(format!("invalid body: {e}")))
}
