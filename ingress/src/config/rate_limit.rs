//! `[rate_limit]`: how fast one user or one client address may send order
//! requests, and how fast one address may read orders and open streams.

use seckill_core::config::{ensure, ConfigError};
use serde::{Deserialize, Serialize};

const MAX_RATE: u32 = 1_000_000;

/// Token buckets on the order routes (placing, cancelling, confirming),
/// checked before Redis is touched. A rate of 0 switches that limit off.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RateLimitConfig {
    /// Sustained order requests per second one user may send.
    pub per_user_per_second: u32,
    /// Requests one user may send at once before the rate applies.
    pub per_user_burst: u32,
    /// Sustained order requests per second from one client address (many
    /// users may share one behind a NAT: keep it well above the per-user
    /// rate).
    pub per_ip_per_second: u32,
    /// Requests one address may send at once before the rate applies.
    pub per_ip_burst: u32,
    /// Sustained reads per second from one client address on the order
    /// read routes (an order, a user's orders, long-polls, opening a
    /// stream). Voucher reads are answered from memory and left to caches.
    pub per_ip_reads_per_second: u32,
    /// Reads one address may send at once before the rate applies.
    pub per_ip_reads_burst: u32,
    /// Most users, and most addresses, tracked at once: bounds the memory
    /// of each limiter (about 100 bytes a key).
    pub max_tracked_keys: usize,
    /// Take the client address from the last `X-Forwarded-For` entry (the
    /// one the nearest proxy added), across all the header's lines. Only
    /// behind a proxy that sets it: a client could otherwise pick its own
    /// address.
    pub trust_x_forwarded_for: bool,
}

impl Default for RateLimitConfig {
    fn default() -> Self {
        Self {
            per_user_per_second: 5,
            per_user_burst: 10,
            per_ip_per_second: 500,
            per_ip_burst: 1_000,
            per_ip_reads_per_second: 1_000,
            per_ip_reads_burst: 2_000,
            max_tracked_keys: 100_000,
            trust_x_forwarded_for: false,
        }
    }
}

impl RateLimitConfig {
    /// No limits: for benchmarks and tests that load one platform from one
    /// address.
    pub fn unlimited() -> Self {
        Self { per_user_per_second: 0, per_ip_per_second: 0, per_ip_reads_per_second: 0, ..Self::default() }
    }

    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        let range = format!("must be 0 (off) to {MAX_RATE}");
        ensure(self.per_user_per_second <= MAX_RATE, "rate_limit.per_user_per_second", range.clone())?;
        ensure(self.per_ip_per_second <= MAX_RATE, "rate_limit.per_ip_per_second", range.clone())?;
        ensure(self.per_ip_reads_per_second <= MAX_RATE, "rate_limit.per_ip_reads_per_second", range)?;
        let burst = format!("must be 1 to {MAX_RATE}");
        ensure((1..=MAX_RATE).contains(&self.per_user_burst), "rate_limit.per_user_burst", burst.clone())?;
        ensure((1..=MAX_RATE).contains(&self.per_ip_burst), "rate_limit.per_ip_burst", burst.clone())?;
        ensure((1..=MAX_RATE).contains(&self.per_ip_reads_burst), "rate_limit.per_ip_reads_burst", burst)?;
        ensure(
            (1_000..=10_000_000).contains(&self.max_tracked_keys),
            "rate_limit.max_tracked_keys",
            "must be 1000 to 10000000",
        )
    }
}
