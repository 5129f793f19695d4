//! A waiting room as the log tells it, for rebuilding a room Redis lost
//! (`crate::Gate::restore`): the seed's commitments, who took a place
//! before the start (the pre-queue), who took one after it with which seq
//! (again, after a place was passed), the reveal, the entries issued, spent
//! and lapsed, the places skipped, and the stalls that lengthened the entry
//! tokens (`WindowsExtended`). A commitment that holds its seed sealed under
//! the operator's key (`seckill_core::sealed_seed`) gives it back to whoever
//! holds the key ([`RoomHistory::open_sealed_seed`]).
//!
//! Folded like the rest of the [`crate::Ledger`]: records in any order and
//! any number of times.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use seckill_core::event::{Event, QueueEntryIssued, QueueSeedRevealed};
use seckill_core::{OrderId, UserId, VoucherId};
use uuid::Uuid;

use crate::seed_commitments::SeedCommitments;

/// One waiting room's records, folded.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RoomHistory {
    /// The seed's commitments, and its seed once opened from one.
    commitments: SeedCommitments,
    /// The users who joined before the start (first places only: a place
    /// is taken again only after one was passed, after the reveal).
    pub pre_queue: BTreeSet<UserId>,
    /// The joins after the start by seq (the first user logged with each).
    pub after_start: BTreeMap<u64, UserId>,
    /// The places taken again after one was passed, by seq: the user and
    /// the attempt.
    pub retaken: BTreeMap<u64, (UserId, u32)>,
    /// The seed (or the beacon's round) was revealed: the room served.
    pub revealed: bool,
    /// The reveal (the first logged).
    pub reveal: Option<QueueSeedRevealed>,
    /// The entries issued, by entry number.
    pub issued: BTreeMap<u64, QueueEntryIssued>,
    /// The places skipped because their holder had gone, by place.
    pub skipped: BTreeMap<u64, UserId>,
    /// The entries spent, by entry number: the order each admitted.
    pub used: BTreeMap<u64, OrderId>,
    /// The logged stalls (from, until): each moves the end of every entry
    /// token open at its start.
    pub stalls: BTreeSet<(DateTime<Utc>, DateTime<Utc>)>,
}

impl RoomHistory {
    /// Takes one record into account (others change nothing).
    pub(crate) fn apply(&mut self, event_id: Uuid, event: &Event) {
        match event {
            Event::QueueSeedCommitted(commitment) => {
                self.commitments.record(event_id, &commitment.seed_hash, commitment.sealed_seed.as_ref());
            }
            Event::QueueJoined(joined) if joined.attempt == 1 && joined.pre_queue => {
                self.pre_queue.insert(joined.user_id.clone());
            }
            Event::QueueJoined(joined) => {
                if let Some(seq) = joined.seq {
                    if joined.attempt == 1 {
                        self.after_start.entry(seq).or_insert_with(|| joined.user_id.clone());
                    } else {
                        self.retaken.entry(seq).or_insert_with(|| (joined.user_id.clone(), joined.attempt));
                    }
                }
            }
            Event::QueueSeedRevealed(reveal) => {
                self.revealed = true;
                self.reveal.get_or_insert_with(|| reveal.clone());
            }
            Event::QueueEntryIssued(issued) => {
                self.issued.entry(issued.entry).or_insert_with(|| issued.clone());
            }
            Event::QueuePlaceExpired(expired) => {
                self.skipped.entry(expired.place).or_insert_with(|| expired.user_id.clone());
            }
            Event::QueueEntryUsed(used) => {
                self.used.entry(used.entry).or_insert(used.order_id);
            }
            Event::WindowsExtended(stall) if stall.until > stall.from => {
                self.stalls.insert((stall.from, stall.until));
            }
            _ => {}
        }
    }

    /// Opens the newest commitment's sealed seed with `key`; whether it did
    /// (a seed whose SHA-256 is the commitment).
    pub fn open_sealed_seed(&mut self, voucher: VoucherId, key: &[u8]) -> bool {
        self.commitments.open(voucher, key)
    }

