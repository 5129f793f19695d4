//! A public randomness beacon (drand) as the source of a draw's ranking:
//! which chain and round a sale uses, fixed in its creation record, and
//! the round as it is logged when entries close.
//!
//! drand's `quicknet` chain publishes round `r` at `genesis_time + (r - 1) *
//! period` (unchained: the signed message is SHA-256 of `r` as a big-endian
//! u64; the signature is BLS on G1 under the chain's public key on G2,
//! hashed to the curve by RFC 9380 with DST
//! `BLS_SIG_BLS12381G1_XMD:SHA-256_SSWU_RO_NUL_`; the round's randomness is
//! SHA-256 of the signature). A threshold of the League of Entropy's members
//! must sign a round, so nobody knows its randomness before it is published.
//!
//! When a draw sale is created with a beacon configured, its settings carry
//! a [`BeaconPlan`]: the chain (hash, public key, genesis, period) and the
//! first round published after entries close (`draw_at`). The draw waits
//! for that round; the round's randomness (64 hex digits) takes the place
//! of the operator's seed in the ranking rule of [`crate::draw`], and the
//! round's signature is logged with the reveal ([`BeaconRound`]), so anyone
//! can check the signature, the round's time and the ranking from the log.
//!
//! Nothing here talks to the network or checks a signature: the crate
//! `seckill-beacon` fetches and verifies rounds.

use chrono::{DateTime, TimeZone, Utc};
use serde::{Deserialize, Serialize};

use crate::config::{ensure, ConfigError, Validate};

/// drand's `quicknet` chain (from its `/info`).
pub const QUICKNET_HASH: &str = "52db9ba70e0cc0f6eaf7803dd07447a1f5477735fd3f661792ba94600c84e971";
pub const QUICKNET_PUBLIC_KEY: &str = "83cf0f2896adee7eb8b5f01fcad3912212c437e0073e911fb90022d3e760183c8c4b450b6a0a6c3ac6a5776a2d1064510d1fec758c921cc22b0e17e63aaf4bcb5ed66304de9cf809bd274ca73bab4af5a6e9c76a4bc09e76eae8991ef5ece45a";
pub const QUICKNET_GENESIS: i64 = 1_692_803_367;
pub const QUICKNET_PERIOD: u32 = 3;

/// A beacon chain: what a verifier needs to check its rounds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BeaconChain {
    /// The chain's hash (64 hex digits), as its relays' paths name it.
    pub hash: String,
    /// The group's public key, a compressed G2 point (192 hex digits).
    pub public_key: String,
    /// Unix seconds of round 1.
    pub genesis_time: i64,
    /// Seconds between rounds.
    pub period: u32,
}

impl BeaconChain {
    /// drand's `quicknet`.
    pub fn quicknet() -> Self {
        Self {
            hash: QUICKNET_HASH.to_owned(),
            public_key: QUICKNET_PUBLIC_KEY.to_owned(),
            genesis_time: QUICKNET_GENESIS,
            period: QUICKNET_PERIOD,
        }
    }

    /// When `round` is published (round 1 at genesis).
    pub fn round_time(&self, round: u64) -> DateTime<Utc> {
        let seconds = i64::try_from(round.saturating_sub(1)).unwrap_or(i64::MAX / 2) * i64::from(self.period.max(1));
        Utc.timestamp_opt(self.genesis_time.saturating_add(seconds), 0).single().unwrap_or(DateTime::<Utc>::MAX_UTC)
    }

    /// The first round published strictly after `at`.
    pub fn first_round_after(&self, at: DateTime<Utc>) -> u64 {
        let elapsed_ms = at.timestamp_millis() - self.genesis_time * 1000;
        if elapsed_ms < 0 {
            return 1;
        }
        let period_ms = i64::from(self.period.max(1)) * 1000;
        u64::try_from(elapsed_ms / period_ms).unwrap_or(0) + 2
    }

    /// Whether the fields have the shapes a chain's have.
    pub fn check(&self) -> Result<(), String> {
        if !is_hex(&self.hash, 64) {
            return Err("beacon chain hash must be 64 lowercase hex digits".to_owned());
        }
        if !is_hex(&self.public_key, 192) {
            return Err("beacon public_key must be 192 lowercase hex digits (a compressed G2 point)".to_owned());
        }
        if !(1..=3600).contains(&self.period) {
            return Err("beacon period must be 1 to 3600 seconds".to_owned());
        }
        if self.genesis_time <= 0 {
            return Err("beacon genesis_time must be after 1970".to_owned());
        }
        Ok(())
    }
}

/// The chain and round a draw's ranking takes its randomness from, fixed
/// when the sale is created.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BeaconPlan {
    pub chain: BeaconChain,
    /// The first round published after entries close.
    pub round: u64,
}

