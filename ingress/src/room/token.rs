//! Entry tokens: what a waiting room hands a user whose turn came, and what
//! `POST …/orders` on a queue-mode voucher requires.
//!
//! `e1.<entry>.<expires_ms>.<signature>`: the entry's number (its id in the
//! room), when it stops admitting (the admission clock), and an HMAC-SHA256
//! over `<voucher id>|<user id>|<entry>|<expires_ms>` under the room's own
//! key, base64url without padding. The signature binds the token to its
//! user and voucher and lets any ingress refuse a forged or altered one
//! without asking Redis; whether it is still unused (and really unexpired)
//! is decided by `admit.lua`, which spends it with the order it admits.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use seckill_core::{UserId, VoucherId};
use sha2::Sha256;

/// Longest token accepted (a signature is 43 characters).
pub(crate) const MAX_TOKEN_LEN: usize = 128;
const VERSION: &str = "e1";

/// A token's claims, once its signature checked out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Entry {
    pub(crate) entry: u64,
    pub(crate) expires_ms: i64,
}

/// Why a token is refused before Redis is asked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TokenError {
    Malformed,
    BadSignature,
}

fn signature(key: &str, voucher: VoucherId, user: &UserId, entry: u64, expires_ms: i64) -> Hmac<Sha256> {
    let mut mac = Hmac::<Sha256>::new_from_slice(key.as_bytes()).expect("HMAC takes keys of any length");
    mac.update(format!("{voucher}|{user}|{entry}|{expires_ms}").as_bytes());
    mac
}

/// The token for `entry` of `user` on `voucher`.
pub(crate) fn sign(key: &str, voucher: VoucherId, user: &UserId, entry: u64, expires_ms: i64) -> String {
    let tag = signature(key, voucher, user, entry, expires_ms).finalize().into_bytes();
    format!("{VERSION}.{entry}.{expires_ms}.{}", URL_SAFE_NO_PAD.encode(tag))
}

/// The entry `token` claims, if it was signed under `key` for `user` and
/// `voucher` (expiry and use are `admit.lua`'s to judge).
pub(crate) fn verify(key: &str, voucher: VoucherId, user: &UserId, token: &str) -> Result<Entry, TokenError> {
    if token.len() > MAX_TOKEN_LEN {
        return Err(TokenError::Malformed);
    }
    let mut parts = token.split('.');
    let (Some(VERSION), Some(entry), Some(expires), Some(tag), None) =
        (parts.next(), parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(TokenError::Malformed);
    };
    let entry: u64 = entry.parse().map_err(|_| TokenError::Malformed)?;
    let expires_ms: i64 = expires.parse().map_err(|_| TokenError::Malformed)?;
    let tag = URL_SAFE_NO_PAD.decode(tag).map_err(|_| TokenError::Malformed)?;
    // Constant-time comparison.
    signature(key, voucher, user, entry, expires_ms).verify_slice(&tag).map_err(|_| TokenError::BadSignature)?;
    Ok(Entry { entry, expires_ms })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_bound_to_its_key_user_and_voucher() {
        let voucher = VoucherId::generate();
        let alice = UserId::parse("alice").expect("valid");
        let token = sign("k1", voucher, &alice, 7, 1_800_000_000_000);
        assert_eq!(verify("k1", voucher, &alice, &token), Ok(Entry { entry: 7, expires_ms: 1_800_000_000_000 }));
        let bob = UserId::parse("bob").expect("valid");
        assert_eq!(verify("k1", voucher, &bob, &token), Err(TokenError::BadSignature));
        assert_eq!(verify("k2", voucher, &alice, &token), Err(TokenError::BadSignature));
        assert_eq!(verify("k1", VoucherId::generate(), &alice, &token), Err(TokenError::BadSignature));
        let altered = token.replacen(".7.", ".8.", 1);
        assert_eq!(verify("k1", voucher, &alice, &altered), Err(TokenError::BadSignature));
        for bad in ["", "e1", "e1.7.1.", "e2.7.1.AAAA", "e1.x.1.AAAA", "e1.7.1.!!", &"a".repeat(200)] {
            assert!(verify("k1", voucher, &alice, bad).is_err(), "{bad:?}");
        }
    }
}
