//! A voucher's sale as the log pauses, resumes and ends it, so the
//! processor refuses what Redis should have refused.
//!
//! Redis refuses orders while a sale is paused or over, but Redis can lose
//! a change it acknowledged (a failover promotes a replica that never got
//! it) and keep admitting: a pause that stopped a mispriced sale would stop
//! nothing. The processor judges every order again from the log alone: one
//! accepted while the log says the sale was paused fails `paused`, one
//! accepted at or after the sale's end fails `ended`.
//!
//! Judged by time, not by log order: an order Redis admitted just before a
//! pause can reach the log after the pause's record (the relay publishes it
//! later), and a pause made by one ingress can reach the log after a resume
//! made later by another. A change counts from when it was made (its
//! record's event id, a UUIDv7 of the ingress that made it, to the
//! millisecond), an order from its `accepted_at` (the admitting ingress's
//! clock): two ingress clocks, whose error against Redis's the
//! `SeckillClockSkew` alert bounds (1 s).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::event::{FailReason, VoucherUpdated};

/// Most pause and resume changes a voucher keeps: the latest by time. An
/// order accepted before the oldest one kept is judged not paused (Redis's
/// word stands); orders are decided seconds after they are accepted, long
/// before 64 later changes could have been made.
pub const MAX_PAUSE_CHANGES: usize = 64;

/// One pause or resume, as the log records it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PauseChange {
    /// When the admin's change was made (the update record's UUIDv7).
    pub at: DateTime<Utc>,
    /// The update record's event id: tells apart two changes of one
    /// millisecond, the same way on every replay.
    pub update_id: Uuid,
    /// Paused from `at` on (true), or resumed.
    pub paused: bool,
}

/// A voucher's end and pauses, as the processor keeps them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SaleWindow {
    /// Orders accepted at or after it fail `ended`; None for vouchers
    /// stored before the processor kept it (nothing is checked then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ends_at: Option<DateTime<Utc>>,
    /// When the update that set `ends_at` was made; None: the voucher's
    /// definition set it, older than every update.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ends_set_at: Option<DateTime<Utc>>,
    /// Pauses and resumes, oldest first, at most [`MAX_PAUSE_CHANGES`]:
    /// paused from a pause's `at` until the next resume's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<PauseChange>,
}

impl SaleWindow {
    /// A voucher's window as defined: ending at `ends_at`, never paused.
    pub fn new(ends_at: DateTime<Utc>) -> Self {
        Self { ends_at: Some(ends_at), ..Self::default() }
    }

    /// Applies the update record `update_id` in time order, whenever it is
    /// delivered: a later end replaces an earlier-made one only if it was
    /// made later; a pause or resume takes its place among the others.
    /// Returns whether anything changed. The caller applies each record
    /// once (by its id); applying one twice changes nothing anyway. An id
    /// that is not a UUIDv7 carries no time and is not judged by.
    pub fn apply(&mut self, update_id: Uuid, update: &VoucherUpdated) -> bool {
        let Some(at) = made_at(update_id) else { return false };
        let mut changed = false;
        if let Some(ends_at) = update.ends_at {
            if self.ends_set_at.is_none_or(|set_at| set_at < at) {
                changed |= self.ends_at != Some(ends_at) || self.ends_set_at != Some(at);
                self.ends_at = Some(ends_at);
                self.ends_set_at = Some(at);
            }
        }
        if let Some(paused) = update.paused {
            let change = PauseChange { at, update_id, paused };
            let key = |c: &PauseChange| (c.at, c.update_id);
            if let Err(place) = self.changes.binary_search_by_key(&key(&change), key) {
                self.changes.insert(place, change);
                // The oldest go first: beyond the bound, a change older
                // than every kept one is dropped as it comes.
                let excess = self.changes.len().saturating_sub(MAX_PAUSE_CHANGES);
                self.changes.drain(..excess);
                changed |= self.changes.contains(&change);
            }
        }
        changed
    }

    /// Whether the sale stood paused at `at`: the latest change made at or
    /// before it is a pause.
    pub fn paused_at(&self, at: DateTime<Utc>) -> bool {
        self.changes.iter().rev().find(|change| change.at <= at).is_some_and(|change| change.paused)
    }

    /// Why an order accepted at `accepted_at` fails, if the log's pauses or
    /// end refuse it.
    pub fn refuses(&self, accepted_at: DateTime<Utc>) -> Option<FailReason> {
        if self.ends_at.is_some_and(|ends_at| accepted_at >= ends_at) {
            return Some(FailReason::Ended);
        }
        self.paused_at(accepted_at).then_some(FailReason::Paused)
    }
}

/// When the record `id` was made: its UUIDv7 time, to the millisecond.
pub fn made_at(id: Uuid) -> Option<DateTime<Utc>> {
    if id.get_version_num() != 7 {
        return None;
    }
    let (seconds, nanos) = id.get_timestamp()?.to_unix();
    DateTime::from_timestamp(i64::try_from(seconds).ok()?, nanos)
}

#[cfg(test)]
mod tests {
    use chrono::Duration;
    use uuid::{NoContext, Timestamp};

