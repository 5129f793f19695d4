//! An order's changes, and the cursor a user's stream resumes from.
//!
//! Every status an order reaches is a change, timed by the event that made
//! it (`accepted_at`, `decided_at`, `paid_at`, `cancelled_at`; the
//! processor never dates an outcome before the one it follows). A row of
//! the view holds all of those times, so every ingress can list an order's
//! changes from the row alone, whichever replica saw them happen.
//!
//! Changes of different orders may reach an ingress out of time order (they
//! travel on different partitions), so "everything after the last event" is
//! not a single time. The stream's event id is therefore a cursor: a time
//! floor and the changes sent at or after it (bounded in number and in age).
//! A client reconnecting with `Last-Event-ID` gets every change at or after
//! the floor that the cursor does not list: nothing it had, nothing it
//! missed, as long as no change arrives more than [`WINDOW_MS`] later than
//! newer ones already sent.

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};
use seckill_core::OrderId;
use seckill_store::{OrderStatus, OrderView};

/// How far behind the newest change sent the cursor keeps listing what it
/// sent: the largest reordering between partitions it absorbs.
pub(crate) const WINDOW_MS: i64 = 60_000;
/// Most changes one cursor lists; older ones are covered by its floor.
const MAX_ENTRIES: usize = 64;

/// One change: `order` reached `row.status` at `at_ms`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Change {
    pub(crate) at_ms: i64,
    pub(crate) order: OrderId,
    pub(crate) rank: u8,
    /// The order as it stood right after this change.
    pub(crate) row: OrderView,
}

fn rank(status: OrderStatus) -> u8 {
    match status {
        OrderStatus::Pending => 0,
        OrderStatus::Created | OrderStatus::Failed => 1,
        OrderStatus::Paid => 2,
        OrderStatus::Cancelled | OrderStatus::Refunded => 3,
    }
}

fn millis(at: DateTime<Utc>) -> i64 {
    at.timestamp_millis()
}

/// Every change `row` records, oldest first. A stage whose time the row
/// does not carry (a cancellation seen without its creation) is left out.
pub(crate) fn changes(row: &OrderView) -> Vec<Change> {
    let stage = |status, at: DateTime<Utc>, row: OrderView| Change {
        at_ms: millis(at),
        order: row.order_id,
        rank: rank(status),
        row: OrderView { status, ..row },
    };
    let bare = OrderView {
        reason: None,
        decided_at: None,
        paid_at: None,
        cancelled_at: None,
        payment_id: None,
        ..row.clone()
    };
    let mut changes = vec![stage(OrderStatus::Pending, row.accepted_at, bare.clone())];
    if let Some(decided_at) = row.decided_at {
        let (status, reason) = match (row.status, row.reason) {
            (OrderStatus::Failed, reason) => (OrderStatus::Failed, reason),
            _ => (OrderStatus::Created, None),
        };
        changes.push(stage(status, decided_at, OrderView { decided_at: Some(decided_at), reason, ..bare.clone() }));
    }
    if let Some(paid_at) = row.paid_at {
        let paid = OrderView {
            decided_at: row.decided_at,
            paid_at: Some(paid_at),
            payment_id: row.payment_id.clone(),
            ..bare
        };
        changes.push(stage(OrderStatus::Paid, paid_at, paid));
    }
    if let (OrderStatus::Cancelled | OrderStatus::Refunded, Some(cancelled_at)) = (row.status, row.cancelled_at) {
        changes.push(stage(row.status, cancelled_at, row.clone()));
    }
    // Only the stages the row has reached (a FAILED row has no later ones).
    changes.retain(|change| change.rank <= rank(row.status));
    changes
}

/// The changes from `before` (None: unknown) to `after`.
pub(crate) fn changes_between(before: Option<&OrderView>, after: &OrderView) -> Vec<Change> {
    let reached = before.map(|row| i16::from(rank(row.status))).unwrap_or(-1);
    changes(after).into_iter().filter(|change| i16::from(change.rank) > reached).collect()
}

/// An entry of a cursor: (time, the order's last 40 bits, rank).
type Entry = (i64, u64, u8);

fn entry(change: &Change) -> Entry {
    (change.at_ms, short(change.order), change.rank)
}

/// The order id's last 40 bits: random in a UUIDv7, enough to tell a
/// user's orders apart.
fn short(order: OrderId) -> u64 {
    (order.as_uuid().as_u128() & 0xff_ffff_ffff) as u64
}

/// What a stream has sent, as far as a reconnecting client needs to know.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Cursor {
    /// Every change before this time counts as sent.
    floor_ms: i64,
    sent: BTreeSet<Entry>,
}

impl Cursor {
    /// A new stream's cursor: changes from `floor_ms` on are still to send.
    pub(crate) fn starting_at(floor_ms: i64) -> Self {
        Self { floor_ms, sent: BTreeSet::new() }
    }

    /// Whether `change` went out on this stream (as far as the cursor
    /// remembers): live changes are checked with this.
    pub(crate) fn has_sent(&self, change: &Change) -> bool {
        self.sent.contains(&entry(change))
    }

