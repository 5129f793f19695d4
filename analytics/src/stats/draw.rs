//! Draw counters for `stats`: per draw-mode voucher, entries, winners at
//! the draw, promotions and wins spent. Kept apart from
//! [`super::VoucherStats`], like the waiting rooms ([`super::QueueStats`]):
//! callers that want the draws ask [`super::Stats::draws`].
//!
//! Entries are counted by seq, promotions and wins spent by rank, so a
//! redelivered record counts once and the order of records does not
//! matter.

use std::collections::{BTreeMap, HashSet};

use seckill_core::ids::VoucherId;
use seckill_core::{Envelope, Event};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// One draw-mode voucher's draw, counted from the log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DrawStats {
    pub voucher_id: VoucherId,
    /// Distinct entries (`DrawEntered` by seq).
    pub entries: u64,
    /// Ranks that won at the draw (`DrawWinnersSelected`); `None` before
    /// it.
    pub winners: Option<u64>,
    /// Ranks that won later (`DrawWinnerPromoted`), as a unit came free.
    pub promoted: u64,
    /// Distinct wins spent on an order (`DrawWinUsed`).
    pub wins_used: u64,
}

/// What has been seen of one draw.
#[derive(Debug, Default)]
pub(super) struct Draw {
    entries: HashSet<u64>,
    /// Selections by event id: one, but a read order must not pick it.
    selections: BTreeMap<Uuid, u64>,
    promoted: HashSet<u64>,
    used: HashSet<u64>,
}

impl Draw {
    /// Takes one record of the draw into account (others change nothing).
    pub(super) fn apply(&mut self, envelope: &Envelope) {
        match &envelope.event {
            Event::DrawEntered(entered) => {
                self.entries.insert(entered.seq);
            }
            Event::DrawWinnersSelected(selected) => {
                self.selections.insert(envelope.event_id, selected.winners);
            }
            Event::DrawWinnerPromoted(promoted) => {
                self.promoted.insert(promoted.rank);
            }
            Event::DrawWinUsed(used) => {
                self.used.insert(used.rank);
            }
            _ => {}
        }
    }

    pub(super) fn summarise(&self, voucher_id: VoucherId) -> DrawStats {
        DrawStats {
            voucher_id,
            entries: self.entries.len() as u64,
            // UUIDv7 event ids: the first selection made.
            winners: self.selections.values().next().copied(),
            promoted: self.promoted.len() as u64,
            wins_used: self.used.len() as u64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sale::draw_script::{draw_sale, ENTRIES, PROMOTED, STOCK};
    use crate::sale::queue_script::queue_sale;
    use crate::stats::Stats;

    #[test]
    fn draws_are_counted_once_per_record_and_only_for_draw_sales() {
        let sale = draw_sale().script;
        let room = queue_sale();
        let mut stats = Stats::new();
        // Everything delivered twice, the second time backwards.
        let records = sale.records.iter().chain(sale.records.iter().rev()).chain(&room.records);
        records.for_each(|(envelope, _)| stats.apply(envelope));
        let expected = DrawStats {
            voucher_id: sale.voucher,
            entries: ENTRIES,
            winners: Some(STOCK),
            promoted: PROMOTED,
            wins_used: 19,
        };
        assert_eq!(stats.draws(), [expected]);
        assert_eq!(stats.queues().len(), 1, "the waiting room is counted apart");
        assert_eq!(stats.finish().len(), 2, "the voucher stats are unchanged");
    }

    #[test]
    fn a_draw_defined_and_not_drawn_yet_has_no_winners() {
        let sale = crate::sale::script::Script::drawn(5, 1);
        let mut stats = Stats::new();
        sale.records.iter().for_each(|(envelope, _)| stats.apply(envelope));
        let expected = DrawStats { voucher_id: sale.voucher, entries: 0, winners: None, promoted: 0, wins_used: 0 };
        assert_eq!(stats.draws(), [expected]);
    }
}
