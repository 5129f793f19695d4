//! Who is calling.
//!
//! Users present `Authorization: Bearer <JWT>`: a token signed with HS256 by
//! whoever runs the platform's login, carrying the user id in `sub` and an
//! expiry in `exp`. [`JwtKey::verify`] accepts HS256 only, checks the
//! signature before it reads a single claim, and refuses expired tokens, so
//! the user id an ingress acts for always comes from a token it can trust.
//! Operators present the admin token ([`AdminToken`]). [`JwtKey::issue`]
//! makes tokens for the command line (`seckill token`), the load generator
//! and the tests.

mod admin;
mod bearer;
mod jwt;

pub use admin::AdminToken;
pub use bearer::bearer_token;
pub use jwt::{unix_now, Claims, JwtKey, JwtRules, TokenError, MAX_TOKEN_BYTES, MIN_SECRET_BYTES};
