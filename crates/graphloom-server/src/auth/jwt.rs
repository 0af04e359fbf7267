//! [`Jwt`]: bearer JSON Web Tokens, signed with a shared secret (HS256) or by keys of a
//! JWKS file (RS256).

use super::{Auth, AuthError, Identity};
use axum::http::request::Parts;
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::{Map, Value};
use std::path::Path;

/// Authentication by a JWT sent as `Authorization: Bearer <token>`. The token must be
/// signed with the configured algorithm and key (a token naming another algorithm, `none`
/// included, is refused), unexpired (`exp` is required; 60 s of leeway by default), and
/// from the configured issuer and audience when they are set. Its `sub` claim (or
/// [`identity_claim`](Self::identity_claim)) becomes [`Identity::identity`], `name` the
/// display name, `permissions` (a list) or `scope` / `scp` (space-separated) the
/// permissions, and every claim lands in [`Identity::extra`]. Any failure is a 401 saying
/// why (expired, bad signature, algorithm not allowed, ...).
///
/// ```
/// use graphloom_server::auth::Jwt;
/// let auth = Jwt::hs256("a secret of at least 32 bytes, please!").issuer("https://id.example");
/// ```
#[derive(Clone)]
pub struct Jwt {
    keys: Keys,
    validation: Validation,
    identity_claim: String,
}

#[derive(Clone)]
enum Keys {
    /// HS256's shared secret.
    Secret(DecodingKey),
    /// RS256 public keys, by `kid` (`None`: the key has none).
    Set(Vec<(Option<String>, DecodingKey)>),
}

impl std::fmt::Debug for Jwt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let keys = match &self.keys {
            Keys::Secret(_) => "HS256 secret".to_owned(),
            Keys::Set(k) => format!("{} RS256 keys", k.len()),
        };
        f.debug_struct("Jwt")
            .field("keys", &keys)
            .field("identity_claim", &self.identity_claim)
            .finish_non_exhaustive()
    }
}

/// Why a [`Jwt`] cannot be set up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum JwtError {
    /// The JWKS file cannot be read.
    #[error("cannot read the JWKS file {path}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The JWKS is not a JSON Web Key Set.
    #[error("the JWKS is not a JSON Web Key Set")]
    Parse(#[source] serde_json::Error),
    /// A key of the set is not a usable RS256 public key.
    #[error("key {kid:?} of the JWKS is not an RSA public key")]
    Key {
        /// The key's `kid`.
        kid: Option<String>,
        /// Why.
        #[source]
        source: jsonwebtoken::errors::Error,
    },
    /// The set has no RSA key.
    #[error("the JWKS has no RSA key")]
    NoKeys,
}

/// Use the pure-Rust crypto provider whatever features another crate turns on.
fn crypto() {
    let _ = jsonwebtoken::crypto::rust_crypto::DEFAULT_PROVIDER.install_default();
}

impl Jwt {
    fn with(keys: Keys, alg: Algorithm) -> Self {
        crypto();
        let mut validation = Validation::new(alg);
        // An `aud` is checked only when an audience is configured.
        validation.validate_aud = false;
        validation.validate_nbf = true;
        Self {
            keys,
            validation,
            identity_claim: "sub".to_owned(),
        }
    }

    /// Tokens signed with HS256 and this shared secret.
    #[must_use]
    pub fn hs256(secret: impl AsRef<[u8]>) -> Self {
        Self::with(
            Keys::Secret(DecodingKey::from_secret(secret.as_ref())),
            Algorithm::HS256,
        )
    }

    /// Tokens signed with RS256 by one of the RSA keys of this JSON Web Key Set (chosen
    /// by the token's `kid`; a token without one needs a set of one key).
    ///
    /// # Errors
    /// When the text is not a key set, or has no usable RSA key.
    pub fn rs256_jwks(jwks: &str) -> Result<Self, JwtError> {
        crypto();
        let set: JwkSet = serde_json::from_str(jwks).map_err(JwtError::Parse)?;
        let mut keys = Vec::new();
        for jwk in &set.keys {
            if !matches!(jwk.algorithm, jsonwebtoken::jwk::AlgorithmParameters::RSA(_)) {
                continue;
            }
            let kid = jwk.common.key_id.clone();
            let key = DecodingKey::from_jwk(jwk).map_err(|source| JwtError::Key {
                kid: kid.clone(),
                source,
            })?;
            keys.push((kid, key));
        }
        if keys.is_empty() {
            return Err(JwtError::NoKeys);
        }
        Ok(Self::with(Keys::Set(keys), Algorithm::RS256))
    }