    /// Whether a reconnecting client still needs `change`.
    pub(crate) fn misses(&self, change: &Change) -> bool {
        change.at_ms >= self.floor_ms && !self.has_sent(change)
    }

    /// Records that `change` went out, keeping the cursor bounded.
    pub(crate) fn record(&mut self, change: &Change) {
        self.sent.insert(entry(change));
        let newest = self.sent.last().map_or(change.at_ms, |(at, _, _)| *at);
        self.floor_ms = self.floor_ms.max(newest.saturating_sub(WINDOW_MS));
        while self.sent.len() > MAX_ENTRIES {
            if let Some((at, _, _)) = self.sent.pop_first() {
                self.floor_ms = self.floor_ms.max(at.saturating_add(1));
            }
        }
        let floor = self.floor_ms;
        self.sent.retain(|(at, _, _)| *at >= floor);
    }

    /// The `id:` of the event that made this cursor.
    pub(crate) fn encode(&self) -> String {
        let entries: Vec<String> =
            self.sent.iter().map(|(at, order, rank)| format!("{}x{order:x}x{rank}", at - self.floor_ms)).collect();
        format!("v1.{}.{}", self.floor_ms, entries.join("_"))
    }

    /// Reads a `Last-Event-ID`; None when it is not one of ours.
    pub(crate) fn parse(raw: &str) -> Option<Self> {
        let mut parts = raw.trim().splitn(3, '.');
        if parts.next()? != "v1" {
            return None;
        }
        let floor_ms: i64 = parts.next()?.parse().ok()?;
        let mut sent = BTreeSet::new();
        for raw in parts.next()?.split('_').filter(|e| !e.is_empty()) {
            let mut fields = raw.split('x');
            let offset: i64 = fields.next()?.parse().ok()?;
            let order = u64::from_str_radix(fields.next()?, 16).ok()?;
            let rank: u8 = fields.next()?.parse().ok()?;
            if fields.next().is_some() || offset < 0 || rank > 3 || sent.len() >= MAX_ENTRIES {
                return None;
            }
            sent.insert((floor_ms.checked_add(offset)?, order, rank));
        }
        Some(Self { floor_ms, sent })
    }
}

#[cfg(test)]
mod tests {
    use chrono::Duration;
    use seckill_core::event::CancelReason;
    use seckill_core::{UserId, VoucherId};
    use seckill_store::OrderReason;

    use super::*;

    fn cancelled_row() -> OrderView {
        let accepted_at = Utc::now();
        OrderView {
            order_id: OrderId::generate(),
            voucher_id: VoucherId::generate(),
            user_id: UserId::parse("u").expect("valid"),
            quantity: 1,
            status: OrderStatus::Cancelled,
            reason: Some(OrderReason::Cancelled(CancelReason::Requested)),
            accepted_at,
            decided_at: Some(accepted_at + Duration::milliseconds(5)),
            paid_at: Some(accepted_at + Duration::milliseconds(9)),
            cancelled_at: Some(accepted_at + Duration::milliseconds(12)),
            amount: 0,
            currency: None,
            pay_by: None,
            payment_id: None,
            checkout_id: None,
            checkout_expires_at: None,
        }
    }

    #[test]
    fn a_row_lists_every_stage_it_went_through_with_its_fields_then() {
        let row = cancelled_row();
        let stages: Vec<OrderStatus> = changes(&row).iter().map(|c| c.row.status).collect();
        assert_eq!(stages, [OrderStatus::Pending, OrderStatus::Created, OrderStatus::Paid, OrderStatus::Cancelled]);
        let created = &changes(&row)[1];
        assert_eq!((created.row.paid_at, created.row.reason), (None, None));
        let after_created = OrderView { status: OrderStatus::Created, ..row.clone() };
        let later: Vec<u8> = changes_between(Some(&after_created), &row).iter().map(|c| c.rank).collect();
        assert_eq!(later, [2, 3]);
    }

    #[test]
    fn a_cursor_round_trips_and_tells_sent_from_missed() {
        let row = cancelled_row();
        let all = changes(&row);
        let mut cursor = Cursor::starting_at(all[0].at_ms);
        cursor.record(&all[0]);
        cursor.record(&all[2]);
        let back = Cursor::parse(&cursor.encode()).expect("parses");
        assert_eq!(back, cursor);
        let missed: Vec<u8> = all.iter().filter(|c| back.misses(c)).map(|c| c.rank).collect();
        assert_eq!(missed, [1, 3]);
        for bad in ["", "v2.1.", "v1.x.", "v1.5.1x2", "v1.5.-1xffx1", "v1.5.1xzzx1"] {
            assert!(Cursor::parse(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn a_cursor_stays_bounded_in_size_and_age() {
        let mut cursor = Cursor::starting_at(0);
        let row = cancelled_row();
        for i in 0..200 {
            let mut change = changes(&row).remove(0);
            change.order = OrderId::generate();
            change.at_ms = i * 1_000;
            cursor.record(&change);
        }
        assert!(cursor.sent.len() <= MAX_ENTRIES);
        assert!(cursor.floor_ms >= 199_000 - WINDOW_MS);
        assert!(cursor.encode().len() < 2_048, "fits a header");
    }
}
