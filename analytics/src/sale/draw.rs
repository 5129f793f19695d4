//! A draw sale as the log tells it: the seed's commitments, the entries,
//! the reveal, the logged ranking, the winners chosen and promoted, and
//! the wins spent on orders, with where each record first appeared on the
//! sales topic.
//!
//! The draw's records of one voucher are written by Redis scripts into one
//! outbox stream and relayed in order, at least once: a record may come
//! twice, under its one event id. So entries are kept by `seq` and ranking
//! chunks by `chunk` (their natural keys), everything else by event id, each
//! at its first (lowest) position. Two records under one key that say
//! different things are not a redelivery: they are kept aside as conflicts
//! (the one at the lower position is the one kept), so that a doctored copy
//! of the log cannot hide behind the record it replaced.
//!
//! What the records must satisfy is checked in [`crate::draw`].

use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet};

use seckill_core::event::{
    DrawEntered, DrawRanked, DrawSeedCommitted, DrawSeedRevealed, DrawWinUsed, DrawWinnerPromoted, DrawWinnersSelected,
};
use seckill_core::ids::UserId;
use seckill_core::{Envelope, Event};
use uuid::Uuid;

use super::position::Position;
use super::queue::{in_log_order, Logged};

/// Every record of one voucher's draw.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DrawLog {
    pub commitments: BTreeMap<Uuid, Logged<DrawSeedCommitted>>,
    /// `DrawEntered` by `seq`.
    pub entries: BTreeMap<u64, Logged<DrawEntered>>,
    /// Normally one; more (under other event ids) only in a broken log.
    pub reveals: BTreeMap<Uuid, Logged<DrawSeedRevealed>>,
    /// `DrawRanked` by `chunk`.
    pub ranked: BTreeMap<u64, Logged<DrawRanked>>,
    /// Normally one.
    pub selections: BTreeMap<Uuid, Logged<DrawWinnersSelected>>,
    pub promotions: BTreeMap<Uuid, Logged<DrawWinnerPromoted>>,
    pub wins_used: BTreeMap<Uuid, Logged<DrawWinUsed>>,
    /// Seqs claimed by more than one user, with every user claiming them.
    pub seq_conflicts: BTreeMap<u64, BTreeSet<UserId>>,
    /// Chunks logged twice with different contents.
    pub chunk_conflicts: BTreeSet<u64>,
    /// Other records whose copies under one event id differ, by type.
    pub altered: BTreeMap<&'static str, BTreeSet<Uuid>>,
}

impl DrawLog {
    /// Takes one record of the draw into account; other events are
    /// ignored. The order of calls does not matter.
    pub fn apply(&mut self, envelope: &Envelope, position: Position) {
        let (id, kind) = (envelope.event_id, envelope.kind());
        match &envelope.event {
            Event::DrawSeedCommitted(c) => {
                let incoming = logged(envelope, position, c.clone());
                self.by_id(kind, id, incoming, |log| &mut log.commitments);
            }
            Event::DrawEntered(e) => {
                let incoming = logged(envelope, position, e.clone());
                if let Some((kept, other)) = keep(&mut self.entries, e.seq, incoming) {
                    let users = self.seq_conflicts.entry(e.seq).or_default();
                    users.insert(kept.user_id);
                    users.insert(other.user_id);
                }
            }
            Event::DrawSeedRevealed(r) => {
                let incoming = logged(envelope, position, r.clone());
                self.by_id(kind, id, incoming, |log| &mut log.reveals);
            }
            Event::DrawRanked(r) => {
                let incoming = logged(envelope, position, r.clone());
                if keep(&mut self.ranked, r.chunk, incoming).is_some() {
                    self.chunk_conflicts.insert(r.chunk);
                }
            }
            Event::DrawWinnersSelected(s) => {
                let incoming = logged(envelope, position, s.clone());
                self.by_id(kind, id, incoming, |log| &mut log.selections);
            }
            Event::DrawWinnerPromoted(p) => {
                let incoming = logged(envelope, position, p.clone());
                self.by_id(kind, id, incoming, |log| &mut log.promotions);
            }
            Event::DrawWinUsed(u) => {
                let incoming = logged(envelope, position, u.clone());
                self.by_id(kind, id, incoming, |log| &mut log.wins_used);
            }
            _ => {}
        }
    }

    /// Keeps a record by its event id, noting a copy that differs.
    fn by_id<T: Clone + PartialEq>(
        &mut self,
        kind: &'static str,
        id: Uuid,
        incoming: Logged<T>,
        map: impl FnOnce(&mut Self) -> &mut BTreeMap<Uuid, Logged<T>>,
    ) {
        if keep(map(self), id, incoming).is_some() {
            self.altered.entry(kind).or_default().insert(id);
        }
    }

    /// Whether the log holds no record of a draw.
    pub fn is_empty(&self) -> bool {
        self.commitments.is_empty()
            && self.entries.is_empty()
            && self.reveals.is_empty()
            && self.ranked.is_empty()
            && self.selections.is_empty()
            && self.promotions.is_empty()
            && self.wins_used.is_empty()
    }

    /// The commitments in log order.
    pub fn commitments(&self) -> Vec<&Logged<DrawSeedCommitted>> {
        in_log_order(&self.commitments)
    }

