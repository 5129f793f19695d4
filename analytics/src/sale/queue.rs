//! The waiting room of a queue-mode sale as the log tells it: the seed's
//! commitments, the joins, the reveal, every place passed (served or
//! skipped) and every entry spent, each record once by its event id, with
//! where it first appeared on the sales topic.
//!
//! Positions matter more than clocks here: the room's records of one
//! voucher are written by Redis scripts into one outbox stream and relayed
//! in order, so their order on the topic is the order Redis made them in,
//! and the order of `QueueEntryIssued` and `QueuePlaceExpired` is the order
//! the places were passed. A redelivered record keeps its event id and its
//! first position, so duplicates change nothing.
//!
//! [`QueueLog::holders`] recomputes who should hold each place from the
//! revealed seed and the logged joins (`seckill_core::queue`): the audit
//! compares it with who was served, the report measures the waits with it.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use seckill_core::event::{
    QueueEntryIssued, QueueEntryUsed, QueueJoined, QueuePlaceExpired, QueueSeedCommitted, QueueSeedRevealed,
};
use seckill_core::ids::UserId;
use seckill_core::{queue, Envelope, Event};
use uuid::Uuid;

use super::position::Position;

/// One record as first seen: where, when it was emitted, what it says.
#[derive(Clone, Debug, PartialEq)]
pub struct Logged<T> {
    pub position: Position,
    /// The envelope's `emitted_at`: for records of `queue_advance.lua`, the
    /// Redis clock when the place was passed.
    pub emitted_at: DateTime<Utc>,
    pub record: T,
}

/// A place whose turn came: its holder got an entry, or it was skipped.
#[derive(Clone, Debug, PartialEq)]
pub enum Pass {
    Issued(QueueEntryIssued),
    Expired(QueuePlaceExpired),
}

impl Pass {
    /// The place passed (1 is the room's first).
    pub fn place(&self) -> u64 {
        match self {
            Self::Issued(issued) => issued.place,
            Self::Expired(expired) => expired.place,
        }
    }

    /// Who held it.
    pub fn user(&self) -> &UserId {
        match self {
            Self::Issued(issued) => &issued.user_id,
            Self::Expired(expired) => &expired.user_id,
        }
    }

    /// The entry issued, when it was served.
    pub fn entry(&self) -> Option<u64> {
        match self {
            Self::Issued(issued) => Some(issued.entry),
            Self::Expired(_) => None,
        }
    }
}

/// Every record of one voucher's waiting room, each event id once.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct QueueLog {
    pub commitments: BTreeMap<Uuid, Logged<QueueSeedCommitted>>,
    pub joins: BTreeMap<Uuid, Logged<QueueJoined>>,
    /// Normally one; more (under other event ids) only in a broken log.
    pub reveals: BTreeMap<Uuid, Logged<QueueSeedRevealed>>,
    /// `QueueEntryIssued` and `QueuePlaceExpired`, see [`QueueLog::passes`]
    /// for them in serving order.
    pub passes: BTreeMap<Uuid, Logged<Pass>>,
    pub used: BTreeMap<Uuid, Logged<QueueEntryUsed>>,
}

/// Who should hold each place, recomputed from the revealed seed and the
/// logged joins.
#[derive(Clone, Debug, PartialEq)]
pub struct Holders {
    /// The pre-queue in place order: places 1..=P.
    pub pre_queue: Vec<UserId>,
    /// P as the reveal says it (the room's count when the sale began).
    pub pre_queued: u64,
    /// The joins after the start by `seq`: place P + seq. More than one
    /// user under one seq is a broken log.
    pub after_start: BTreeMap<u64, BTreeSet<UserId>>,
}