    /// The secret seed before its reveal, when it was opened.
    pub fn opened_seed(&self) -> Option<&str> {
        self.commitments.opened()
    }

    /// Whether the newest commitment holds its seed sealed.
    pub fn sealed(&self) -> bool {
        self.commitments.newest_sealed()
    }

    /// Whether a key was tried on the seal.
    pub fn key_tried(&self) -> bool {
        self.commitments.key_tried()
    }
}

#[cfg(test)]
mod tests {
    use chrono::Utc;
    use seckill_core::event::{QueueJoined, QueueSeedRevealed};
    use seckill_core::VoucherId;

    use super::*;

    fn joined(voucher: VoucherId, user: &str, pre_queue: bool, seq: Option<u64>, attempt: u32) -> Event {
        Event::QueueJoined(QueueJoined {
            voucher_id: voucher,
            user_id: UserId::parse(user).expect("valid"),
            joined_at: Utc::now(),
            pre_queue,
            seq,
            attempt,
        })
    }

    #[test]
    fn places_are_folded_once_in_any_order() {
        let voucher = VoucherId::generate();
        let records = [
            joined(voucher, "late", false, Some(2), 1),
            joined(voucher, "b", true, None, 1),
            joined(voucher, "a", true, None, 1),
            joined(voucher, "b", true, None, 1),
            joined(voucher, "first", false, Some(1), 1),
            joined(voucher, "a", false, Some(3), 2),
        ];
        let mut history = RoomHistory::default();
        records.iter().for_each(|record| history.apply(Uuid::now_v7(), record));
        let pre: Vec<&str> = history.pre_queue.iter().map(UserId::as_str).collect();
        assert_eq!(pre, ["a", "b"]);
        let after: Vec<&str> = history.after_start.values().map(UserId::as_str).collect();
        assert_eq!(after, ["first", "late"], "a second place is not a join");
        assert_eq!(history.retaken.get(&3), Some(&(UserId::parse("a").expect("valid"), 2)), "it is a place retaken");
        assert!(!history.revealed);
        history.apply(
            Uuid::now_v7(),
            &Event::QueueSeedRevealed(QueueSeedRevealed {
                voucher_id: voucher,
                seed: "s".repeat(64),
                pre_queued: 2,
                beacon: None,
                entries_hash: None,
            }),
        );
        assert!(history.revealed);
    }

    #[test]
    fn the_newest_commitments_sealed_seed_opens_with_the_key() {
        use seckill_core::event::QueueSeedCommitted;
        use seckill_core::{queue, sealed_seed};

        let voucher = VoucherId::generate();
        let key = b"the operator's key, 32 characters".as_slice();
        let (old, new) = (queue::new_seed(), queue::new_seed());
        let committed = |seed: &str, sealed: bool| {
            Event::QueueSeedCommitted(QueueSeedCommitted {
                voucher_id: voucher,
                seed_hash: queue::seed_commitment(seed),
                sealed_seed: sealed.then(|| sealed_seed::seal(key, voucher, seed).expect("a seed")),
            })
        };
        let mut history = RoomHistory::default();
        history.apply(Uuid::now_v7(), &committed(&old, true));
        let newest = Uuid::now_v7();
        history.apply(newest, &committed(&new, false));
        assert!(!history.sealed(), "the newest commitment is not sealed");
        assert!(!history.key_tried());
        assert!(!history.open_sealed_seed(voucher, key), "an older seal does not stand for the newest");
        assert!(history.key_tried());
        history.apply(newest, &committed(&new, true));
        assert!(history.sealed());
        assert!(!history.open_sealed_seed(voucher, b"another key"));
        assert_eq!(history.opened_seed(), None);
        assert!(history.open_sealed_seed(voucher, key));
        assert_eq!(history.opened_seed(), Some(new.as_str()));
    }
}