    use super::*;
    use crate::ids::VoucherId;

    /// A UUIDv7 made at `at`.
    fn id_at(at: DateTime<Utc>) -> Uuid {
        let millis = u64::try_from(at.timestamp_millis()).expect("after 1970");
        Uuid::new_v7(Timestamp::from_unix(NoContext, millis / 1000, (millis % 1000) as u32 * 1_000_000))
    }

    fn update(paused: Option<bool>, ends_at: Option<DateTime<Utc>>) -> VoucherUpdated {
        VoucherUpdated { voucher_id: VoucherId::generate(), paused, ends_at, add_stock: 0 }
    }

    fn start() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-11-28T10:00:00Z").expect("time").with_timezone(&Utc)
    }

    #[test]
    fn a_change_is_made_at_its_records_time() {
        let at = start() + Duration::milliseconds(123);
        assert_eq!(made_at(id_at(at)), Some(at));
        assert_eq!(made_at(Uuid::new_v4()), None, "a v4 id carries no time");
        let mut window = SaleWindow::new(start() + Duration::hours(1));
        assert!(!window.apply(Uuid::new_v4(), &update(Some(true), None)), "nothing to place it by");
        assert_eq!(window.refuses(start()), None);
    }

    #[test]
    fn orders_accepted_inside_a_pause_are_refused_before_and_after_it_are_not() {
        let (paused, resumed) = (start() + Duration::seconds(10), start() + Duration::seconds(20));
        let mut window = SaleWindow::new(start() + Duration::hours(1));
        assert!(window.apply(id_at(paused), &update(Some(true), None)));
        assert!(window.apply(id_at(resumed), &update(Some(false), None)));
        assert_eq!(window.refuses(paused - Duration::milliseconds(1)), None, "before the pause");
        assert_eq!(window.refuses(paused), Some(FailReason::Paused), "at the pause");
        assert_eq!(window.refuses(resumed - Duration::milliseconds(1)), Some(FailReason::Paused));
        assert_eq!(window.refuses(resumed), None, "from the resume on");
        // A pause never resumed holds from then on.
        let again = start() + Duration::seconds(30);
        window.apply(id_at(again), &update(Some(true), None));
        assert_eq!(window.refuses(again + Duration::minutes(5)), Some(FailReason::Paused));
    }

    #[test]
    fn a_late_delivered_older_change_does_not_undo_a_newer_one() {
        let (paused, resumed) = (start() + Duration::seconds(10), start() + Duration::seconds(20));
        let mut window = SaleWindow::new(start() + Duration::hours(1));
        // The resume reaches the log first (another ingress made it), then
        // the pause made before it: the sale stands resumed after the resume.
        let pause = id_at(paused);
        window.apply(id_at(resumed), &update(Some(false), None));
        window.apply(pause, &update(Some(true), None));
        assert_eq!(window.refuses(start() + Duration::seconds(15)), Some(FailReason::Paused));
        assert_eq!(window.refuses(start() + Duration::seconds(25)), None);

        // An end moved twice: the later-made move stands, whatever came last.
        let (earlier, later) = (start() + Duration::minutes(5), start() + Duration::minutes(50));
        let newer = id_at(start() + Duration::seconds(40));
        assert!(window.apply(newer, &update(None, Some(earlier))));
        assert!(!window.apply(id_at(start() + Duration::seconds(30)), &update(None, Some(later))));
        assert_eq!(window.ends_at, Some(earlier));
        assert_eq!(window.refuses(earlier), Some(FailReason::Ended));
        assert_eq!(window.refuses(earlier - Duration::milliseconds(1)), None);

        // Delivered twice: applied once.
        let before = window.clone();
        assert!(!window.apply(pause, &update(Some(true), None)));
        assert!(!window.apply(newer, &update(None, Some(earlier))));
        assert_eq!(window, before);
    }

    #[test]
    fn the_end_refuses_orders_accepted_at_or_after_it() {
        let ends_at = start() + Duration::minutes(10);
        let window = SaleWindow::new(ends_at);
        assert_eq!(window.refuses(ends_at - Duration::milliseconds(1)), None);
        assert_eq!(window.refuses(ends_at), Some(FailReason::Ended));
        assert_eq!(SaleWindow::default().refuses(ends_at), None, "a voucher stored before windows were kept");
    }

    #[test]
    fn only_the_latest_changes_are_kept() {
        let mut window = SaleWindow::new(start() + Duration::hours(1));
        let at = |n: i64| start() + Duration::seconds(n);
        for n in 0..(MAX_PAUSE_CHANGES as i64 + 10) {
            window.apply(id_at(at(n)), &update(Some(n % 2 == 0), None));
        }
        assert_eq!(window.changes.len(), MAX_PAUSE_CHANGES);
        assert_eq!(window.changes[0].at, at(10), "the oldest went");
        assert!(!window.apply(id_at(at(-1)), &update(Some(true), None)), "older than every kept one");
        assert_eq!(window.refuses(at(5)), None, "before the oldest kept: Redis's word stands");
        assert_eq!(window.refuses(at(10)), Some(FailReason::Paused));
        assert_eq!(window.refuses(at(11)), None);
    }
}
