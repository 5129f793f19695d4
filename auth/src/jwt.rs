//! HS256 JSON Web Tokens (RFC 7519), verified strictly.
//!
//! Only what the platform needs is accepted, so nothing else can be slipped
//! in:
//! - the header must name `HS256`: `none`, `RS256` or any other algorithm
//!   is refused before a signature is computed, which closes the
//!   algorithm-confusion attacks (a token "signed" with `none`, or with the
//!   HMAC secret used as an RSA public key);
//! - the signature is compared in constant time, and no claim is parsed
//!   before it is verified;
//! - `exp` is required; `nbf`, and `iss` / `aud` when configured, are
//!   checked; `sub` must be a valid user id;
//! - tokens are bounded in size and the Base64url must be canonical.

use std::fmt;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use hmac::{Hmac, Mac};
use seckill_core::config::Secret;
use seckill_core::UserId;
use serde::{Deserialize, Serialize};
use sha2::Sha256;

/// Shortest HS256 secret accepted: RFC 7518 §3.2 asks for a key at least
/// as long as the hash output.
pub const MIN_SECRET_BYTES: usize = 32;
/// Longest token read; anything longer is refused unread.
pub const MAX_TOKEN_BYTES: usize = 4096;

type HmacSha256 = Hmac<Sha256>;

/// The HS256 key tokens are signed and verified with.
#[derive(Clone)]
pub struct JwtKey {
    /// The keyed MAC, cloned per use (keying it again per request would
    /// hash the secret every time).
    mac: HmacSha256,
}

impl fmt::Debug for JwtKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("JwtKey([redacted])")
    }
}

/// What a token must satisfy besides its signature.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JwtRules {
    /// Clock difference tolerated on `exp` and `nbf`, in seconds.
    pub leeway_seconds: u64,
    /// When set, `iss` must be exactly this.
    pub issuer: Option<String>,
    /// When set, `aud` must be or contain this.
    pub audience: Option<String>,
}

/// The claims the platform reads. Other claims are ignored, as issuers add
/// their own.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    /// The user id.
    pub sub: String,
    /// Expiry, seconds since the Unix epoch.
    pub exp: i64,
    /// Not valid before, seconds since the Unix epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nbf: Option<i64>,
    /// Issued at, seconds since the Unix epoch (informational).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iat: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iss: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aud: Option<Audience>,
}

/// `aud` is a string or an array of strings (RFC 7519 §4.1.3).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Audience {
    One(String),
    Many(Vec<String>),
}

impl Audience {
    fn contains(&self, wanted: &str) -> bool {
        match self {
            Self::One(audience) => audience == wanted,
            Self::Many(audiences) => audiences.iter().any(|audience| audience == wanted),
        }
    }
}

/// Seconds since the Unix epoch: the clock `exp`, `nbf` and `iat` are read
/// against.
pub fn unix_now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |elapsed| elapsed.as_secs() as i64)
}

impl Claims {
    /// Claims for `user`, issued at `now` and valid for `ttl_seconds`.
    pub fn for_user(user: &UserId, now: i64, ttl_seconds: i64) -> Self {
        Self {
            sub: user.as_str().to_owned(),
            exp: now.saturating_add(ttl_seconds),
            nbf: None,
            iat: Some(now),
            iss: None,
            aud: None,
        }
    }
}

/// Why a token was refused. The messages are safe to show the client: they
/// say what is wrong with the token, never anything about the key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    #[error("the token is not a well-formed JWT ({0})")]
    Malformed(&'static str),
    #[error("tokens must be signed with HS256, not {0}")]
    Algorithm(String),
    #[error("the token's signature is not valid")]
    Signature,
    #[error("the token has expired")]
    Expired,
    #[error("the token is not valid yet")]
    NotYetValid,
    #[error("the token was issued by or for someone else")]
    WrongParty,
    #[error("the token's sub is not a valid user id")]
    Subject,
}

/// The JOSE header fields that matter here.
#[derive(Deserialize)]
struct Header {
    alg: String,
    #[serde(default)]
    typ: Option<String>,
    /// Extensions the recipient must understand (RFC 7515 §4.1.11): none
    /// are, so a token that has any is refused.
    #[serde(default)]
    crit: Option<serde_json::Value>,
}

impl JwtKey {
    /// A key from the configured secret (its length is checked by the
    /// config's validation, see [`MIN_SECRET_BYTES`]).
    pub fn new(secret: &Secret) -> Self {
        Self::from_bytes(secret.expose().as_bytes())
    }

    /// A key from raw bytes.
    pub fn from_bytes(secret: &[u8]) -> Self {
        Self { mac: HmacSha256::new_from_slice(secret).expect("HMAC accepts keys of any length") }
    }

