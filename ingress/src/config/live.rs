//! `[live]`: the read side: what is answered from memory, how stale it may
//! be, and how many waiters and streams one ingress holds.

use seckill_core::config::{ensure, ConfigError};
use serde::{Deserialize, Serialize};

/// Longest `?wait=` a long-poll may ask for.
pub const MAX_WAIT_SECONDS: u64 = 30;

/// How the ingress answers reads and pushes changes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LiveConfig {
    /// Longest a voucher read answered from memory may be behind Redis and
    /// the view: the staleness bound of voucher reads (at most 1000). A
    /// sold-out voucher stops looking available within this.
    pub voucher_refresh_ms: u64,
    /// Most vouchers (and voucher list pages) kept in memory.
    pub voucher_cache_capacity: usize,
    /// Most orders kept in memory for status reads, waiters and streams
    /// (about 300 bytes each); the oldest go first.
    pub order_cache_capacity: usize,
    /// How long an admitted order stays readable from Redis by its id
    /// alone, waiting for the log and the view to have it.
    pub pending_order_ttl_seconds: u64,
    /// Most long-polls waiting at once; more get `503`.
    pub max_waiters: usize,
    /// Most long-polls of one user waiting at once; more get `429`.
    pub max_waiters_per_user: usize,
    /// Most long-polls from one client address waiting at once; more get
    /// `429`.
    pub max_waiters_per_address: usize,
    /// Most open streams of users' orders; more get `503`.
    pub max_streams: usize,
    /// Most open voucher streams (anyone may open one): a pool of their
    /// own, so watchers never take a buyer's place; more get `503`.
    pub max_voucher_streams: usize,
    /// Most open streams of one user's orders.
    pub max_streams_per_user: usize,
    /// Most open streams from one client address.
    pub max_streams_per_address: usize,
    /// Seconds between heartbeats on an idle stream (proxies close silent
    /// connections).
    pub heartbeat_seconds: u64,
    /// Shortest interval between two pushes of one voucher's changes:
    /// changes in between are coalesced into one.
    pub voucher_push_ms: u64,
    /// How long the broker may hold the live follower's fetch when nothing
    /// is new: bounds how late a decision wakes its waiters on a quiet topic.
    pub follow_fetch_wait_ms: u64,
}

impl Default for LiveConfig {
    fn default() -> Self {
        Self {
            voucher_refresh_ms: 250,
            voucher_cache_capacity: 10_000,
            order_cache_capacity: 200_000,
            pending_order_ttl_seconds: 3_600,
            max_waiters: 50_000,
            max_waiters_per_user: 16,
            max_waiters_per_address: 1_024,
            max_streams: 10_000,
            max_voucher_streams: 10_000,
            max_streams_per_user: 4,
            max_streams_per_address: 256,
            heartbeat_seconds: 15,
            voucher_push_ms: 250,
            follow_fetch_wait_ms: 50,
        }
    }
}

impl LiveConfig {
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        ensure((10..=1_000).contains(&self.voucher_refresh_ms), "live.voucher_refresh_ms", "must be 10 to 1000")?;
        ensure(
            (16..=1_000_000).contains(&self.voucher_cache_capacity),
            "live.voucher_cache_capacity",
            "must be 16 to 1000000",
        )?;
        ensure(
            (1_000..=10_000_000).contains(&self.order_cache_capacity),
            "live.order_cache_capacity",
            "must be 1000 to 10000000",
        )?;
        ensure(
            (10..=7 * 24 * 3600).contains(&self.pending_order_ttl_seconds),
            "live.pending_order_ttl_seconds",
            "must be 10 to 604800",
        )?;
        ensure((1..=1_000_000).contains(&self.max_waiters), "live.max_waiters", "must be 1 to 1000000")?;
        ensure((1..=1_000).contains(&self.max_waiters_per_user), "live.max_waiters_per_user", "must be 1 to 1000")?;
        ensure(
            (1..=1_000_000).contains(&self.max_waiters_per_address),
            "live.max_waiters_per_address",
            "must be 1 to 1000000",
        )?;
        ensure((1..=1_000_000).contains(&self.max_streams), "live.max_streams", "must be 1 to 1000000")?;
        ensure(
            (1..=1_000_000).contains(&self.max_voucher_streams),
            "live.max_voucher_streams",
            "must be 1 to 1000000",
        )?;
        ensure((1..=64).contains(&self.max_streams_per_user), "live.max_streams_per_user", "must be 1 to 64")?;
        ensure(
            (1..=1_000_000).contains(&self.max_streams_per_address),
            "live.max_streams_per_address",
            "must be 1 to 1000000",
        )?;
        ensure((1..=300).contains(&self.heartbeat_seconds), "live.heartbeat_seconds", "must be 1 to 300")?;
        ensure((50..=10_000).contains(&self.voucher_push_ms), "live.voucher_push_ms", "must be 50 to 10000")?;
        ensure((1..=1_000).contains(&self.follow_fetch_wait_ms), "live.follow_fetch_wait_ms", "must be 1 to 1000")
    }
}
