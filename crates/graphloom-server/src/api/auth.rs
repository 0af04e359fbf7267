//! Who a request acts for: [`Owner`], from its API key.

use crate::error::ApiError;
use crate::state::AppRef;
use axum::extract::{FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::collections::HashMap;

/// The principal a request acts for (`""` with auth off): the owner of the API key sent
/// as `x-api-key` or `Authorization: Bearer`. An extractor; a request whose key is missing
/// or unknown (with keys configured) is refused with 401.
#[derive(Clone, Debug)]
pub(crate) struct Owner(pub String);

impl Owner {
    /// The owner of the key in `headers`, given the configured `keys` (none: auth off).
    fn authenticate(keys: &HashMap<String, String>, headers: &HeaderMap) -> Result<Self, ApiError> {
        if keys.is_empty() {
            return Ok(Self(String::new()));
        }
        let presented = headers
            .get("x-api-key")
            .and_then(|v| v.to_str().ok())
            .or_else(|| {
                headers
                    .get("authorization")
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.strip_prefix("Bearer "))
            })
            .map(str::trim);
        match presented.and_then(|k| keys.get(k)) {
            Some(owner) => Ok(Self(owner.clone())),
            None => Err(ApiError::new(
                StatusCode::UNAUTHORIZED,
                "missing or unknown API key",
            )),
        }
    }
}

impl FromRequestParts<AppRef> for Owner {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppRef) -> Result<Self, ApiError> {
        // Behind [`require_key`] the owner is known already.
        if let Some(owner) = parts.extensions.get::<Owner>() {
            return Ok(owner.clone());
        }
        Self::authenticate(&state.config.api_keys, &parts.headers)
    }
}

/// The gate of the routes behind the API key: 401 when keys are configured and none
/// matches (before the body is read), else the request goes on with its [`Owner`].
pub(crate) async fn require_key(State(state): State<AppRef>, mut req: Request, next: Next) -> Response {
    match Owner::authenticate(&state.config.api_keys, req.headers()) {
        Ok(owner) => {
            req.extensions_mut().insert(owner);
            next.run(req).await
        }
        Err(e) => e.into_response(),
    }
}