    /// A signed token carrying `claims`.
    pub fn issue(&self, claims: &Claims) -> String {
        let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"HS256","typ":"JWT"}"#);
        let payload = URL_SAFE_NO_PAD.encode(serde_json::to_vec(claims).expect("claims serialize"));
        let signing_input = format!("{header}.{payload}");
        let signature = self.mac.clone().chain_update(signing_input.as_bytes()).finalize().into_bytes();
        format!("{signing_input}.{}", URL_SAFE_NO_PAD.encode(signature))
    }

    /// The user `token` speaks for, if it is valid at `now` (seconds since
    /// the Unix epoch) under `rules`.
    pub fn verify(&self, token: &str, rules: &JwtRules, now: i64) -> Result<UserId, TokenError> {
        let claims = self.verified_claims(token)?;
        let leeway = i64::try_from(rules.leeway_seconds).unwrap_or(i64::MAX);
        if now >= claims.exp.saturating_add(leeway) {
            return Err(TokenError::Expired);
        }
        if claims.nbf.is_some_and(|nbf| now.saturating_add(leeway) < nbf) {
            return Err(TokenError::NotYetValid);
        }
        if rules.issuer.as_ref().is_some_and(|issuer| claims.iss.as_ref() != Some(issuer)) {
            return Err(TokenError::WrongParty);
        }
        if let Some(audience) = &rules.audience {
            if !claims.aud.as_ref().is_some_and(|aud| aud.contains(audience)) {
                return Err(TokenError::WrongParty);
            }
        }
        UserId::parse(&claims.sub).map_err(|_| TokenError::Subject)
    }

    /// The claims of a token whose header and signature check out.
    fn verified_claims(&self, token: &str) -> Result<Claims, TokenError> {
        if token.len() > MAX_TOKEN_BYTES {
            return Err(TokenError::Malformed("too long"));
        }
        let mut parts = token.split('.');
        let (Some(encoded_header), Some(payload), Some(signature), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(TokenError::Malformed("a JWT has three dot-separated parts"));
        };

        let header: Header = serde_json::from_slice(&decode_part(encoded_header)?)
            .map_err(|_| TokenError::Malformed("the header is not a JSON object with alg"))?;
        if header.alg != "HS256" {
            return Err(TokenError::Algorithm(header.alg.chars().take(16).collect()));
        }
        if header.typ.as_deref().is_some_and(|typ| !typ.eq_ignore_ascii_case("JWT")) {
            return Err(TokenError::Malformed("typ must be JWT"));
        }
        if header.crit.is_some() {
            return Err(TokenError::Malformed("critical header extensions are not supported"));
        }

        let signature = decode_part(signature)?;
        let signing_input = &token[..encoded_header.len() + 1 + payload.len()];
        self.mac
            .clone()
            .chain_update(signing_input.as_bytes())
            .verify_slice(&signature)
            .map_err(|_| TokenError::Signature)?;

        serde_json::from_slice(&decode_part(payload)?)
            .map_err(|_| TokenError::Malformed("the claims need a string sub and an integer exp"))
    }
}

