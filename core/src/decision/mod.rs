//! The processor's rules, kept pure so every store backend applies the same
//! ones.
//!
//! | order stands at        | cancel (requested) | cancel (expired) | confirm      |
//! |------------------------|--------------------|------------------|--------------|
//! | not accepted yet       | parked             | parked           | parked       |
//! | `OrderFailed`          | ignored            | ignored          | ignored      |
//! | `OrderCreated`         | cancelled          | cancelled        | confirmed    |
//! | `OrderConfirmed`       | cancelled (refund) | ignored (paid)   | repeated     |
//! | `OrderCancelled`       | repeated           | repeated         | ignored      |
//!
//! "Repeated" emits the order's outcomes again, unchanged: a redelivered
//! request (or one whose outcome was lost in a crash) reaches the same
//! result. "Parked" requests overtook their order on the way to the log
//! (see [`OrderRecord::parked`]) and are decided right after it.
//!
//! An order is created only if the persistent stock has its units and the
//! user's created orders stay within the per-user limit: Redis checks both
//! first, but Redis can lose its last writes; the log and the store cannot.

mod record;

pub use record::{OrderRecord, Request, MAX_PARKED};

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};

use crate::event::{
    CancelReason, Envelope, Event, FailReason, OrderAccepted, OrderCancelled, OrderConfirmed, OrderCreated,
    OrderFailed, OrderRequest, MAX_STOCK,
};

/// A voucher's persistent stock as the processor keeps it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StockLevel {
    /// Units for sale in all: the initial stock plus every addition.
    pub stock: u64,
    /// Units not taken by a created (and not cancelled) order.
    pub remaining: u64,
    /// The voucher's `hold_seconds` (0: orders never expire).
    #[serde(default)]
    pub hold_seconds: u32,
    /// Most units one user's created orders may hold; None for levels
    /// stored before the processor checked it (nothing is checked then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_user_limit: Option<u32>,
}

impl StockLevel {
    /// A voucher's level as defined: all of its stock left.
    pub fn new(stock: u64, hold_seconds: u32, per_user_limit: u32) -> Self {
        Self { stock, remaining: stock, hold_seconds, per_user_limit: Some(per_user_limit) }
    }

    /// Adds `units` to the stock and to what is left, capped once so the
    /// stock stays within `MAX_STOCK`: both grow by the units that fit (as
    /// `update_voucher.lua` caps them in the gate).
    pub fn add(&mut self, units: u64) {
        let fitting = units.min(MAX_STOCK.saturating_sub(self.stock));
        self.stock += fitting;
        self.remaining = self.remaining.saturating_add(fitting).min(self.stock);
    }

    /// When a created order expires unless confirmed; None when the voucher
    /// holds orders without confirmation. Saturates at the last instant
    /// chrono can hold rather than panic on overflow, whatever `decided_at`
    /// is (the decoder keeps event times in four-digit years; this does not
    /// rely on it).
    pub fn hold_deadline(&self, created: &OrderCreated) -> Option<DateTime<Utc>> {
        (self.hold_seconds > 0).then(|| {
            created
                .decided_at
                .checked_add_signed(Duration::seconds(i64::from(self.hold_seconds)))
                .unwrap_or(DateTime::<Utc>::MAX_UTC)
        })
    }
}

