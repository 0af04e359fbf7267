//! Who a request acts for: [`Owner`], the identity [`crate::auth`] authenticated.

use crate::api::error::ApiError;
use crate::auth::Identity;
use crate::state::AppRef;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;

/// The principal a request acts for (`""` with auth off): the [`Identity::identity`] the
/// server's [`Auth`](crate::auth::Auth) found. An extractor; a request that does not
/// authenticate is refused with 401.
#[derive(Clone, Debug)]
pub(crate) struct Owner(pub String);

impl FromRequestParts<AppRef> for Owner {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppRef) -> Result<Self, ApiError> {
        // Behind the auth gate the identity is known already.
        if let Some(identity) = parts.extensions.get::<Identity>() {
            return Ok(Self(identity.identity.clone()));
        }
        let identity = state.auth.authenticate(parts).await?;
        Ok(Self(identity.identity))
    }
}