impl BeaconPlan {
    /// The plan for entries that close at `closes_at`.
    pub fn after(chain: BeaconChain, closes_at: DateTime<Utc>) -> Self {
        let round = chain.first_round_after(closes_at);
        Self { chain, round }
    }

    /// When its round is published.
    pub fn round_time(&self) -> DateTime<Utc> {
        self.chain.round_time(self.round)
    }
}

/// A round as the reveal logs it: its randomness is SHA-256 of the
/// signature and is the ranking's seed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BeaconRound {
    pub round: u64,
    /// The BLS signature, a compressed G1 point (96 hex digits).
    pub signature: String,
}

/// `[beacon]`: where the platform fetches rounds, and of which chain. No
/// relays: no beacon, and draws rank (and waiting rooms shuffle their
/// pre-queue) by the operator's committed seed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BeaconConfig {
    /// Base URLs of drand HTTP relays (e.g. `https://api.drand.sh`), tried
    /// in order; each serves `/{chain hash}/public/{round}`.
    pub relays: Vec<String>,
    pub chain_hash: String,
    pub public_key: String,
    pub genesis_time: i64,
    pub period: u32,
    /// Bound on one request to a relay.
    pub timeout_ms: u64,
    /// Pause before the relays are tried again after all failed.
    pub retry_ms: u64,
}

impl Default for BeaconConfig {
    fn default() -> Self {
        let chain = BeaconChain::quicknet();
        Self {
            relays: Vec::new(),
            chain_hash: chain.hash,
            public_key: chain.public_key,
            genesis_time: chain.genesis_time,
            period: chain.period,
            timeout_ms: 2_000,
            retry_ms: 500,
        }
    }
}

impl BeaconConfig {
    /// The chain, when a beacon is configured.
    pub fn chain(&self) -> Option<BeaconChain> {
        (!self.relays.is_empty()).then(|| BeaconChain {
            hash: self.chain_hash.clone(),
            public_key: self.public_key.clone(),
            genesis_time: self.genesis_time,
            period: self.period,
        })
    }
}

impl Validate for BeaconConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        for relay in &self.relays {
            ensure(
                relay.starts_with("http://") || relay.starts_with("https://"),
                "beacon.relays",
                format!("{relay:?} must be an http:// or https:// URL"),
            )?;
        }
        ensure((100..=60_000).contains(&self.timeout_ms), "beacon.timeout_ms", "must be 100 to 60000")?;
        ensure((10..=60_000).contains(&self.retry_ms), "beacon.retry_ms", "must be 10 to 60000")?;
        let chain = BeaconChain {
            hash: self.chain_hash.clone(),
            public_key: self.public_key.clone(),
            genesis_time: self.genesis_time,
            period: self.period,
        };
        chain.check().map_err(|problem| ConfigError::Invalid { key: "beacon", problem })
    }
}

fn is_hex(text: &str, len: usize) -> bool {
    text.len() == len && text.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_are_timed_from_genesis_by_the_period() {
        let chain = BeaconChain::quicknet();
        assert_eq!(chain.round_time(1).timestamp(), QUICKNET_GENESIS);
        assert_eq!(chain.round_time(123).timestamp(), QUICKNET_GENESIS + 122 * 3);
        let at = |s: i64, ms: i64| Utc.timestamp_millis_opt(s * 1000 + ms).single().expect("valid");
        assert_eq!(chain.first_round_after(at(QUICKNET_GENESIS, 0)), 2, "round 1 is at, not after");
        assert_eq!(chain.first_round_after(at(QUICKNET_GENESIS, -1)), 1);
        assert_eq!(chain.first_round_after(at(QUICKNET_GENESIS + 2, 999)), 2);
        assert_eq!(chain.first_round_after(at(QUICKNET_GENESIS + 3, 0)), 3);
        for ms in [0, 1, 1_500, 2_999, 86_400_123] {
            let closes = at(QUICKNET_GENESIS + 1_000, ms);
            let round = chain.first_round_after(closes);
            assert!(chain.round_time(round) > closes, "after entries close");
            assert!(chain.round_time(round - 1) <= closes, "the first such round");
        }
    }

    #[test]
    fn the_config_names_a_chain_only_with_relays() {
        let mut config = BeaconConfig::default();
        assert!(config.validate().is_ok());
        assert_eq!(config.chain(), None);
        config.relays = vec!["https://api.drand.sh".to_owned()];
        assert_eq!(config.chain(), Some(BeaconChain::quicknet()));
        config.relays = vec!["ftp://x".to_owned()];
        assert!(config.validate().is_err());
        let bad = BeaconConfig { public_key: "00".to_owned(), ..BeaconConfig::default() };
        assert!(bad.validate().is_err());
    }
}
