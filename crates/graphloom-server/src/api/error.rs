//! Typed JSON errors: every failure answers `{"detail": "..."}` with a fitting status.
//!
//! A 5xx never tells the client what broke: its body is `{"detail": "internal error",
//! "request_id": "..."}` and the cause goes to the log under the same request id (the
//! `x-request-id` header of the request and its response). Services answer a
//! [`ServiceError`]; its kind picks the status here.

use crate::auth::AuthError;
use crate::db::DbError;
use crate::error::{current_request_id, panic_message, ErrorKind, ServiceError, INTERNAL};
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
        ServiceError::not_found(what).into()
    }
    /// 422.
    pub fn invalid(detail: impl Into<String>) -> Self {
        ServiceError::invalid(detail).into()
    }
    /// 409.
    pub fn conflict(detail: impl Into<String>) -> Self {
        ServiceError::conflict(detail).into()
    }
    /// 500: the cause is logged with the request id; the client gets a generic message
    /// (and the request id, to quote).
    pub fn internal(e: impl std::fmt::Display) -> Self {
        ServiceError::internal(e).into()
    }
    /// The 500 of a handler that panicked: logged with the request id, answered like
    /// [`internal`](Self::internal).
    pub(crate) fn panicked(panic: &(dyn std::any::Any + Send)) -> Self {
        let request_id = current_request_id();
        tracing::error!(
            request_id = request_id.as_deref().unwrap_or("-"),
            panic = panic_message(panic),
            "a request handler panicked"
        );
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, INTERNAL)
    }
}

/// The body of every error answer.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub struct ErrorBody {
    /// What went wrong, for a person (for a 422: the field and why; for a 500 only
    /// "internal error").
    pub detail: String,
    /// For a 5xx: the `x-request-id` the cause is logged under.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let request_id = if self.status.is_server_error() {
            current_request_id()
        } else {
            None
        };
        let body = ErrorBody {
            detail: self.detail,
            request_id,
        };
        (self.status, axum::Json(body)).into_response()
    }
}

impl From<ServiceError> for ApiError {
    fn from(e: ServiceError) -> Self {
        let status = match e.kind {
            ErrorKind::Unauthenticated => StatusCode::UNAUTHORIZED,
            ErrorKind::Forbidden => StatusCode::FORBIDDEN,
            ErrorKind::NotFound => StatusCode::NOT_FOUND,
            ErrorKind::Conflict => StatusCode::CONFLICT,
            ErrorKind::Invalid => StatusCode::UNPROCESSABLE_ENTITY,
            ErrorKind::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            ErrorKind::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        };
        Self::new(status, e.detail)
    }
}

impl From<DbError> for ApiError {
    fn from(e: DbError) -> Self {
        ServiceError::from(e).into()
    }
}

impl From<graphloom_core::Error> for ApiError {
    fn from(e: graphloom_core::Error) -> Self {
        ServiceError::from(e).into()
    }
}

impl From<AuthError> for ApiError {
    fn from(e: AuthError) -> Self {
        ServiceError::from(e).into()
    }
}

impl From<ApiError> for graphloom_server_wire::protocol::ProtocolError {
    fn from(e: ApiError) -> Self {
        Self::from_status(e.status.as_u16(), e.detail)
    }
}

/// Result of handlers.
pub type ApiResult<T> = Result<T, ApiError>;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::with_request_id;
    use graphloom_core::BackendError;
    use graphloom_core::BackendErrorKind;
    use serde_json::json;

    async fn body_of(e: ApiError) -> (StatusCode, serde_json::Value) {
        let res = e.into_response();
        let status = res.status();
        let bytes = axum::body::to_bytes(res.into_body(), 1 << 16).await.unwrap();
        (status, serde_json::from_slice(&bytes).unwrap())
    }

    #[tokio::test]
    async fn an_internal_error_tells_the_client_nothing_but_the_request_id() {
        let (status, body) = with_request_id("req-1".into(), async {
            body_of(ApiError::internal("database: disk I/O error at /secret/path")).await
        })
        .await;
        assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(body, json!({"detail": "internal error", "request_id": "req-1"}));
        let (_, body) = body_of(ApiError::from(DbError::Backend("secret".into()))).await;
        assert_eq!(body, json!({"detail": "internal error"}));
    }

    #[tokio::test]
    async fn backend_errors_of_the_request_are_4xx() {
        let invalid = graphloom_core::Error::Backend(BackendError::new(
            BackendErrorKind::InvalidInput,
            "filter on `n` uses unknown operator `$bogus`",
        ));
        let (status, body) = body_of(invalid.into()).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(body["detail"], "filter on `n` uses unknown operator `$bogus`");
        // The database out of reach: the client may retry, so a 503 rather than a 500.
        let gone = graphloom_core::Error::Backend(BackendError::new(BackendErrorKind::Connection, "gone"));
        assert_eq!(ApiError::from(gone).status, StatusCode::SERVICE_UNAVAILABLE);
        let (status, body) = body_of(ApiError::from(DbError::Unavailable("host db-1 refused".into()))).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(!body["detail"].as_str().unwrap().contains("db-1"), "{body}");
        let other = graphloom_core::Error::Backend(BackendError::new(BackendErrorKind::Other, "disk"));
        assert_eq!(ApiError::from(other).status, StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(
            ApiError::from(DbError::Invalid("bad".into())).status,
            StatusCode::UNPROCESSABLE_ENTITY
        );
    }
}
