//! Token buckets per user and per client IP, in bounded memory.
//!
//! A bucket holds up to `burst` tokens and refills at `per_second`; each
//! order request takes one. Each shard keeps its keys in two generations:
//! a key seen now lives in the current one; when that is full, the previous
//! generation is dropped whole and the current one takes its place. So a
//! flood of distinct keys costs O(1) per request (no scan for the oldest key
//! under the lock), memory never grows past `max_keys`, and a key the flood
//! pushes out is one not seen for a whole generation: at worst an attacker
//! resets the buckets of keys that have gone quiet.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hash, RandomState};
use std::mem;
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

/// One shard's keys: those seen since the last rotation, and those seen in
/// the generation before it.
#[derive(Debug)]
struct Generations<K> {
    current: HashMap<K, Bucket>,
    previous: HashMap<K, Bucket>,
}

impl<K: Hash + Eq> Generations<K> {
    /// The bucket of `key`, moved into the current generation; a new full
    /// one for a key not seen for two generations.
    fn bucket(&mut self, key: K, full: Bucket, per_generation: usize) -> &mut Bucket {
        if self.current.contains_key(&key) {
            return self.current.entry(key).or_insert(full);
        }
        let carried = self.previous.remove(&key).unwrap_or(full);
        if self.current.len() >= per_generation {
            // Dropping a whole map: no search for the oldest key.
            self.previous = mem::take(&mut self.current);
        }
        self.current.entry(key).or_insert(carried)
    }
}

/// Token buckets keyed by `K`.
#[derive(Debug)]
pub(crate) struct RateLimiter<K> {
    per_second: f64,
    burst: f64,
    /// Keys one generation of one shard holds (two generations per shard).
    keys_per_generation: usize,
    hasher: RandomState,
    shards: Box<[Mutex<Generations<K>>]>,
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
            keys_per_generation: max_keys.div_ceil(2 * SHARDS).max(1),
            hasher: RandomState::new(),
            shards: (0..SHARDS)
                .map(|_| Mutex::new(Generations { current: HashMap::new(), previous: HashMap::new() }))
                .collect(),
        })
    }

    /// Takes a token from `key`'s bucket if it has one.
    pub(crate) fn check(&self, key: &K, now: Instant) -> Verdict {
        let shard = &self.shards[self.hasher.hash_one(key) as usize % SHARDS];
        let mut generations = shard.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let full = Bucket { tokens: self.burst, updated: now };
        let bucket = generations.bucket(key.clone(), full, self.keys_per_generation);
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

    /// Keys tracked now, for tests.
    #[cfg(test)]
    fn tracked(&self) -> usize {
        self.shards
            .iter()
            .map(|shard| shard.lock().map(|keys| keys.current.len() + keys.previous.len()).unwrap_or(0))
            .sum()
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
    fn memory_is_bounded_and_recently_seen_keys_stay() {
        let limiter = RateLimiter::new(1.0, 1, SHARDS * 64).expect("enabled");
        let start = Instant::now();
        for key in 0..10_000u32 {
            limiter.check(&key, start);
        }
        assert!(limiter.tracked() <= SHARDS * 64, "{} keys tracked", limiter.tracked());

        // A key seen just now survives a flood smaller than a generation (32
        // keys a shard): it keeps its empty bucket.
        assert_eq!(limiter.check(&u32::MAX, start), Verdict::Allowed);
        for key in 20_000..20_000 + SHARDS as u32 {
            limiter.check(&key, start);
        }
        assert!(matches!(limiter.check(&u32::MAX, start), Verdict::Limited { .. }));
    }

    #[test]
    fn a_flood_of_distinct_keys_costs_no_scan() {
        // 200,000 distinct keys through a limiter of 1,000: were eviction a
        // scan for the oldest key, this would be ~10^8 steps.
        let limiter = RateLimiter::new(1.0, 1, 1_000).expect("enabled");
        let start = Instant::now();
        for key in 0..200_000u32 {
            assert_eq!(limiter.check(&key, start), Verdict::Allowed);
        }
        assert!(limiter.tracked() <= 1_000 + 2 * SHARDS);
    }

    #[test]
    fn a_zero_rate_means_no_limiter() {
        assert!(RateLimiter::<u32>::new(0.0, 10, 10).is_none());
    }
}
