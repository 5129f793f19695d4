//! The credentials every test platform is configured with: fixed,
//! published values, so tests can sign user tokens and call admin routes.
//! They protect nothing real.

use seckill_auth::{unix_now, Claims, JwtKey};
use seckill_core::config::Secret;
use seckill_core::UserId;

/// The admin token of test ingresses.
pub const TEST_ADMIN_TOKEN: &str = "test admin token: not a secret";
/// The HS256 secret test ingresses verify user tokens with.
pub const TEST_JWT_SECRET: &str = "test jwt secret, 32 bytes or more: not a secret";

/// A token for `user`, valid for an hour, signed with [`TEST_JWT_SECRET`].
///
/// # Panics
///
/// If `user` is not a valid user id: tests name their users.
pub fn user_token(user: &str) -> String {
    let user = UserId::parse(user).expect("test user ids are valid");
    JwtKey::new(&Secret::new(TEST_JWT_SECRET)).issue(&Claims::for_user(&user, unix_now(), 3600))
}
