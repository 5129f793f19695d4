//! One borrower at a time per bucket in a process.
//!
//! When a bucket runs dry, every request homed to it finds it dry at about
//! the same moment. Were each of them to borrow, each would read every
//! bucket, recover the others' transfers and race for the same units: on a
//! sale's last units, hundreds of requests making dozens of calls each, for
//! units one of them could have moved. Instead the requests of a process
//! that find the same bucket dry take turns (a lock per stripe of buckets,
//! a fixed number of stripes, so memory is bounded): the first borrows,
//! and a request whose turn comes after a borrow it did not see simply
//! tries its bucket again, or is told what that borrow found when it found
//! the voucher dry. Other processes borrow on their own; the transfers are
//! exactly-once whoever runs them. Buckets of other vouchers may share a
//! stripe: what a borrow found is kept with the (voucher, bucket) it was
//! for and only ever told to requests for that bucket; a request whose turn
//! comes after another bucket's borrow borrows itself.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};

use seckill_core::VoucherId;
use tokio::sync::{Mutex, MutexGuard};

/// Stripes of buckets, each with its own turn (collisions only make two
/// buckets take turns together).
const STRIPES: usize = 256;

/// What a borrower found and did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Borrowed {
    /// Units were moved to the borrower's bucket (or may have been, by a
    /// transfer completed on the way): try again. `available` is what every
    /// bucket had together at the look.
    Moved { available: u64 },
    /// Not enough in every bucket together; `available` is what there is.
    Dry { available: u64 },
}

/// What the last borrow in a stripe found, and for which bucket.
#[derive(Clone, Copy, Debug)]
struct LastBorrow {
    voucher: VoucherId,
    bucket: u32,
    found: Borrowed,
}

#[derive(Debug, Default)]
struct Stripe {
    /// Borrows finished in this stripe; read without waiting for the turn.
    epoch: AtomicU64,
    /// The turn, and what the last borrow found.
    last: Mutex<Option<LastBorrow>>,
}

/// The turns of every bucket borrowing in this process.
#[derive(Debug)]
pub(crate) struct Borrowers {
    stripes: Vec<Stripe>,
}

impl Default for Borrowers {
    fn default() -> Self {
        Self::with_stripes(STRIPES)
    }
}

/// One bucket's turn to borrow, held until it is finished or dropped.
pub(crate) struct Turn<'a> {
    stripe: &'a Stripe,
    last: MutexGuard<'a, Option<LastBorrow>>,
    voucher: VoucherId,
    bucket: u32,
}

impl Borrowers {
    /// `stripes` turns (at least one) shared by every bucket.
    pub(crate) fn with_stripes(stripes: usize) -> Self {
        Self { stripes: (0..stripes.max(1)).map(|_| Stripe::default()).collect() }
    }

    fn stripe(&self, voucher: VoucherId, bucket: u32) -> &Stripe {
        let mut hasher = DefaultHasher::new();
        (voucher, bucket).hash(&mut hasher);
        &self.stripes[usize::try_from(hasher.finish() % self.stripes.len() as u64).unwrap_or(0)]
    }

    /// How many borrows `bucket` of `voucher` (and its stripe) has seen:
    /// read before trying the bucket, handed to [`Turn::found_since`].
    pub(crate) fn epoch(&self, voucher: VoucherId, bucket: u32) -> u64 {
        self.stripe(voucher, bucket).epoch.load(Ordering::Acquire)
    }

    /// Waits for `bucket` of `voucher`'s turn to borrow.
    pub(crate) async fn turn(&self, voucher: VoucherId, bucket: u32) -> Turn<'_> {
        let stripe = self.stripe(voucher, bucket);
        Turn { stripe, last: stripe.last.lock().await, voucher, bucket }
    }
}

impl Turn<'_> {
    /// What a borrow for this bucket that finished since `seen` (an
    /// [`Borrowers::epoch`]) found; None when none did, or when the last
    /// borrow of the stripe was another bucket's (it says nothing of this
    /// one: this request, holding the turn, borrows itself).
    pub(crate) fn found_since(&self, seen: u64) -> Option<Borrowed> {
        if self.stripe.epoch.load(Ordering::Acquire) == seen {
            return None;
        }
        self.last.filter(|last| last.voucher == self.voucher && last.bucket == self.bucket).map(|last| last.found)
    }

    /// Records what this turn's borrow found (None: it failed) and ends the
    /// turn.
    pub(crate) fn finish(mut self, found: Option<Borrowed>) {
        *self.last = found.map(|found| LastBorrow { voucher: self.voucher, bucket: self.bucket, found });
        self.stripe.epoch.fetch_add(1, Ordering::AcqRel);
    }
}