impl Holders {
    /// Who should hold `place`: `None` for a place nobody joined for, or
    /// whose seq names two users.
    pub fn at(&self, place: u64) -> Option<&UserId> {
        if place == 0 {
            return None;
        }
        if place <= self.pre_queued {
            return usize::try_from(place - 1).ok().and_then(|index| self.pre_queue.get(index));
        }
        let users = self.after_start.get(&(place - self.pre_queued))?;
        match users.len() {
            1 => users.first(),
            _ => None,
        }
    }

    /// Seqs claimed by more than one user.
    pub fn seq_conflicts(&self) -> u64 {
        self.after_start.values().filter(|users| users.len() > 1).count() as u64
    }
}

impl QueueLog {
    /// Takes one record of the room into account; other events are
    /// ignored. Duplicates keep their first (lowest) position.
    pub fn apply(&mut self, envelope: &Envelope, position: Position) {
        let (id, at) = (envelope.event_id, envelope.emitted_at);
        match &envelope.event {
            Event::QueueSeedCommitted(c) => keep(&mut self.commitments, id, at, position, c.clone()),
            Event::QueueJoined(j) => keep(&mut self.joins, id, at, position, j.clone()),
            Event::QueueSeedRevealed(r) => keep(&mut self.reveals, id, at, position, r.clone()),
            Event::QueueEntryIssued(i) => keep(&mut self.passes, id, at, position, Pass::Issued(i.clone())),
            Event::QueuePlaceExpired(x) => keep(&mut self.passes, id, at, position, Pass::Expired(x.clone())),
            Event::QueueEntryUsed(u) => keep(&mut self.used, id, at, position, u.clone()),
            _ => {}
        }
    }

    /// Whether the log holds no record of the room.
    pub fn is_empty(&self) -> bool {
        self.commitments.is_empty()
            && self.joins.is_empty()
            && self.reveals.is_empty()
            && self.passes.is_empty()
            && self.used.is_empty()
    }

    /// The places passed, in the order they appear on the topic: the
    /// serving order.
    pub fn passes(&self) -> Vec<&Logged<Pass>> {
        in_log_order(&self.passes)
    }

    /// The joins in log order.
    pub fn joins(&self) -> Vec<&Logged<QueueJoined>> {
        in_log_order(&self.joins)
    }

    /// The commitments in log order.
    pub fn commitments(&self) -> Vec<&Logged<QueueSeedCommitted>> {
        in_log_order(&self.commitments)
    }

    /// The first reveal on the topic.
    pub fn reveal(&self) -> Option<&Logged<QueueSeedRevealed>> {
        in_log_order(&self.reveals).into_iter().next()
    }

    /// Whether every reveal names the same seed and count.
    pub fn reveals_agree(&self) -> bool {
        let mut reveals = self.reveals.values().map(|r| (&r.record.seed, r.record.pre_queued));
        let first = reveals.next();
        reveals.all(|other| Some(other) == first)
    }

    /// The distinct users who joined before the start. Each takes one
    /// pre-queue place: a second pre-queue join of a user (which the gate
    /// never logs) would be the same member of its line.
    pub fn pre_queue_users(&self) -> Vec<UserId> {
        let users: BTreeSet<&UserId> =
            self.joins.values().filter(|join| join.record.pre_queue).map(|join| &join.record.user_id).collect();
        users.into_iter().cloned().collect()
    }

    /// The joins after the start, by seq.
    fn after_start(&self) -> BTreeMap<u64, BTreeSet<UserId>> {
        let mut by_seq: BTreeMap<u64, BTreeSet<UserId>> = BTreeMap::new();
        for join in self.joins.values() {
            if let (false, Some(seq)) = (join.record.pre_queue, join.record.seq) {
                by_seq.entry(seq).or_default().insert(join.record.user_id.clone());
            }
        }
        by_seq
    }

