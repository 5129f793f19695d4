//! Where a voucher's stock lives: its buckets, their hash tags, and which
//! bucket each user belongs to.
//!
//! A voucher created with `shards: K` is admitted by K buckets, each a
//! complete admission unit (its own voucher hash, holders, retries,
//! admitted and released sets, journal of transfers and, on a cluster, its
//! own outbox) under a hash tag of its own, so each bucket is one Redis
//! Cluster slot and the K buckets spread over the masters. Bucket 0 has the
//! tag of an unsplit voucher, `{v:<id>}`: a voucher with one bucket is laid
//! out exactly as before buckets existed.
//!
//! **Tags.** Bucket `b > 0` is tagged `{v:<id>:<b>:<n>}` with the smallest
//! `n` whose slot falls just after the point `b/K` of the way round the
//! slot space from bucket 0's slot (within a quarter of a K-th of it): the
//! buckets sit at even intervals. On a cluster whose masters own contiguous
//! ranges (as `redis-cli --cluster create` assigns them) the buckets are
//! then spread evenly over the masters instead of wherever CRC16 drops
//! them. The tags follow from the voucher id and K alone: every process
//! computes the same ones, and nothing is stored.
//!
//! **Homes.** A user belongs to bucket `fnv1a64(user id) mod K`. Every
//! order, retry, settlement and release of a user goes to that one bucket,
//! so the per-user limit is checked where all of the user's units are
//! counted, in one script, without cross-slot work.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use seckill_core::{UserId, VoucherId};

use crate::keys::{voucher_tag, VoucherKeys};

/// Redis Cluster's number of hash slots.
const SLOTS: u32 = 16_384;
/// Most candidate tags tried per bucket before taking the first one (each
/// hits with a chance of at least 1 in 256; needing more has a chance below
/// 2^-90).
const TAG_ATTEMPTS: u32 = 16_384;
/// Most vouchers whose layout a process remembers (about 100 bytes each
/// plus the tags); past it the memory starts over.
const LAYOUT_CAPACITY: usize = 100_000;

/// One voucher's buckets.
#[derive(Clone, Debug)]
pub struct Layout {
    voucher: VoucherId,
    /// The hash tag of each bucket, bucket 0 first (without braces).
    tags: Vec<String>,
    /// Each bucket's keys under the prefix first asked for, made once: an
    /// admission names ten of a bucket's keys, and writing out all twenty
    /// for every call was a tenth of the ingress's request handling.
    keys: OnceLock<(String, Box<[Arc<VoucherKeys>]>)>,
}

impl PartialEq for Layout {
    fn eq(&self, other: &Self) -> bool {
        self.voucher == other.voucher && self.tags == other.tags
    }
}

impl Eq for Layout {}

impl Layout {
    /// The buckets of `voucher` split `shards` ways (at least one).
    pub fn new(voucher: VoucherId, shards: u32) -> Self {
        let shards = shards.max(1);
        let first = voucher_tag(voucher);
        let first_slot = u32::from(slot(first.as_bytes()));
        let mut tags = vec![first];
        for bucket in 1..shards {
            let width = (SLOTS / (4 * shards)).max(1);
            let start = (first_slot + bucket * SLOTS / shards) % SLOTS;
            let within = |candidate: &str| (u32::from(slot(candidate.as_bytes())) + SLOTS - start) % SLOTS < width;
            let tag = (0..TAG_ATTEMPTS)
                .map(|n| format!("v:{voucher}:{bucket}:{n}"))
                .find(|candidate| within(candidate))
                .unwrap_or_else(|| format!("v:{voucher}:{bucket}:0"));
            tags.push(tag);
        }
        Self { voucher, tags, keys: OnceLock::new() }
    }

    pub fn voucher(&self) -> VoucherId {
        self.voucher
    }

    /// How many buckets.
    pub fn shards(&self) -> u32 {
        u32::try_from(self.tags.len()).unwrap_or(u32::MAX)
    }

    /// The bucket `user` belongs to.
    pub fn home(&self, user: &UserId) -> u32 {
        home_bucket(user, self.shards())
    }

    /// The keys of `bucket` under `prefix` (bucket 0's for a bucket this
    /// voucher does not have).
    pub fn keys(&self, prefix: &str, bucket: u32) -> Arc<VoucherKeys> {
        let (known_prefix, known) = self.keys.get_or_init(|| {
            let keys = self.tags.iter().map(|tag| Arc::new(VoucherKeys::tagged(prefix, tag))).collect();
            (prefix.to_owned(), keys)
        });
        let index = if (bucket as usize) < self.tags.len() { bucket as usize } else { 0 };
        if known_prefix == prefix {
            Arc::clone(&known[index])
        } else {
            // A gate has one prefix; another is only ever a test's.
            Arc::new(VoucherKeys::tagged(prefix, &self.tags[index]))
        }
    }

    /// The keys of every bucket, bucket 0 first.
    pub fn all_keys(&self, prefix: &str) -> Vec<VoucherKeys> {
        self.tags.iter().map(|tag| VoucherKeys::tagged(prefix, tag)).collect()
    }

    /// The Redis Cluster slot of `bucket`.
    pub fn slot(&self, bucket: u32) -> u16 {
        slot(self.tags.get(bucket as usize).unwrap_or(&self.tags[0]).as_bytes())
    }
}

/// The bucket of `user` among `shards`: FNV-1a (64 bits) of the user id,
/// modulo the number of buckets. Stable across processes, builds and
/// platforms.
pub fn home_bucket(user: &UserId, shards: u32) -> u32 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in user.as_str().bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    u32::try_from(hash % u64::from(shards.max(1))).unwrap_or(0)
}