    /// [`rs256_jwks`](Self::rs256_jwks) with the set read from a file.
    ///
    /// # Errors
    /// When the file cannot be read or holds no usable key set.
    pub fn rs256_jwks_file(path: impl AsRef<Path>) -> Result<Self, JwtError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| JwtError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Self::rs256_jwks(&text)
    }

    /// Only tokens whose `iss` is `issuer` (and `iss` becomes required).
    #[must_use]
    pub fn issuer(mut self, issuer: impl Into<String>) -> Self {
        self.validation.set_issuer(&[issuer.into()]);
        self.validation.required_spec_claims.insert("iss".to_owned());
        self
    }

    /// Only tokens whose `aud` holds `audience` (and `aud` becomes required).
    #[must_use]
    pub fn audience(mut self, audience: impl Into<String>) -> Self {
        self.validation.set_audience(&[audience.into()]);
        self.validation.validate_aud = true;
        self.validation.required_spec_claims.insert("aud".to_owned());
        self
    }

    /// The claim naming the identity (default `sub`).
    #[must_use]
    pub fn identity_claim(mut self, claim: impl Into<String>) -> Self {
        self.identity_claim = claim.into();
        self
    }

    /// Clock skew allowed on `exp` and `nbf`, in seconds (default 60).
    #[must_use]
    pub fn leeway(mut self, seconds: u64) -> Self {
        self.validation.leeway = seconds;
        self
    }

    /// The key to check a token with `kid` against.
    fn key(&self, kid: Option<&str>) -> Result<&DecodingKey, AuthError> {
        match &self.keys {
            Keys::Secret(k) => Ok(k),
            Keys::Set(keys) => {
                let found = match kid {
                    Some(kid) => keys.iter().find(|(k, _)| k.as_deref() == Some(kid)),
                    None if keys.len() == 1 => keys.first(),
                    None => None,
                };
                found
                    .map(|(_, k)| k)
                    .ok_or_else(|| AuthError::unauthenticated("invalid token: no key for its kid"))
            }
        }
    }

    /// The identity a token stands for.
    fn verify(&self, token: &str) -> Result<Identity, AuthError> {
        let header = jsonwebtoken::decode_header(token).map_err(|e| refused(&e))?;
        if !self.validation.algorithms.contains(&header.alg) {
            return Err(AuthError::unauthenticated(format!(
                "invalid token: algorithm {:?} is not allowed",
                header.alg
            )));
        }
        let key = self.key(header.kid.as_deref())?;
        let data = jsonwebtoken::decode::<Map<String, Value>>(token, key, &self.validation)
            .map_err(|e| refused(&e))?;
        identity_of(data.claims, &self.identity_claim)
    }
}

/// The 401 of a token that does not hold.
fn refused(e: &jsonwebtoken::errors::Error) -> AuthError {
    let why = match e.kind() {
        ErrorKind::ExpiredSignature => "the token has expired",
        ErrorKind::ImmatureSignature => "the token is not valid yet",
        ErrorKind::InvalidSignature => "invalid token signature",
        ErrorKind::InvalidAlgorithm | ErrorKind::InvalidAlgorithmName => {
            "invalid token: algorithm not allowed"
        }
        ErrorKind::InvalidIssuer => "invalid token issuer",
        ErrorKind::InvalidAudience => "invalid token audience",
        ErrorKind::MissingRequiredClaim(_) => "invalid token: a required claim is missing",
        _ => "invalid token",
    };
    AuthError::unauthenticated(why)
}

/// An identity from verified claims.
fn identity_of(claims: Map<String, Value>, identity_claim: &str) -> Result<Identity, AuthError> {
    let Some(id) = claims
        .get(identity_claim)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
    else {
        return Err(AuthError::unauthenticated(format!(
            "invalid token: no `{identity_claim}` claim"
        )));
    };
    let mut identity = Identity::new(id);
    identity.display_name = claims.get("name").and_then(Value::as_str).map(str::to_owned);
    identity.permissions = match (
        claims.get("permissions"),
        claims.get("scope").or_else(|| claims.get("scp")),
    ) {
        (Some(Value::Array(p)), _) | (None, Some(Value::Array(p))) => {
            p.iter().filter_map(Value::as_str).map(str::to_owned).collect()
        }
        (_, Some(Value::String(s))) => s.split_whitespace().map(str::to_owned).collect(),
        _ => Vec::new(),
    };
    identity.extra = claims;
    Ok(identity)
}

impl Auth for Jwt {
    async fn authenticate(&self, req: &Parts) -> Result<Identity, AuthError> {
        let token = req
            .headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")))
            .map(str::trim)
            .ok_or_else(|| AuthError::unauthenticated("missing bearer token"))?;
        self.verify(token)
    }

    fn authorizes(&self) -> bool {
        false
    }
}
