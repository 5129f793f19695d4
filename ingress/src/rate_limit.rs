//! Token buckets per user and per client IP, in bounded memory.
//!
//! A bucket holds up to `burst` tokens and refills at `per_second`; each
//! order request takes one. A key whose bucket has been idle long enough to
//! be full again is the same as an unknown key, so such entries are the
//! first to go when a shard is full. If a shard is full of active keys (a
//! flood of distinct keys), the least recently seen one is evicted: an
//! attacker can at worst reset the buckets of the keys it floods with, and
//! memory never grows past `max_keys`.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hash, RandomState};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Independent locks, so concurrent requests rarely wait for each other.
const SHARDS: usize = 16;

/// One key's bucket.
#[derive(Clone, Copy, Debug)]
struct Bucket {
    tokens: f64,
    updated: Instant,
}

/// Whether a request may go ahead.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Verdict {
    Allowed,
    /// Refused; a token will be there after this long.
    Limited {
        retry_after: Duration,
    },
}

/// Token buckets keyed by `K`.
#[derive(Debug)]
pub(crate) struct RateLimiter<K> {
    per_second: f64,
    burst: f64,
    /// Time an idle bucket takes to fill up again: after that it is no
    /// different from an absent one.
    refill: Duration,
    max_keys_per_shard: usize,
    hasher: RandomState,
    shards: Box<[Mutex<HashMap<K, Bucket>>]>,
}

impl<K: Hash + Eq + Clone> RateLimiter<K> {
    /// `per_second` tokens a second, up to `burst`, for at most about
    /// `max_keys` keys at once. `None` when `per_second` is 0 (no limit).
    pub(crate) fn new(per_second: f64, burst: u32, max_keys: usize) -> Option<Self> {
        if per_second <= 0.0 {
            return None;
        }
        let burst = f64::from(burst.max(1));
        Some(Self {
            per_second,
            burst,
            refill: Duration::from_secs_f64(burst / per_second),
            max_keys_per_shard: max_keys.div_ceil(SHARDS).max(1),
            hasher: RandomState::new(),
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
        })
    }

    /// Takes a token from `key`'s bucket if it has one.
    pub(crate) fn check(&self, key: &K, now: Instant) -> Verdict {
        let shard = &self.shards[self.hasher.hash_one(key) as usize % SHARDS];
        let mut buckets = shard.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if !buckets.contains_key(key) && buckets.len() >= self.max_keys_per_shard {
            self.make_room(&mut buckets, now);
        }
        let bucket = buckets.entry(key.clone()).or_insert(Bucket { tokens: self.burst, updated: now });
        let elapsed = now.saturating_duration_since(bucket.updated).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * self.per_second).min(self.burst);
        bucket.updated = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            Verdict::Allowed
        } else {
            Verdict::Limited { retry_after: Duration::from_secs_f64((1.0 - bucket.tokens) / self.per_second) }
        }
    }

    /// Drops the buckets that are full again; failing that, the least
    /// recently used one.
    fn make_room(&self, buckets: &mut HashMap<K, Bucket>, now: Instant) {
        buckets.retain(|_, bucket| now.saturating_duration_since(bucket.updated) < self.refill);
        if buckets.len() < self.max_keys_per_shard {
            return;
        }
        let oldest = buckets.iter().min_by_key(|(_, bucket)| bucket.updated).map(|(key, _)| key.clone());
        if let Some(oldest) = oldest {
            buckets.remove(&oldest);
        }
    }

    /// Keys tracked now, for tests.
    #[cfg(test)]
    fn tracked(&self) -> usize {
        self.shards.iter().map(|shard| shard.lock().map(|buckets| buckets.len()).unwrap_or(0)).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_passes_then_requests_are_limited_until_tokens_refill() {
        let limiter = RateLimiter::new(2.0, 3, 100).expect("enabled");
        let start = Instant::now();
        for _ in 0..3 {
            assert_eq!(limiter.check(&"alice", start), Verdict::Allowed);
        }
        let Verdict::Limited { retry_after } = limiter.check(&"alice", start) else { panic!("limited") };
        assert_eq!(retry_after, Duration::from_millis(500), "one token takes 1/rate");
        assert_eq!(limiter.check(&"bob", start), Verdict::Allowed, "buckets are per key");
        assert_eq!(limiter.check(&"alice", start + Duration::from_millis(500)), Verdict::Allowed);
        assert!(matches!(limiter.check(&"alice", start + Duration::from_millis(500)), Verdict::Limited { .. }));
    }

    #[test]
    fn tokens_never_exceed_the_burst() {
        let limiter = RateLimiter::new(10.0, 2, 100).expect("enabled");
        let later = Instant::now() + Duration::from_secs(3600);
        assert_eq!(limiter.check(&1, later), Verdict::Allowed);
        assert_eq!(limiter.check(&1, later), Verdict::Allowed);
        assert!(matches!(limiter.check(&1, later), Verdict::Limited { .. }));
    }

    #[test]
    fn memory_is_bounded_and_idle_keys_go_first() {
        let limiter = RateLimiter::new(1.0, 1, SHARDS * 4).expect("enabled");
        let start = Instant::now();
        for key in 0..10_000u32 {
            limiter.check(&key, start);
        }
        assert!(limiter.tracked() <= SHARDS * 4, "{} keys tracked", limiter.tracked());

        // Once idle past the refill time, a flood no longer evicts active keys
        // in preference to idle ones: the active key keeps its empty bucket.
        let later = start + Duration::from_secs(2);
        assert_eq!(limiter.check(&u32::MAX, later), Verdict::Allowed);
        for key in 20_000..20_000 + SHARDS as u32 {
            limiter.check(&key, later);
        }
        assert!(matches!(limiter.check(&u32::MAX, later), Verdict::Limited { .. }));
    }

    #[test]
    fn a_zero_rate_means_no_limiter() {
        assert!(RateLimiter::<u32>::new(0.0, 10, 10).is_none());
    }
}
