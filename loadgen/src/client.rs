//! How the generator speaks to the ingress: as each of its users, and as the
//! admin.

use reqwest::RequestBuilder;
use seckill_auth::{unix_now, Claims, JwtKey};
use seckill_core::UserId;

/// How long the user tokens the generator signs are valid.
const TOKEN_TTL_SECONDS: i64 = 3600;

/// How a request says which user sends it.
#[derive(Clone, Debug)]
pub enum Credentials {
    /// A token signed with the ingress's HS256 secret, as the platform's
    /// login service would issue it: what real clients send.
    Tokens(JwtKey),
    /// `X-User-Id`, which only a development ingress trusts.
    DevHeader,
}

impl Credentials {
    /// `request`, sent as `user`.
    pub(crate) fn as_user(&self, request: RequestBuilder, user: &UserId) -> RequestBuilder {
        match self {
            Self::Tokens(key) => request.bearer_auth(key.issue(&Claims::for_user(user, unix_now(), TOKEN_TTL_SECONDS))),
            Self::DevHeader => request.header("x-user-id", user.as_str()),
        }
    }
}
