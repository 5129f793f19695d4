//! A cost for bots: a proof of work on each order, queue join or draw entry
//! of a voucher whose `challenge_bits` is above 0.
//!
//! The server hands out a challenge (`GET /api/v1/vouchers/{id}/challenge`)
//! and keeps nothing of it: `c1.<voucher>.<expires_ms>.<bits>.<nonce>.<mac>`,
//! where `mac` is an HMAC-SHA256 over
//! `c1|<voucher>|<user>|<expires_ms>|<bits>|<nonce>` under a key every
//! ingress shares (base64url, no padding). The client finds a solution: a
//! decimal number of at most [`MAX_SOLUTION_LEN`] digits such that
//! SHA-256(`<challenge>:<solution>`) begins with `bits` zero bits, which
//! takes 2^bits hashes on average and one to check. The signature binds
//! the challenge to its user and voucher, so a solution cannot be shared or
//! farmed for others; that each is spent once is kept by the admission
//! scripts in Redis, atomically with what it pays for (the nonce is the
//! challenge's id there).

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

use crate::ids::{UserId, VoucherId};

/// Most leading zero bits a voucher may ask for (about 2^28 hashes: a
/// minute of a phone's time, past which nobody waits).
pub const MAX_BITS: u32 = 28;
/// Longest challenge accepted (a real one is about 120 characters).
pub const MAX_CHALLENGE_LEN: usize = 200;
/// Longest solution accepted.
pub const MAX_SOLUTION_LEN: usize = 20;
const VERSION: &str = "c1";

/// A challenge's claims, once its signature checked out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Challenge {
    pub voucher: VoucherId,
    /// Until when a solution is taken (Unix ms, the server's clock).
    pub expires_ms: i64,
    /// Leading zero bits a solution's hash needs.
    pub bits: u32,
    /// The challenge's id: 32 hexadecimal digits.
    pub nonce: String,
}

/// Why a challenge or its solution is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ChallengeError {
    #[error("the challenge is not one this server issued")]
    Malformed,
    #[error("the challenge was issued to another user or for another voucher")]
    BadSignature,
    #[error("the challenge expired")]
    Expired,
    #[error("the solution is not a decimal number of 1 to 20 digits")]
    MalformedSolution,
    #[error("the solution's hash does not begin with enough zero bits")]
    WrongSolution,
}

fn signature(key: &[u8], voucher: VoucherId, user: &UserId, expires_ms: i64, bits: u32, nonce: &str) -> Hmac<Sha256> {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes keys of any length");
    mac.update(format!("{VERSION}|{voucher}|{user}|{expires_ms}|{bits}|{nonce}").as_bytes());
    mac
}

/// A new challenge for `user` on `voucher`.
pub fn issue(key: &[u8], voucher: VoucherId, user: &UserId, expires_ms: i64, bits: u32) -> String {
    let nonce = uuid::Uuid::new_v4().simple().to_string();
    let tag = signature(key, voucher, user, expires_ms, bits, &nonce).finalize().into_bytes();
    format!("{VERSION}.{voucher}.{expires_ms}.{bits}.{nonce}.{}", URL_SAFE_NO_PAD.encode(tag))
}

/// The claims of `challenge` if this key signed it for `user` and
/// `voucher` and it has not expired at `now_ms`.
pub fn verify(
    key: &[u8],
    voucher: VoucherId,
    user: &UserId,
    challenge: &str,
    now_ms: i64,
) -> Result<Challenge, ChallengeError> {
    let claims = verify_signed(key, voucher, user, challenge)?;
    if now_ms >= claims.expires_ms {
        return Err(ChallengeError::Expired);
    }
    Ok(claims)
}

/// The claims of `challenge` if this key signed it for `user` and
/// `voucher`, expired or not: the platform leaves the expiry to the
/// admission scripts, which judge it by the Redis clock, so one clock
/// decides whichever ingress a request reaches.
pub fn verify_signed(
    key: &[u8],
    voucher: VoucherId,
    user: &UserId,
    challenge: &str,
) -> Result<Challenge, ChallengeError> {
    if challenge.len() > MAX_CHALLENGE_LEN {
        return Err(ChallengeError::Malformed);
    }
    let mut parts = challenge.split('.');
    let (Some(VERSION), Some(named), Some(expires), Some(bits), Some(nonce), Some(tag), None) =
        (parts.next(), parts.next(), parts.next(), parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(ChallengeError::Malformed);
    };
    let named: VoucherId = named.parse().map_err(|_| ChallengeError::Malformed)?;
    let expires_ms: i64 = expires.parse().map_err(|_| ChallengeError::Malformed)?;
    let bits: u32 = bits.parse().map_err(|_| ChallengeError::Malformed)?;
    if bits > MAX_BITS || nonce.len() != 32 || !nonce.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(ChallengeError::Malformed);
    }
    let tag = URL_SAFE_NO_PAD.decode(tag).map_err(|_| ChallengeError::Malformed)?;
    if named != voucher {
        return Err(ChallengeError::BadSignature);
    }
    // Constant-time comparison.
    signature(key, voucher, user, expires_ms, bits, nonce)
        .verify_slice(&tag)
        .map_err(|_| ChallengeError::BadSignature)?;
    Ok(Challenge { voucher, expires_ms, bits, nonce: nonce.to_owned() })
}

