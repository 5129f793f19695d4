//! A waiting room as the log tells it, for rebuilding a room Redis lost
//! before it revealed its shuffle (`crate::Gate::restore`): who took a
//! place before the start (the pre-queue), who took one after it with
//! which seq, and whether the room revealed its seed.
//!
//! Folded like the rest of the [`crate::Ledger`]: records in any order and
//! any number of times.

use std::collections::{BTreeMap, BTreeSet};

use seckill_core::event::Event;
use seckill_core::UserId;

/// One waiting room's records, folded.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RoomHistory {
    /// The users who joined before the start (first places only: a place
    /// is taken again only after one was passed, after the reveal).
    pub pre_queue: BTreeSet<UserId>,
    /// The joins after the start by seq (the first user logged with each).
    pub after_start: BTreeMap<u64, UserId>,
    /// The seed (or the beacon's round) was revealed: the room served.
    pub revealed: bool,
}

impl RoomHistory {
    /// Takes one record into account (others change nothing).
    pub(crate) fn apply(&mut self, event: &Event) {
        match event {
            Event::QueueJoined(joined) if joined.attempt == 1 && joined.pre_queue => {
                self.pre_queue.insert(joined.user_id.clone());
            }
            Event::QueueJoined(joined) if joined.attempt == 1 => {
                if let Some(seq) = joined.seq {
                    self.after_start.entry(seq).or_insert_with(|| joined.user_id.clone());
                }
            }
            Event::QueueSeedRevealed(_) => self.revealed = true,
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
