//! A waiting room as the log tells it, for rebuilding a room Redis lost
//! (`crate::Gate::restore`): who took a place before the start (the
//! pre-queue), who took one after it with which seq (again, after a place
//! was passed), the reveal, the entries issued, spent and lapsed, the places
//! skipped, and the stalls that lengthened the entry tokens
//! (`WindowsExtended`).
//!
//! Folded like the rest of the [`crate::Ledger`]: records in any order and
//! any number of times.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use seckill_core::event::{Event, QueueEntryIssued, QueueSeedRevealed};
use seckill_core::{OrderId, UserId};

/// One waiting room's records, folded.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RoomHistory {
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
    pub(crate) fn apply(&mut self, event: &Event) {
        match event {
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
        records.iter().for_each(|record| history.apply(record));
        let pre: Vec<&str> = history.pre_queue.iter().map(UserId::as_str).collect();
        assert_eq!(pre, ["a", "b"]);
        let after: Vec<&str> = history.after_start.values().map(UserId::as_str).collect();
        assert_eq!(after, ["first", "late"], "a second place is not a join");
        assert_eq!(history.retaken.get(&3), Some(&(UserId::parse("a").expect("valid"), 2)), "it is a place retaken");
        assert!(!history.revealed);
        history.apply(&Event::QueueSeedRevealed(QueueSeedRevealed {
            voucher_id: voucher,
            seed: "s".repeat(64),
            pre_queued: 2,
            beacon: None,
            entries_hash: None,
        }));
        assert!(history.revealed);
    }
}