/// `share` of `total` units split `shards` ways: every bucket gets the
/// quotient, the first `total mod shards` one more.
pub fn share(total: u64, shards: u32, bucket: u32) -> u64 {
    let shards = u64::from(shards.max(1));
    total / shards + u64::from(u64::from(bucket) < total % shards)
}

/// The hash slot of a hash tag's content (CRC16/XMODEM modulo 16384), as
/// Redis Cluster computes it.
pub fn slot(tag: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &byte in tag {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 { (crc << 1) ^ 0x1021 } else { crc << 1 };
        }
    }
    crc % SLOTS as u16
}

/// The layouts this process has learned (a voucher's buckets never change,
/// so what is remembered stays true), bounded.
#[derive(Debug, Default)]
pub(crate) struct Layouts {
    known: Mutex<HashMap<VoucherId, Arc<Layout>>>,
}

impl Layouts {
    /// The layout of `voucher`, if known.
    pub(crate) fn get(&self, voucher: VoucherId) -> Option<Arc<Layout>> {
        self.known.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).get(&voucher).cloned()
    }

    /// Remembers that `voucher` has `shards` buckets; returns its layout.
    pub(crate) fn learn(&self, voucher: VoucherId, shards: u32) -> Arc<Layout> {
        let mut known = self.known.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(layout) = known.get(&voucher).filter(|layout| layout.shards() == shards.max(1)) {
            return Arc::clone(layout);
        }
        if known.len() >= LAYOUT_CAPACITY {
            known.clear();
        }
        let layout = Arc::new(Layout::new(voucher, shards));
        known.insert(voucher, Arc::clone(&layout));
        layout
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn slots_are_redis_clusters() {
        // Values from the Redis Cluster specification and `CLUSTER KEYSLOT`.
        assert_eq!(slot(b"123456789"), 0x31c3);
        assert_eq!(slot(b"somekey"), 11_058);
        assert_eq!(slot(b"hash_tag"), 2_515);
    }

    #[test]
    fn remembered_keys_are_each_buckets_under_the_prefix_asked_for() {
        let voucher = VoucherId::generate();
        let layout = Layout::new(voucher, 3);
        for bucket in 0..3 {
            let expected = VoucherKeys::tagged("p", &layout.tags[bucket as usize]);
            assert_eq!(*layout.keys("p", bucket), expected);
            assert_eq!(*layout.keys("p", bucket), expected, "asked again");
        }
        assert_eq!(*layout.keys("p", 7), *layout.keys("p", 0), "a bucket it does not have is bucket 0");
        assert_eq!(*layout.keys("q", 2), VoucherKeys::tagged("q", &layout.tags[2]), "another prefix");
        assert_eq!(layout, Layout::new(voucher, 3), "the memo is not part of the layout");
    }

    #[test]
    fn one_bucket_is_the_unsplit_layout() {
        let voucher = VoucherId::generate();
        let layout = Layout::new(voucher, 1);
        assert_eq!(layout.shards(), 1);
        assert_eq!(*layout.keys("p", 0), VoucherKeys::new("p", voucher));
        assert_eq!(layout.home(&UserId::parse("anyone").expect("valid")), 0);
    }

    #[test]
    fn buckets_spread_evenly_over_the_slot_space() {
        for shards in [2, 3, 8, 64] {
            let layout = Layout::new(VoucherId::generate(), shards);
            let slots: Vec<u32> = (0..shards).map(|b| u32::from(layout.slot(b))).collect();
            assert_eq!(slots.iter().collect::<HashSet<_>>().len(), shards as usize, "{slots:?}");
            // Each bucket just after its point of the ring, from bucket 0.
            let width = SLOTS / (4 * shards);
            for (bucket, slot) in slots.iter().enumerate() {
                let offset = (slot + SLOTS - slots[0]) % SLOTS;
                let start = bucket as u32 * SLOTS / shards;
                assert!(offset >= start && offset < start + width, "bucket {bucket} at {offset}, {slots:?}");
            }
            // Three masters owning thirds of the slots get ceil or floor of K/3 each.
            let mut per_master = [0u32; 3];
            for slot in &slots {
                per_master[(*slot * 3 / SLOTS) as usize] += 1;
            }
            assert!(per_master.iter().all(|n| n.abs_diff(shards / 3) <= 1), "{per_master:?} for {shards}");
        }
    }

    #[test]
    fn the_same_voucher_gets_the_same_tags_and_homes_everywhere() {
        let voucher = VoucherId::generate();
        assert_eq!(Layout::new(voucher, 8), Layout::new(voucher, 8));
        let user = UserId::parse("alice").expect("valid");
        // FNV-1a 64 of "alice" is 0x508b2abb65a03907.
        assert_eq!(home_bucket(&user, 8), (0x508b_2abb_65a0_3907_u64 % 8) as u32);
        let homes: HashSet<u32> =
            (0..1_000).map(|i| home_bucket(&UserId::parse(&format!("u{i}")).expect("valid"), 8)).collect();
        assert_eq!(homes.len(), 8, "a thousand users reach every bucket");
    }

    #[test]
    fn shares_add_up_to_the_total() {
        for (total, shards) in [(0, 8), (7, 8), (1_000, 8), (1_001, 3), (5, 1)] {
            let shares: Vec<u64> = (0..shards).map(|b| share(total, shards, b)).collect();
            assert_eq!(shares.iter().sum::<u64>(), total);
            assert!(shares.iter().max().unwrap_or(&0) - shares.iter().min().unwrap_or(&0) <= 1);
        }
    }
}
