//! `[auth]`: how callers prove who they are.

use seckill_auth::MIN_SECRET_BYTES;
use seckill_core::config::{ensure, ConfigError, Secret};
use serde::{Deserialize, Serialize};

/// Longest clock skew between the token issuer and the ingress tolerated.
const MAX_LEEWAY_SECONDS: u64 = 300;
/// Shortest admin token accepted.
const MIN_ADMIN_TOKEN_CHARS: usize = 16;

/// Users present an HS256 JWT, operators the admin token.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AuthConfig {
    /// The HS256 secret user tokens are signed with (at least 32 bytes),
    /// shared with the login service that issues them. Required unless
    /// `insecure_dev_user_header` is on.
    pub jwt_secret: Option<Secret>,
    /// When set, a token's `iss` must be exactly this.
    pub jwt_issuer: Option<String>,
    /// When set, a token's `aud` must be or contain this.
    pub jwt_audience: Option<String>,
    /// Clock difference tolerated on `exp` and `nbf`, in seconds.
    pub jwt_leeway_seconds: u64,
    /// Bearer token of the admin routes (creating and changing vouchers,
    /// cancelling or reading any order). Required.
    pub admin_token: Option<Secret>,
    /// DEVELOPMENT ONLY: take the user id from the `X-User-Id` header,
    /// unauthenticated, so anyone can act as anyone. The local run turns it
    /// on; the default and the compose stack keep it off. Refused unless
    /// `http.listen` is a loopback address.
    pub insecure_dev_user_header: bool,
}

impl Default for AuthConfig {
    fn default() -> Self {
        Self {
            jwt_secret: None,
            jwt_issuer: None,
            jwt_audience: None,
            jwt_leeway_seconds: 30,
            admin_token: None,
            insecure_dev_user_header: false,
        }
    }
}

impl AuthConfig {
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        match &self.admin_token {
            None => {
                ensure(false, "auth.admin_token", "must be set: the admin routes need it (SECKILL_AUTH__ADMIN_TOKEN)")
            }
            Some(token) => ensure(
                token.expose().chars().count() >= MIN_ADMIN_TOKEN_CHARS && !token.expose().contains('.'),
                "auth.admin_token",
                format!(
                    "must be at least {MIN_ADMIN_TOKEN_CHARS} characters, without '.' (which only user tokens have)"
                ),
            ),
        }?;
        match &self.jwt_secret {
            None => ensure(
                self.insecure_dev_user_header,
                "auth.jwt_secret",
                "must be set so users can be authenticated (SECKILL_AUTH__JWT_SECRET); \
                 only a development setup may do without (auth.insecure_dev_user_header)",
            ),
            Some(secret) => ensure(
                secret.expose().len() >= MIN_SECRET_BYTES,
                "auth.jwt_secret",
                format!("must be at least {MIN_SECRET_BYTES} bytes (HS256 needs a 256-bit key)"),
            ),
        }?;
        for (value, key) in [(&self.jwt_issuer, "auth.jwt_issuer"), (&self.jwt_audience, "auth.jwt_audience")] {
            if let Some(value) = value {
                ensure(!value.is_empty(), key, "must not be empty when set")?;
            }
        }
        ensure(
            self.jwt_leeway_seconds <= MAX_LEEWAY_SECONDS,
            "auth.jwt_leeway_seconds",
            format!("must be at most {MAX_LEEWAY_SECONDS}"),
        )
    }
}