    /// The first reveal on the topic.
    pub fn reveal(&self) -> Option<&Logged<DrawSeedRevealed>> {
        in_log_order(&self.reveals).into_iter().next()
    }

    /// Whether every reveal names the same seed, count and hash.
    pub fn reveals_agree(&self) -> bool {
        let mut reveals = self.reveals.values().map(|reveal| &reveal.record);
        let first = reveals.next();
        reveals.all(|other| Some(other) == first)
    }

    /// The first selection of winners on the topic.
    pub fn selection(&self) -> Option<&Logged<DrawWinnersSelected>> {
        in_log_order(&self.selections).into_iter().next()
    }

    /// The promotions in log order (several relays may publish them out of
    /// the order they were made in: their ranks and times say that).
    pub fn promotions(&self) -> Vec<&Logged<DrawWinnerPromoted>> {
        in_log_order(&self.promotions)
    }

    /// The entrants with `seq` 1..=`through`, in seq order (a seq missing
    /// from the log is skipped).
    pub fn entrants(&self, through: u64) -> Vec<UserId> {
        self.entries.range(1..=through).map(|(_, entry)| entry.record.user_id.clone()).collect()
    }

    /// Copies under one event id that differ, of the given types.
    pub fn altered_of(&self, kinds: &[&str]) -> u64 {
        kinds.iter().filter_map(|kind| self.altered.get(kind)).map(|ids| ids.len() as u64).sum()
    }
}

/// A record as first seen at `position`.
fn logged<T>(envelope: &Envelope, position: Position, record: T) -> Logged<T> {
    Logged { position, emitted_at: envelope.emitted_at, record }
}

/// Adds `incoming` under `key`, keeping the record at the lower position.
/// Returns both records' contents when they differ (a conflict, not a
/// redelivery).
fn keep<K: Ord, T: Clone + PartialEq>(map: &mut BTreeMap<K, Logged<T>>, key: K, incoming: Logged<T>) -> Option<(T, T)> {
    match map.entry(key) {
        Entry::Vacant(vacant) => {
            vacant.insert(incoming);
            None
        }
        Entry::Occupied(mut occupied) => {
            let kept = occupied.get_mut();
            let conflict = (kept.record != incoming.record).then(|| (kept.record.clone(), incoming.record.clone()));
            if incoming.position < kept.position {
                *kept = incoming;
            }
            conflict
        }
    }
}

#[cfg(test)]
mod tests {
    use seckill_core::event::Event;
    use seckill_core::ids::UserId;
    use seckill_core::Envelope;

    use super::DrawLog;
    use crate::sale::draw_script::{draw_sale, ENTRIES, PROMOTED, STOCK};
    use crate::sale::Position;

    #[test]
    fn the_fold_keeps_each_record_once_at_its_first_position() {
        let mut sale = draw_sale().script;
        let before = sale.log.draw.clone();
        for (envelope, orders_topic) in sale.records.clone() {
            sale.put(&envelope, orders_topic);
        }
        assert_eq!(sale.log.draw, before, "a redelivery is the same record, where it was first");
        let draw = &sale.log.draw;
        assert_eq!((draw.commitments.len(), draw.entries.len(), draw.reveals.len()), (1, ENTRIES as usize, 1));
        assert_eq!((draw.ranked.len(), draw.selections.len(), draw.promotions.len()), (4, 1, PROMOTED as usize));
        assert_eq!(draw.wins_used.len(), 19);
        assert_eq!(draw.selection().expect("selected").record.winners, STOCK);
        assert!(draw.seq_conflicts.is_empty() && draw.chunk_conflicts.is_empty() && draw.altered.is_empty());
    }

    #[test]
    fn a_second_record_saying_something_else_is_a_conflict_whatever_the_order() {
        let sale = draw_sale().script;
        let mut records: Vec<(Envelope, Position)> = sale
            .records
            .iter()
            .zip(0i64..)
            .map(|((envelope, orders_topic), offset)| {
                (envelope.clone(), Position { partition: i32::from(*orders_topic), offset })
            })
            .collect();
        let mut changed = records
            .iter()
            .find(|(envelope, _)| matches!(envelope.event, Event::DrawEntered(_)))
            .map(|(envelope, _)| envelope.clone())
            .expect("an entry");
        if let Event::DrawEntered(entry) = &mut changed.event {
            entry.user_id = UserId::parse("mallory").expect("valid");
        }
        // The doctored copy comes later on the topic; the original is kept
        // and the seq is in conflict, whichever is folded first.
        records.push((changed, Position { partition: 0, offset: i64::MAX }));
        let fold = |records: &mut dyn Iterator<Item = &(Envelope, Position)>| {
            let mut draw = DrawLog::default();
            records.for_each(|(envelope, position)| draw.apply(envelope, *position));
            draw
        };
        let forward = fold(&mut records.iter());
        let backward = fold(&mut records.iter().rev());
        assert_eq!(forward, backward);
        assert_eq!(forward.seq_conflicts.len(), 1);
        let kept = &forward.entries[&1].record.user_id;
        assert_ne!(kept.as_str(), "mallory", "the record first on the topic is kept");
        assert!(forward.seq_conflicts[&1].contains(kept));
    }
}
