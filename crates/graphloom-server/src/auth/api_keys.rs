//! [`ApiKeys`]: static keys, each standing for one owner.

use super::{Auth, AuthError, Identity};
use axum::http::request::Parts;
use axum::http::HeaderMap;
use std::collections::HashMap;

/// Authentication by API key, sent as `x-api-key` or `Authorization: Bearer <key>`: each
/// key stands for one owner (its [`Identity::identity`]). What
/// [`ServerConfig::api_keys`](crate::ServerConfig) configures. Authorises everything (an
/// owner still sees only its own resources).
#[derive(Clone, Debug, Default)]
pub struct ApiKeys {
    keys: HashMap<String, Identity>,
}

impl ApiKeys {
    /// No keys yet (every request is refused until one is added).
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Accept `key` for `owner`.
    #[must_use]
    pub fn key(mut self, key: impl Into<String>, owner: impl Into<String>) -> Self {
        self.keys.insert(key.into(), Identity::new(owner));
        self
    }

    /// Accept `key` as `identity` (with its permissions and extra fields).
    #[must_use]
    pub fn key_for(mut self, key: impl Into<String>, identity: Identity) -> Self {
        self.keys.insert(key.into(), identity);
        self
    }

    /// Keys and their owners.
    #[must_use]
    pub fn from_map(keys: HashMap<String, String>) -> Self {
        keys.into_iter().fold(Self::new(), |a, (k, o)| a.key(k, o))
    }
}

/// The credential of a request: `x-api-key`, else the token of `Authorization: Bearer`.
pub(crate) fn presented(headers: &HeaderMap) -> Option<&str> {
    headers
        .get("x-api-key")
        .and_then(|v| v.to_str().ok())
        .or_else(|| {
            headers
                .get("authorization")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")))
        })
        .map(str::trim)
}

impl Auth for ApiKeys {
    async fn authenticate(&self, req: &Parts) -> Result<Identity, AuthError> {
        presented(&req.headers)
            .and_then(|k| self.keys.get(k))
            .cloned()
            .ok_or_else(|| AuthError::unauthenticated("missing or unknown API key"))
    }

    fn authorizes(&self) -> bool {
        false
    }
}
