//! `graphloom serve`'s bearer-JWT options.

use anyhow::{bail, Context};
use graphloom_server::auth::Jwt;
use std::path::PathBuf;

/// Authentication by bearer JWT instead of API keys.
#[derive(clap::Args, Debug, Default)]
pub(crate) struct JwtArgs {
    /// Accept bearer JWTs signed with HS256 and this shared secret (the token's `sub` is the
    /// owner). Excludes --api-key and --jwt-jwks.
    #[arg(long, value_name = "SECRET")]
    jwt_secret: Option<String>,
    /// Accept bearer JWTs signed with RS256 by a key of this JSON Web Key Set file.
    #[arg(long, value_name = "FILE")]
    jwt_jwks: Option<PathBuf>,
    /// Only tokens from this issuer (`iss`).
    #[arg(long, value_name = "ISS")]
    jwt_issuer: Option<String>,
    /// Only tokens for this audience (`aud`).
    #[arg(long, value_name = "AUD")]
    jwt_audience: Option<String>,
}

impl JwtArgs {
    /// The JWT auth the options ask for, if any.
    pub(crate) fn build(self, with_api_keys: bool) -> anyhow::Result<Option<Jwt>> {
        let jwt = match (self.jwt_secret, self.jwt_jwks) {
            (None, None) => {
                if self.jwt_issuer.is_some() || self.jwt_audience.is_some() {
                    bail!("--jwt-issuer and --jwt-audience need --jwt-secret or --jwt-jwks");
                }
                return Ok(None);
            }
            (Some(_), Some(_)) => bail!("choose one of --jwt-secret and --jwt-jwks"),
            (Some(secret), None) => {
                if secret.len() < 32 {
                    bail!("--jwt-secret must be at least 32 bytes long");
                }
                Jwt::hs256(secret)
            }
            (None, Some(file)) => {
                Jwt::rs256_jwks_file(&file).with_context(|| format!("--jwt-jwks {}", file.display()))?
            }
        };
        if with_api_keys {
            bail!("choose one of --api-key and a JWT (--jwt-secret, --jwt-jwks)");
        }
        let jwt = match self.jwt_issuer {
            Some(iss) => jwt.issuer(iss),
            None => jwt,
        };
        Ok(Some(match self.jwt_audience {
            Some(aud) => jwt.audience(aud),
            None => jwt,
        }))
    }
}
