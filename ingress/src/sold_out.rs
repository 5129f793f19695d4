//! The sold-out fast path.
//!
//! Once Redis said a voucher has no units left, this process answers from
//! memory for a short time (the memo's lifetime, at most a second) without a
//! Redis round trip: after a sell-out nearly every request is refused, and
//! this keeps the storm off Redis. The memo keeps a snapshot of who holds
//! units, taken when the sell-out was seen (nobody can gain units while none
//! are left), so a holder who retries still learns their order id. When
//! stock comes back (a cancellation), the memo expires within its lifetime
//! and Redis, still the only gate, admits again. A stale memo can only
//! refuse; it never admits.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use seckill_core::VoucherId;
use seckill_gate::Holders;

#[derive(Debug)]
struct Entry {
    seen_at: Instant,
    holders: Arc<Holders>,
}

/// Vouchers recently seen sold out, each remembered for `lifetime`.
#[derive(Debug)]
pub(crate) struct SoldOutMemo {
    lifetime: Duration,
    /// Bounds memory: past this many vouchers, new sell-outs are not
    /// remembered (those requests simply go to Redis).
    capacity: usize,
    seen: RwLock<HashMap<VoucherId, Entry>>,
    /// Vouchers whose holders are being fetched: when a sell-out is seen by
    /// many requests at once, one of them takes the snapshot.
    fetching: Mutex<HashSet<VoucherId>>,
}

/// The right to take one voucher's holders snapshot; released on drop.
#[derive(Debug)]
pub(crate) struct Snapshotting<'memo> {
    memo: &'memo SoldOutMemo,
    voucher: VoucherId,
}

impl Drop for Snapshotting<'_> {
    fn drop(&mut self) {
        self.memo.fetching.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).remove(&self.voucher);
    }
}

impl SoldOutMemo {
    /// A memo remembering each sell-out for `lifetime` (zero disables it).
    pub(crate) fn new(lifetime: Duration, capacity: usize) -> Self {
        Self { lifetime, capacity, seen: RwLock::new(HashMap::new()), fetching: Mutex::new(HashSet::new()) }
    }

    /// The right to snapshot `voucher`'s holders, unless memory is off, the
    /// sell-out is already remembered, or another request is taking it.
    pub(crate) fn begin_snapshot(&self, voucher: VoucherId, now: Instant) -> Option<Snapshotting<'_>> {
        if !self.enabled() || self.sold_out(voucher, now).is_some() {
            return None;
        }
        let mut fetching = self.fetching.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        fetching.insert(voucher).then(|| Snapshotting { memo: self, voucher })
    }

    /// Whether a sell-out would be remembered at all.
    pub(crate) fn enabled(&self) -> bool {
        !self.lifetime.is_zero()
    }

    /// The holders of `voucher` if it was seen sold out less than the
    /// lifetime ago.
    pub(crate) fn sold_out(&self, voucher: VoucherId, now: Instant) -> Option<Arc<Holders>> {
        let seen = self.seen.read().unwrap_or_else(|poisoned| poisoned.into_inner());
        seen.get(&voucher)
            .filter(|entry| now.saturating_duration_since(entry.seen_at) < self.lifetime)
            .map(|entry| Arc::clone(&entry.holders))
    }

    /// Remembers that Redis found `voucher` with no units left.
    pub(crate) fn mark(&self, voucher: VoucherId, holders: Holders, now: Instant) {
        if !self.enabled() {
            return;
        }
        let mut seen = self.seen.write().unwrap_or_else(|poisoned| poisoned.into_inner());
        if seen.len() >= self.capacity && !seen.contains_key(&voucher) {
            let lifetime = self.lifetime;
            seen.retain(|_, entry| now.saturating_duration_since(entry.seen_at) < lifetime);
            if seen.len() >= self.capacity {
                return;
            }
        }
        seen.insert(voucher, Entry { seen_at: now, holders: Arc::new(holders) });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_for_its_lifetime_only() {
        let memo = SoldOutMemo::new(Duration::from_millis(500), 10);
        let (voucher, start) = (VoucherId::generate(), Instant::now());
        assert!(memo.sold_out(voucher, start).is_none());
        memo.mark(voucher, Holders::default(), start);
        assert!(memo.sold_out(voucher, start + Duration::from_millis(499)).is_some());
        assert!(memo.sold_out(voucher, start + Duration::from_millis(500)).is_none(), "stock may be back");
    }

    #[test]
    fn is_bounded_and_evicts_expired_entries() {
        let memo = SoldOutMemo::new(Duration::from_millis(100), 2);
        let start = Instant::now();
        let vouchers: Vec<_> = (0..3).map(|_| VoucherId::generate()).collect();
        for voucher in &vouchers {
            memo.mark(*voucher, Holders::default(), start);
        }
        assert!(memo.sold_out(vouchers[2], start).is_none(), "full: not remembered");
        let later = start + Duration::from_millis(100);
        memo.mark(vouchers[2], Holders::default(), later);
        assert!(memo.sold_out(vouchers[2], later).is_some(), "expired entries made room");
    }

    #[test]
    fn one_request_at_a_time_takes_the_snapshot() {
        let memo = SoldOutMemo::new(Duration::from_millis(500), 10);
        let (voucher, now) = (VoucherId::generate(), Instant::now());
        let first = memo.begin_snapshot(voucher, now).expect("first");
        assert!(memo.begin_snapshot(voucher, now).is_none(), "taken by the first");
        drop(first);
        let again = memo.begin_snapshot(voucher, now).expect("released");
        memo.mark(voucher, Holders::default(), now);
        drop(again);
        assert!(memo.begin_snapshot(voucher, now).is_none(), "already remembered");
    }

    #[test]
    fn a_zero_lifetime_disables_it() {
        let memo = SoldOutMemo::new(Duration::ZERO, 10);
        let (voucher, now) = (VoucherId::generate(), Instant::now());
        memo.mark(voucher, Holders::default(), now);
        assert!(memo.sold_out(voucher, now).is_none());
    }
}
