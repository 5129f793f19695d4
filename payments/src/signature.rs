//! Stripe's webhook signature scheme, so a receiver can tell a provider's
//! event from a forged or replayed one.
//!
//! The header is `Stripe-Signature: t=<unix seconds>,v1=<hex>[,v1=<hex>…]`
//! where each `v1` is HMAC-SHA256, keyed with a webhook secret, of
//! `"<t>.<raw body>"`. While a secret is being rotated the provider signs
//! with the old and the new one, hence several `v1` entries, and a receiver
//! holding both accepts either. Other schemes (`v0`, test schemes) are
//! ignored. The timestamp is signed too, so a tolerance around the
//! receiver's clock bounds how long a captured request can be replayed.

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// Stripe's default: five minutes either side of the receiver's clock.
pub const DEFAULT_TOLERANCE_SECONDS: i64 = 300;

/// Most `v1` entries read from one header: a provider sends one per secret
/// it signs with (two during a rotation), so more is malformed, and bounds
/// the HMACs a forged header can make us compute.
const MAX_SIGNATURES: usize = 8;

type HmacSha256 = Hmac<Sha256>;

/// Why a webhook's signature was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    #[error("the request has no Stripe-Signature header")]
    Missing,
    #[error("the Stripe-Signature header is malformed: {0}")]
    Malformed(String),
    #[error("the signature is {age_seconds} s old, past the tolerance")]
    Stale { age_seconds: i64 },
    #[error("the signature is dated {ahead_seconds} s in the future, past the tolerance")]
    Future { ahead_seconds: i64 },
    #[error("no v1 signature matches the payload under any configured secret")]
    NoMatch,
}

impl SignatureError {
    /// A short, fixed label for metrics (bounded cardinality).
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Missing => "missing",
            Self::Malformed(_) => "malformed",
            Self::Stale { .. } => "stale",
            Self::Future { .. } => "future",
            Self::NoMatch => "no_match",
        }
    }
}

/// The `Stripe-Signature` header value for `payload` sent at `timestamp`.
pub fn sign(secret: &str, timestamp: i64, payload: &[u8]) -> String {
    let digest = keyed(secret, timestamp, payload).finalize().into_bytes();
    format!("t={timestamp},v1={}", to_hex(&digest))
}

/// Checks `header` against `payload` and returns the signed timestamp.
///
/// Accepts when any `v1` entry matches under any of `secrets` (a rotation
/// lists the old and the new secret) and the timestamp is within
/// `tolerance_seconds` of `now`, either side. The signature is checked
/// first, so `Stale` and `Future` describe genuine but mistimed requests.
pub fn verify(
    header: &str,
    payload: &[u8],
    secrets: &[String],
    now: i64,
    tolerance_seconds: i64,
) -> Result<i64, SignatureError> {
    let (timestamp, signatures) = parse(header)?;
    let matched = secrets.iter().any(|secret| {
        let mac = keyed(secret, timestamp, payload);
        // `verify_slice` compares in constant time: timing reveals nothing
        // about how much of a forged signature was right.
        signatures.iter().any(|signature| mac.clone().verify_slice(signature).is_ok())
    });
    if !matched {
        return Err(SignatureError::NoMatch);
    }
    let age_seconds = now.saturating_sub(timestamp);
    if age_seconds > tolerance_seconds {
        return Err(SignatureError::Stale { age_seconds });
    }
    let ahead_seconds = timestamp.saturating_sub(now);
    if ahead_seconds > tolerance_seconds {
        return Err(SignatureError::Future { ahead_seconds });
    }
    Ok(timestamp)
}

/// The timestamp and the decoded `v1` signatures of a header.
fn parse(header: &str) -> Result<(i64, Vec<Vec<u8>>), SignatureError> {
    if header.trim().is_empty() {
        return Err(SignatureError::Missing);
    }
    let mut timestamp = None;
    let mut signatures = Vec::new();
    for item in header.split(',') {
        let (key, value) = item
            .trim()
            .split_once('=')
            .ok_or_else(|| SignatureError::Malformed(format!("`{}` is not key=value", clip(item))))?;
        match key {
            "t" => {
                if timestamp.is_some() {
                    return Err(SignatureError::Malformed("more than one timestamp".to_owned()));
                }
                let parsed = value
                    .parse::<i64>()
                    .map_err(|_| SignatureError::Malformed(format!("timestamp `{}` is not a number", clip(value))))?;
                timestamp = Some(parsed);
            }
            "v1" => {
                if signatures.len() == MAX_SIGNATURES {
                    return Err(SignatureError::Malformed(format!("more than {MAX_SIGNATURES} v1 signatures")));
                }
                let decoded = from_hex(value)
                    .ok_or_else(|| SignatureError::Malformed(format!("v1 `{}` is not hex", clip(value))))?;
                signatures.push(decoded);
            }
            _ => {}
        }
    }
    let timestamp = timestamp.ok_or_else(|| SignatureError::Malformed("no timestamp (t=)".to_owned()))?;
    if signatures.is_empty() {
        return Err(SignatureError::Malformed("no v1 signature".to_owned()));
    }
    Ok((timestamp, signatures))
}

