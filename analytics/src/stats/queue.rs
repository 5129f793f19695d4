//! Waiting-room counters for `stats`: per queue-mode voucher, places taken
//! (and how many before the start), places served and skipped, entries
//! spent. Kept apart from [`super::VoucherStats`], whose fields are the
//! `--json` output's and a fixed table's columns: callers that want the
//! room ask [`super::Stats::queues`].
//!
//! Records are counted by event id (entries spent by entry number), so a
//! redelivered record counts once, and the order of records does not
//! matter.

use std::collections::{HashMap, HashSet};

use seckill_core::ids::VoucherId;
use seckill_core::{Envelope, Event};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// One queue-mode voucher's waiting room, counted from the log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueStats {
    pub voucher_id: VoucherId,
    /// Places taken (`QueueJoined`), before and after the start.
    pub joined: u64,
    /// Of which before the start: the shuffled pre-queue.
    pub joined_pre_queue: u64,
    /// Places served an entry (`QueueEntryIssued`).
    pub served: u64,
    /// Places skipped because their holder had gone (`QueuePlaceExpired`).
    pub expired: u64,
    /// Distinct entries spent on an order (`QueueEntryUsed`).
    pub entries_used: u64,
}

/// What has been seen of one room.
#[derive(Debug, Default)]
pub(super) struct Room {
    /// Join event ids, and whether each was before the start.
    joins: HashMap<Uuid, bool>,
    served: HashSet<Uuid>,
    expired: HashSet<Uuid>,
    entries_used: HashSet<u64>,
}

impl Room {
    /// Takes one record of the room into account (others change nothing).
    pub(super) fn apply(&mut self, envelope: &Envelope) {
        let id = envelope.event_id;
        match &envelope.event {
            Event::QueueJoined(join) => {
                self.joins.insert(id, join.pre_queue);
            }
            Event::QueueEntryIssued(_) => {
                self.served.insert(id);
            }
            Event::QueuePlaceExpired(_) => {
                self.expired.insert(id);
            }
            Event::QueueEntryUsed(used) => {
                self.entries_used.insert(used.entry);
            }
            _ => {}
        }
    }

    pub(super) fn summarise(&self, voucher_id: VoucherId) -> QueueStats {
        QueueStats {
            voucher_id,
            joined: self.joins.len() as u64,
            joined_pre_queue: self.joins.values().filter(|pre_queue| **pre_queue).count() as u64,
            served: self.served.len() as u64,
            expired: self.expired.len() as u64,
            entries_used: self.entries_used.len() as u64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sale::queue_script::queue_sale;
    use crate::sale::script::busy_sale;
    use crate::stats::Stats;

    #[test]
    fn rooms_are_counted_once_per_record_and_only_for_queue_sales() {
        let sale = queue_sale();
        let busy = busy_sale();
        let mut stats = Stats::new();
        // Everything delivered twice, the second time backwards.
        let records = sale.records.iter().chain(sale.records.iter().rev()).chain(&busy.records);
        records.for_each(|(envelope, _)| stats.apply(envelope));
        let expected = QueueStats {
            voucher_id: sale.voucher,
            joined: 23,
            joined_pre_queue: 20,
            served: 21,
            expired: 2,
            entries_used: 19,
        };
        assert_eq!(stats.queues(), [expected]);
        assert_eq!(stats.finish().len(), 2, "the voucher stats are unchanged");
    }
}
