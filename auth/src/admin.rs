//! The admin token: one shared secret for the operators' routes.

use seckill_core::config::Secret;
use sha2::{Digest, Sha256};

/// The configured admin token. Never printed, not even as its digest (a
/// weak token could be guessed offline from one).
#[derive(Clone)]
pub struct AdminToken {
    /// SHA-256 of the token: comparing digests takes the same time whatever
    /// the presented token's length or content, so timing tells an attacker
    /// nothing about the token.
    digest: [u8; 32],
}

impl std::fmt::Debug for AdminToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AdminToken([redacted])")
    }
}

impl AdminToken {
    /// Wraps the configured token.
    pub fn new(token: &Secret) -> Self {
        Self { digest: Sha256::digest(token.expose().as_bytes()).into() }
    }

    /// Whether `presented` is the admin token.
    pub fn matches(&self, presented: &str) -> bool {
        let presented: [u8; 32] = Sha256::digest(presented.as_bytes()).into();
        presented.iter().zip(&self.digest).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_only_the_token_and_never_prints_it() {
        let token = AdminToken::new(&Secret::new("correct horse battery staple"));
        assert!(token.matches("correct horse battery staple"));
        assert!(!token.matches("correct horse battery stapl"));
        assert!(!token.matches(""));
        assert_eq!(format!("{token:?}"), "AdminToken([redacted])");
    }
}