fn keyed(secret: &str, timestamp: i64, payload: &[u8]) -> HmacSha256 {
    let mut mac = HmacSha256::new_from_slice(secret.as_bytes()).expect("HMAC accepts a key of any length");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(payload);
    mac
}

/// At most 32 characters of an untrusted value, for error messages.
fn clip(value: &str) -> &str {
    value.char_indices().nth(32).map_or(value, |(end, _)| &value[..end])
}

fn to_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        out.push(char::from(DIGITS[usize::from(byte >> 4)]));
        out.push(char::from(DIGITS[usize::from(byte & 0x0f)]));
    }
    out
}

fn from_hex(text: &str) -> Option<Vec<u8>> {
    if text.is_empty() || text.len() % 2 != 0 {
        return None;
    }
    let digit = |c: u8| char::from(c).to_digit(16).and_then(|d| u8::try_from(d).ok());
    text.as_bytes().chunks(2).map(|pair| Some(digit(pair[0])? << 4 | digit(pair[1])?)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_700_000_000;
    const BODY: &[u8] = br#"{"id":"evt_1","type":"payment_intent.succeeded"}"#;

    fn secrets(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn a_signed_payload_verifies_and_returns_its_timestamp() {
        let header = sign("whsec_a", NOW, BODY);
        assert!(header.starts_with(&format!("t={NOW},v1=")));
        assert_eq!(verify(&header, BODY, &secrets(&["whsec_a"]), NOW + 10, DEFAULT_TOLERANCE_SECONDS), Ok(NOW));
    }

    #[test]
    fn a_known_vector_matches() {
        // Computed independently (Python's hmac module), so another
        // implementation of the scheme can be checked against it.
        let header = sign("whsec_test_secret", 1_700_000_000, br#"{"id":"evt_test"}"#);
        assert_eq!(header, "t=1700000000,v1=13941114bb88ac44a76abcfddea5b92aa6182a4b63d8be3aae908a616083bd7e");
    }

    #[test]
    fn during_a_rotation_any_v1_under_any_secret_is_accepted() {
        let old = sign("whsec_old", NOW, BODY);
        let new = sign("whsec_new", NOW, BODY);
        let old_v1 = old.split_once(",v1=").map(|(_, v)| v).unwrap_or_default();
        let new_v1 = new.split_once(",v1=").map(|(_, v)| v).unwrap_or_default();
        let header = format!("t={NOW},v1={old_v1},v0=deadbeef,v1={new_v1}");
        for held in [&["whsec_new"][..], &["whsec_old"], &["whsec_other", "whsec_new"], &["whsec_old", "whsec_new"]] {
            assert_eq!(verify(&header, BODY, &secrets(held), NOW, 300), Ok(NOW), "{held:?}");
        }
        assert_eq!(verify(&header, BODY, &secrets(&["whsec_other"]), NOW, 300), Err(SignatureError::NoMatch));
    }

    #[test]
    fn a_tampered_payload_or_timestamp_does_not_match() {
        let header = sign("whsec_a", NOW, BODY);
        let held = secrets(&["whsec_a"]);
        assert_eq!(verify(&header, b"{\"id\":\"evt_2\"}", &held, NOW, 300), Err(SignatureError::NoMatch));
        let moved = header.replacen(&NOW.to_string(), &(NOW + 1).to_string(), 1);
        assert_eq!(verify(&moved, BODY, &held, NOW, 300), Err(SignatureError::NoMatch));
    }

    #[test]
    fn old_and_future_timestamps_are_refused() {
        let held = secrets(&["whsec_a"]);
        let header = sign("whsec_a", NOW, BODY);
        assert_eq!(verify(&header, BODY, &held, NOW + 301, 300), Err(SignatureError::Stale { age_seconds: 301 }));
        assert_eq!(verify(&header, BODY, &held, NOW + 300, 300), Ok(NOW));
        assert_eq!(verify(&header, BODY, &held, NOW - 301, 300), Err(SignatureError::Future { ahead_seconds: 301 }));
        assert_eq!(SignatureError::Stale { age_seconds: 301 }.reason(), "stale");
    }

    #[test]
    fn malformed_headers_are_named() {
        let held = secrets(&["whsec_a"]);
        assert_eq!(verify("", BODY, &held, NOW, 300), Err(SignatureError::Missing));
        for header in [
            "garbage",
            "t=abc,v1=00",
            "v1=00ff",
            &format!("t={NOW}"),
            &format!("t={NOW},v0=00ff"),
            &format!("t={NOW},v1=xyz0"),
            &format!("t={NOW},t={NOW},v1=00"),
            &format!("t={NOW}{}", ",v1=00".repeat(9)),
        ] {
            let error = verify(header, BODY, &held, NOW, 300).expect_err(header);
            assert_eq!(error.reason(), "malformed", "{header}: {error}");
        }
    }

    #[test]
    fn hex_round_trips() {
        assert_eq!(from_hex(&to_hex(&[0, 1, 0xab, 0xff])), Some(vec![0, 1, 0xab, 0xff]));
        assert_eq!(from_hex("0"), None);
        assert_eq!(from_hex("zz"), None);
    }
}