    /// Who should hold each place; `None` before the seed is revealed. A
    /// reveal that logs a beacon round shuffles by it and the pre-queue's
    /// hash (`seckill_core::queue`); the `queue_beacon` rule checks the round.
    pub fn holders(&self) -> Option<Holders> {
        let reveal = self.reveal()?;
        let users = self.pre_queue_users();
        let pre_queue = match reveal.record.beacon {
            Some(_) => queue::beacon_pre_queue_order(&reveal.record.seed, &users),
            None => queue::pre_queue_order(&reveal.record.seed, &users),
        };
        Some(Holders { pre_queue, pre_queued: reveal.record.pre_queued, after_start: self.after_start() })
    }

    /// The join that took `pass`'s place: the holder's pre-queue join for
    /// a place of the pre-queue, else the join with seq place − P. `None`
    /// before the reveal or when the log lacks it.
    pub fn join_of(&self, pass: &Pass) -> Option<&Logged<QueueJoined>> {
        let pre_queued = self.reveal()?.record.pre_queued;
        let place = pass.place();
        let user = pass.user();
        let matches = |join: &&Logged<QueueJoined>| {
            let record = &join.record;
            if place <= pre_queued {
                record.pre_queue && record.user_id == *user
            } else {
                !record.pre_queue && record.seq == Some(place - pre_queued) && record.user_id == *user
            }
        };
        self.joins.values().filter(matches).min_by_key(|join| join.position)
    }
}

/// Adds a record unless its event id is there already (then keeps the
/// earlier position: where the services first read it).
fn keep<T>(map: &mut BTreeMap<Uuid, Logged<T>>, id: Uuid, emitted_at: DateTime<Utc>, position: Position, record: T) {
    map.entry(id).and_modify(|kept| kept.position = kept.position.min(position)).or_insert(Logged {
        position,
        emitted_at,
        record,
    });
}

/// A map's records by position (event id breaks ties, which only
/// hand-made logs have).
pub(super) fn in_log_order<T>(map: &BTreeMap<Uuid, Logged<T>>) -> Vec<&Logged<T>> {
    let mut records: Vec<(&Uuid, &Logged<T>)> = map.iter().collect();
    records.sort_by_key(|(id, logged)| (logged.position, **id));
    records.into_iter().map(|(_, logged)| logged).collect()
}

#[cfg(test)]
mod tests {
    use crate::sale::queue_script::{queue_sale, AFTER_START, PRE_QUEUE};

    #[test]
    fn the_fold_keeps_each_record_once_at_its_first_position() {
        let mut sale = queue_sale();
        let before = sale.log.queue.clone();
        for (envelope, orders_topic) in sale.records.clone() {
            sale.put(&envelope, orders_topic);
        }
        assert_eq!(sale.log.queue, before, "a redelivery is the same record, where it was first");
        let room = &sale.log.queue;
        assert_eq!((room.commitments.len(), room.joins.len(), room.reveals.len()), (1, 23, 1));
        assert_eq!((room.passes.len(), room.used.len()), (23, 19));
        let places: Vec<u64> = room.passes().iter().map(|pass| pass.record.place()).collect();
        assert_eq!(places, (1..=PRE_QUEUE + AFTER_START).collect::<Vec<_>>(), "log order is serving order");
    }

    #[test]
    fn holders_and_joins_are_found_from_the_seed_and_the_seqs() {
        let sale = queue_sale();
        let room = &sale.log.queue;
        let holders = room.holders().expect("revealed");
        assert_eq!((holders.pre_queue.len() as u64, holders.pre_queued, holders.seq_conflicts()), (PRE_QUEUE, 20, 0));
        for pass in room.passes() {
            assert_eq!(holders.at(pass.record.place()), Some(pass.record.user()));
            let join = room.join_of(&pass.record).expect("its join");
            assert_eq!(join.record.user_id, *pass.record.user());
            assert_eq!(join.record.pre_queue, pass.record.place() <= PRE_QUEUE);
        }
        assert_eq!(holders.at(0), None);
        assert_eq!(holders.at(PRE_QUEUE + AFTER_START + 1), None, "nobody joined for it");
    }
}