/// Leading zero bits of SHA-256(`<challenge>:<solution>`).
pub fn work(challenge: &str, solution: &str) -> u32 {
    let digest = Sha256::new().chain_update(challenge.as_bytes()).chain_update(b":").chain_update(solution).finalize();
    leading_zero_bits(&digest)
}

/// Whether `solution` solves `challenge` at `bits`.
pub fn check_solution(challenge: &str, solution: &str, bits: u32) -> Result<(), ChallengeError> {
    if solution.is_empty() || solution.len() > MAX_SOLUTION_LEN || !solution.bytes().all(|b| b.is_ascii_digit()) {
        return Err(ChallengeError::MalformedSolution);
    }
    if work(challenge, solution) < bits {
        return Err(ChallengeError::WrongSolution);
    }
    Ok(())
}

/// Finds a solution by counting up from 0 (what a client does; 2^bits
/// hashes on average).
pub fn solve(challenge: &str, bits: u32) -> String {
    // The prefix is hashed once; each attempt adds only its digits.
    let mut prefix = Sha256::new();
    prefix.update(challenge.as_bytes());
    prefix.update(b":");
    let mut buffer = itoa_buffer();
    for attempt in 0u64.. {
        let digits = format_decimal(attempt, &mut buffer);
        let digest = prefix.clone().chain_update(digits).finalize();
        if leading_zero_bits(&digest) >= bits {
            return String::from_utf8_lossy(digits).into_owned();
        }
    }
    unreachable!("a 64-bit counter outlasts any difficulty up to MAX_BITS")
}

fn itoa_buffer() -> [u8; 20] {
    [0; 20]
}

fn format_decimal(mut value: u64, buffer: &mut [u8; 20]) -> &[u8] {
    let mut at = buffer.len();
    loop {
        at -= 1;
        buffer[at] = b'0' + (value % 10) as u8;
        value /= 10;
        if value == 0 {
            return &buffer[at..];
        }
    }
}

fn leading_zero_bits(digest: &[u8]) -> u32 {
    let mut bits = 0;
    for byte in digest {
        if *byte == 0 {
            bits += 8;
        } else {
            return bits + byte.leading_zeros();
        }
    }
    bits
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_800_000_000_000;

    #[test]
    fn a_challenge_is_bound_to_key_user_voucher_and_time() {
        let voucher = VoucherId::generate();
        let alice = UserId::parse("alice").expect("valid");
        let challenge = issue(b"k", voucher, &alice, NOW + 60_000, 8);
        let claims = verify(b"k", voucher, &alice, &challenge, NOW).expect("valid");
        assert_eq!((claims.bits, claims.expires_ms, claims.nonce.len()), (8, NOW + 60_000, 32));
        let bob = UserId::parse("bob").expect("valid");
        assert_eq!(verify(b"k", voucher, &bob, &challenge, NOW), Err(ChallengeError::BadSignature));
        assert_eq!(verify(b"other", voucher, &alice, &challenge, NOW), Err(ChallengeError::BadSignature));
        assert_eq!(verify(b"k", VoucherId::generate(), &alice, &challenge, NOW), Err(ChallengeError::BadSignature));
        assert_eq!(verify(b"k", voucher, &alice, &challenge, NOW + 60_000), Err(ChallengeError::Expired));
        let easier = challenge.replacen(".8.", ".1.", 1);
        assert_eq!(verify(b"k", voucher, &alice, &easier, NOW), Err(ChallengeError::BadSignature));
        for bad in ["", "c1", "c1.x.1.8.n.t", &"c".repeat(300), &challenge.replacen("c1.", "c2.", 1)] {
            assert_eq!(verify(b"k", voucher, &alice, bad, NOW), Err(ChallengeError::Malformed), "{bad:?}");
        }
    }

    #[test]
    fn a_solution_has_the_leading_zero_bits() {
        let challenge = "c1.x.1.12.n.t";
        let solution = solve(challenge, 12);
        assert!(work(challenge, &solution) >= 12);
        assert_eq!(check_solution(challenge, &solution, 12), Ok(()));
        let wrong = (0u64..).map(|n| n.to_string()).find(|s| work(challenge, s) < 12).expect("most fail");
        assert_eq!(check_solution(challenge, &wrong, 12), Err(ChallengeError::WrongSolution));
        for bad in ["", "12a", "-1", "123456789012345678901"] {
            assert_eq!(check_solution(challenge, bad, 0), Err(ChallengeError::MalformedSolution), "{bad:?}");
        }
    }

    #[test]
    fn zero_bits_are_counted_across_bytes() {
        assert_eq!(leading_zero_bits(&[0, 0, 0b0001_0000]), 19);
        assert_eq!(leading_zero_bits(&[0x80]), 0);
        assert_eq!(leading_zero_bits(&[0, 0]), 16);
        let mut buffer = itoa_buffer();
        assert_eq!(format_decimal(0, &mut buffer), b"0");
        assert_eq!(format_decimal(u64::MAX, &mut buffer), u64::MAX.to_string().as_bytes());
    }
}