/// What a cancel or confirm request leads to.
#[derive(Clone, Debug, PartialEq)]
pub enum FollowUp {
    /// A new outcome to store and emit.
    Apply(Envelope),
    /// The request was decided before: emit the stored outcomes again.
    Repeat,
    /// The order has not arrived yet: keep the request until it does.
    Park,
    /// Nothing to do; the reason is for logs and metrics.
    Ignore(&'static str),
}

/// Decides a cancellation of the order `record` describes; on `Apply`, the
/// units are back in `level`.
pub fn cancel(
    level: Option<&mut StockLevel>,
    record: &OrderRecord,
    request: &OrderRequest,
    now: DateTime<Utc>,
) -> FollowUp {
    let reason = request.reason.unwrap_or(CancelReason::Requested);
    let (order, since) = match record.latest().map(|envelope| &envelope.event) {
        None => return FollowUp::Park,
        Some(Event::OrderCreated(created)) => (&created.order, created.decided_at),
        Some(Event::OrderConfirmed(confirmed)) if reason == CancelReason::Requested => {
            (&confirmed.order, confirmed.confirmed_at)
        }
        Some(Event::OrderConfirmed(_)) => return FollowUp::Ignore("confirmed"),
        Some(Event::OrderCancelled(_)) => return FollowUp::Repeat,
        Some(_) => return FollowUp::Ignore("not_created"),
    };
    let Some(level) = level else { return FollowUp::Ignore("unknown_voucher") };
    level.remaining = level.remaining.saturating_add(u64::from(order.quantity)).min(level.stock);
    // Never before the outcome it follows, whatever the clocks did: readers
    // order an order's changes by these times.
    FollowUp::Apply(Envelope::new(Event::OrderCancelled(OrderCancelled {
        order: order.clone(),
        cancelled_at: now.max(since),
        reason,
        remaining: level.remaining,
    })))
}

/// Decides a confirmation of the order `record` describes, asked for by
/// `request`. The hold deadline decides by time, not by which of the
/// confirmation and the expiry reaches the log first: a confirmation asked
/// for at or after the deadline never confirms (the order expires), one
/// asked for before it confirms however late it is decided (the processor
/// lagged or was down).
pub fn confirm(
    level: Option<&StockLevel>,
    record: &OrderRecord,
    request: &OrderRequest,
    now: DateTime<Utc>,
) -> FollowUp {
    match record.latest().map(|envelope| &envelope.event) {
        None => FollowUp::Park,
        Some(Event::OrderCreated(created)) => {
            let deadline = level.and_then(|level| level.hold_deadline(created));
            if deadline.is_some_and(|deadline| request.requested_at >= deadline) {
                return FollowUp::Ignore("expired");
            }
            FollowUp::Apply(Envelope::new(Event::OrderConfirmed(OrderConfirmed {
                order: created.order.clone(),
                confirmed_at: now.max(created.decided_at),
            })))
        }
        Some(Event::OrderConfirmed(_)) => FollowUp::Repeat,
        Some(Event::OrderCancelled(_)) => FollowUp::Ignore("cancelled"),
        Some(_) => FollowUp::Ignore("not_created"),
    }
}

/// Decides `order` against `level` (None: the voucher is unknown), given the
/// units `held` by the user's created orders, and, when created, takes its
/// units from `level`.
pub fn decide(level: Option<&mut StockLevel>, held: u64, order: &OrderAccepted) -> Result<u64, FailReason> {
    let level = level.ok_or(FailReason::UnknownVoucher)?;
    let quantity = u64::from(order.quantity);
    if level.per_user_limit.is_some_and(|limit| held.saturating_add(quantity) > u64::from(limit)) {
        return Err(FailReason::LimitExceeded);
    }
    if level.remaining < quantity {
        return Err(FailReason::SoldOut);
    }
    level.remaining -= quantity;
    Ok(level.remaining)
}

/// The outcome event for a decision.
pub fn outcome(order: OrderAccepted, decision: Result<u64, FailReason>, decided_at: DateTime<Utc>) -> Envelope {
    // An order is never decided before it was accepted, even across clock skew
    // between the ingress and processor hosts.
    let decided_at = decided_at.max(order.accepted_at);
    Envelope::new(match decision {
        Ok(remaining) => Event::OrderCreated(OrderCreated { order, decided_at, remaining }),
        Err(reason) => Event::OrderFailed(OrderFailed { order, decided_at, reason }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{OrderId, UserId, VoucherId};

    fn order(quantity: u32) -> OrderAccepted {
        OrderAccepted::now(VoucherId::generate(), UserId::parse("u1").expect("valid"), quantity)
    }

    fn level(stock: u64, hold_seconds: u32, per_user_limit: u32) -> StockLevel {
        StockLevel::new(stock, hold_seconds, per_user_limit)
    }

    #[test]
    fn takes_units_until_exactly_zero() {
        let mut level = level(3, 0, 100);
        assert_eq!(decide(Some(&mut level), 0, &order(2)), Ok(1));
        assert_eq!(decide(Some(&mut level), 0, &order(2)), Err(FailReason::SoldOut));
        assert_eq!(decide(Some(&mut level), 0, &order(1)), Ok(0));
        assert_eq!(decide(Some(&mut level), 0, &order(1)), Err(FailReason::SoldOut));
        assert_eq!(level.remaining, 0);
    }

    #[test]
    fn unknown_voucher_fails() {
        assert_eq!(decide(None, 0, &order(1)), Err(FailReason::UnknownVoucher));
    }

    #[test]
    fn the_limit_counts_the_units_the_user_already_holds() {
        let mut level = level(10, 0, 3);
        assert_eq!(decide(Some(&mut level), 1, &order(2)), Ok(8));
        assert_eq!(decide(Some(&mut level), 3, &order(1)), Err(FailReason::LimitExceeded));
        assert_eq!(decide(Some(&mut level), 2, &order(2)), Err(FailReason::LimitExceeded));
        assert_eq!(level.remaining, 8, "a refused order takes nothing");
        let mut unchecked = StockLevel { per_user_limit: None, ..level };
        assert_eq!(decide(Some(&mut unchecked), 1_000, &order(1)), Ok(7), "levels stored before limits were kept");
    }

    fn request(reason: Option<CancelReason>) -> OrderRequest {
        OrderRequest {
            order_id: OrderId::generate(),
            voucher_id: VoucherId::generate(),
            reason,
            requested_at: Utc::now(),
        }
    }

    fn applied(follow_up: FollowUp) -> Envelope {
        match follow_up {
            FollowUp::Apply(envelope) => envelope,
            other => panic!("expected a new outcome, got {other:?}"),
        }
    }

    fn decided(outcome: Envelope) -> OrderRecord {
        OrderRecord { decision: Some(outcome), ..OrderRecord::default() }
    }

    #[test]
    fn cancelling_returns_the_units_once_and_only_for_created_orders() {
        let mut level = level(5, 0, 5);
        let created = decided(outcome(order(2), decide(Some(&mut level), 0, &order(2)), Utc::now()));
        assert_eq!(level.remaining, 3);

        let cancel_request = request(Some(CancelReason::Requested));
        let cancelled = applied(cancel(Some(&mut level), &created, &cancel_request, Utc::now()));
        assert_eq!(level.remaining, 5);
        assert!(matches!(&cancelled.event, Event::OrderCancelled(c) if c.remaining == 5));
        let cancelled = OrderRecord { cancelled: Some(cancelled), ..created };
        assert_eq!(cancel(Some(&mut level), &cancelled, &cancel_request, Utc::now()), FollowUp::Repeat);
        assert_eq!(level.remaining, 5, "a repeated cancellation returns nothing more");

        let failed = decided(outcome(order(1), Err(FailReason::SoldOut), Utc::now()));
        assert_eq!(cancel(Some(&mut level), &failed, &cancel_request, Utc::now()), FollowUp::Ignore("not_created"));
        assert_eq!(confirm(None, &cancelled, &request(None), Utc::now()), FollowUp::Ignore("cancelled"));
    }

    #[test]
    fn requests_before_their_order_are_parked() {
        let mut level = level(5, 0, 5);
        let unknown = OrderRecord::default();
        assert_eq!(
            cancel(Some(&mut level), &unknown, &request(Some(CancelReason::Requested)), Utc::now()),
            FollowUp::Park
        );
        assert_eq!(confirm(Some(&level), &unknown, &request(None), Utc::now()), FollowUp::Park);
        assert_eq!(level.remaining, 5);
    }

    #[test]
    fn a_confirmed_order_never_expires_but_can_be_cancelled_by_request() {
        let mut level = level(1, 60, 1);
        let created = outcome(order(1), decide(Some(&mut level), 0, &order(1)), Utc::now());
        let Event::OrderCreated(created_event) = &created.event else { panic!("created") };
        assert_eq!(level.hold_deadline(created_event), Some(created_event.decided_at + Duration::seconds(60)));

        let record = decided(created.clone());
        let confirmed = applied(confirm(Some(&level), &record, &request(None), Utc::now()));
        let record = OrderRecord { confirmed: Some(confirmed), ..record };
        assert_eq!(confirm(Some(&level), &record, &request(None), Utc::now()), FollowUp::Repeat);
        let expiry = request(Some(CancelReason::Expired));
        assert_eq!(cancel(Some(&mut level), &record, &expiry, Utc::now()), FollowUp::Ignore("confirmed"));
        assert_eq!(level.remaining, 0);
        let refund = request(Some(CancelReason::Requested));
        applied(cancel(Some(&mut level), &record, &refund, Utc::now()));
        assert_eq!(level.remaining, 1);
    }

    #[test]
    fn the_hold_deadline_decides_a_confirmation_by_when_it_was_asked_for() {
        let mut level = level(2, 60, 2);
        let created = outcome(order(1), decide(Some(&mut level), 0, &order(1)), Utc::now());
        let Event::OrderCreated(created_event) = &created.event else { panic!("created") };
        let deadline = created_event.decided_at + Duration::seconds(60);
        let record = decided(created.clone());
        let asked_at = |at| OrderRequest { requested_at: at, ..request(None) };
        // Decided an hour after the deadline (the processor was down): what
        // counts is when the owner asked.
        let much_later = deadline + Duration::hours(1);
        let in_time = confirm(Some(&level), &record, &asked_at(deadline - Duration::seconds(1)), much_later);
        assert!(matches!(in_time, FollowUp::Apply(_)), "{in_time:?}");
        for late in [deadline, deadline + Duration::seconds(1)] {
            assert_eq!(confirm(Some(&level), &record, &asked_at(late), much_later), FollowUp::Ignore("expired"));
        }
        // A voucher that holds orders without a deadline has none to miss.
        let unheld = StockLevel { hold_seconds: 0, ..level };
        assert!(matches!(confirm(Some(&unheld), &record, &asked_at(much_later), much_later), FollowUp::Apply(_)));
    }

    #[test]
    fn outcomes_never_precede_the_outcome_they_follow() {
        let mut level = level(1, 0, 1);
        let late = Utc::now() + Duration::hours(1);
        let created = outcome(order(1), decide(Some(&mut level), 0, &order(1)), late);
        let record = decided(created);
        let confirmed = applied(confirm(Some(&level), &record, &request(None), Utc::now()));
        let Event::OrderConfirmed(c) = &confirmed.event else { panic!("confirmed") };
        assert_eq!(c.confirmed_at, late, "a processor clock behind the decision's does not reorder");
        let record = OrderRecord { confirmed: Some(confirmed), ..record };
        let cancelled = applied(cancel(Some(&mut level), &record, &request(None), Utc::now()));
        let Event::OrderCancelled(c) = &cancelled.event else { panic!("cancelled") };
        assert_eq!(c.cancelled_at, late);
    }

    #[test]
    fn added_stock_is_bounded() {
        let mut level = StockLevel { remaining: 0, ..level(2, 0, 1) };
        level.add(3);
        assert_eq!((level.stock, level.remaining), (5, 3));
        level.add(u64::MAX);
        assert_eq!(level.stock, MAX_STOCK);

        // Sold out one unit below the cap: five more add one unit, to both.
        let mut near_cap = StockLevel { stock: MAX_STOCK - 1, remaining: 0, hold_seconds: 0, per_user_limit: None };
        near_cap.add(5);
        assert_eq!((near_cap.stock, near_cap.remaining), (MAX_STOCK, 1));
    }
}