fn decode_part(part: &str) -> Result<Vec<u8>, TokenError> {
    URL_SAFE_NO_PAD.decode(part).map_err(|_| TokenError::Malformed("a part is not canonical unpadded Base64url"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_800_000_000;

    fn key() -> JwtKey {
        JwtKey::new(&Secret::new("0123456789abcdef0123456789abcdef"))
    }

    fn alice() -> UserId {
        UserId::parse("alice").expect("valid")
    }

    fn encode_json(value: &serde_json::Value) -> String {
        URL_SAFE_NO_PAD.encode(serde_json::to_vec(value).expect("json"))
    }

    /// A token with any header and claims, signed with `key` over exactly
    /// what it carries.
    fn signed(key: &JwtKey, header: &serde_json::Value, claims: &serde_json::Value) -> String {
        let input = format!("{}.{}", encode_json(header), encode_json(claims));
        let signature = key.mac.clone().chain_update(input.as_bytes()).finalize().into_bytes();
        format!("{input}.{}", URL_SAFE_NO_PAD.encode(signature))
    }

    #[test]
    fn an_issued_token_verifies_as_its_user() {
        let token = key().issue(&Claims::for_user(&alice(), NOW, 60));
        assert_eq!(key().verify(&token, &JwtRules::default(), NOW), Ok(alice()));
    }

    #[test]
    fn a_forged_signature_or_another_key_is_refused() {
        let token = key().issue(&Claims::for_user(&alice(), NOW, 60));
        let other = JwtKey::from_bytes(b"another secret of thirty-two bytes!!");
        assert_eq!(other.verify(&token, &JwtRules::default(), NOW), Err(TokenError::Signature));

        // Same header and signature, claims changed to another user.
        let mut parts: Vec<&str> = token.split('.').collect();
        let forged_claims = encode_json(&serde_json::json!({"sub": "mallory", "exp": NOW + 60}));
        parts[1] = &forged_claims;
        assert_eq!(key().verify(&parts.join("."), &JwtRules::default(), NOW), Err(TokenError::Signature));
    }

    #[test]
    fn only_hs256_is_accepted() {
        let claims = serde_json::json!({"sub": "alice", "exp": NOW + 60});
        let unsigned = format!("{}.{}.", encode_json(&serde_json::json!({"alg": "none"})), encode_json(&claims));
        assert_eq!(key().verify(&unsigned, &JwtRules::default(), NOW), Err(TokenError::Algorithm("none".into())));

        // RS256 header "signed" with the HMAC secret: the confusion attack.
        let rs256 = signed(&key(), &serde_json::json!({"alg": "RS256", "typ": "JWT"}), &claims);
        assert_eq!(key().verify(&rs256, &JwtRules::default(), NOW), Err(TokenError::Algorithm("RS256".into())));

        let hs512 = signed(&key(), &serde_json::json!({"alg": "HS512"}), &claims);
        assert!(matches!(key().verify(&hs512, &JwtRules::default(), NOW), Err(TokenError::Algorithm(_))));

        let crit = signed(&key(), &serde_json::json!({"alg": "HS256", "crit": ["exp"]}), &claims);
        assert!(matches!(key().verify(&crit, &JwtRules::default(), NOW), Err(TokenError::Malformed(_))));
    }

    #[test]
    fn expiry_and_not_before_honour_the_leeway() {
        let token = key().issue(&Claims::for_user(&alice(), NOW - 120, 60));
        assert_eq!(key().verify(&token, &JwtRules::default(), NOW), Err(TokenError::Expired));
        let lenient = JwtRules { leeway_seconds: 61, ..JwtRules::default() };
        assert_eq!(key().verify(&token, &lenient, NOW), Ok(alice()));

        let early = Claims { nbf: Some(NOW + 30), ..Claims::for_user(&alice(), NOW, 600) };
        assert_eq!(key().verify(&key().issue(&early), &JwtRules::default(), NOW), Err(TokenError::NotYetValid));
    }

    #[test]
    fn exp_is_required_and_sub_must_be_a_user_id() {
        let no_exp = signed(&key(), &serde_json::json!({"alg": "HS256"}), &serde_json::json!({"sub": "alice"}));
        assert!(matches!(key().verify(&no_exp, &JwtRules::default(), NOW), Err(TokenError::Malformed(_))));
        let bad_sub = signed(
            &key(),
            &serde_json::json!({"alg": "HS256"}),
            &serde_json::json!({"sub": "no spaces allowed", "exp": NOW + 60}),
        );
        assert_eq!(key().verify(&bad_sub, &JwtRules::default(), NOW), Err(TokenError::Subject));
    }

    #[test]
    fn issuer_and_audience_are_checked_when_configured() {
        let rules = JwtRules { issuer: Some("login".into()), audience: Some("seckill".into()), leeway_seconds: 0 };
        let mut claims = Claims::for_user(&alice(), NOW, 60);
        assert_eq!(key().verify(&key().issue(&claims), &rules, NOW), Err(TokenError::WrongParty));
        claims.iss = Some("login".into());
        claims.aud = Some(Audience::Many(vec!["other".into(), "seckill".into()]));
        assert_eq!(key().verify(&key().issue(&claims), &rules, NOW), Ok(alice()));
        claims.aud = Some(Audience::One("other".into()));
        assert_eq!(key().verify(&key().issue(&claims), &rules, NOW), Err(TokenError::WrongParty));
    }

    #[test]
    fn malformed_tokens_are_refused_without_panicking() {
        let token = key().issue(&Claims::for_user(&alice(), NOW, 60));
        for bad in [
            "",
            "...",
            "a.b",
            "a.b.c.d",
            &format!("{token}="),
            &format!("{token}.x"),
            &token.replacen('.', "+", 1),
            &"a".repeat(MAX_TOKEN_BYTES + 1),
            "\u{0}.\u{0}.\u{0}",
        ] {
            assert!(key().verify(bad, &JwtRules::default(), NOW).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn keys_do_not_print() {
        assert_eq!(format!("{:?}", key()), "JwtKey([redacted])");
    }
}
