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
use tokio::sync::Mutex;

use crate::layout::Layout;
use crate::transfers::Borrowed;
use crate::Gate;

/// Stripes of buckets, each with its own turn (collisions only make two
/// buckets take turns together).
const STRIPES: usize = 256;

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
    /// read before trying the bucket, handed to [`Gate::borrow_once`].
    pub(crate) fn epoch(&self, voucher: VoucherId, bucket: u32) -> u64 {
        self.stripe(voucher, bucket).epoch.load(Ordering::Acquire)
    }
}

impl Gate {
    /// Borrows units for bucket `to` of `layout` after it was found without
    /// `quantity`, once this process's other borrowers of that bucket are
    /// done. `seen` is the bucket's epoch read before it was tried: if a
    /// borrow finished since, its units may be there now (answer: try
    /// again), or it found the voucher dry (answer: dry, when it had fewer
    /// than `quantity`).
    pub(crate) async fn borrow_once(
        &self,
        layout: &Layout,
        to: u32,
        quantity: u64,
        seen: u64,
    ) -> redis::RedisResult<Borrowed> {
        let voucher = layout.voucher();
        let stripe = self.borrowers.stripe(voucher, to);
        let mut last = stripe.last.lock().await;
        // What the last borrow found, if it was for this bucket: a borrow
        // for another bucket of the stripe says nothing of this one, so
        // this request, holding the turn now, borrows itself.
        let mine = last.filter(|last| last.voucher == voucher && last.bucket == to).map(|last| last.found);
        if let (true, Some(found)) = (stripe.epoch.load(Ordering::Acquire) != seen, mine) {
            return Ok(match found {
                Borrowed::Dry { available } if available < quantity => Borrowed::Dry { available },
                Borrowed::Dry { available } | Borrowed::Moved { available } => Borrowed::Moved { available },
            });
        }
        let borrowed = self.borrow(layout, to, quantity).await;
        *last = borrowed.as_ref().ok().map(|found| LastBorrow { voucher, bucket: to, found: *found });
        stripe.epoch.fetch_add(1, Ordering::AcqRel);
        borrowed
    }
}
