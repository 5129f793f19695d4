//! The processor's rules, kept pure so every store backend applies the same
//! ones.
//!
//! | order's latest outcome | cancel (requested) | cancel (expired) | confirm      |
//! |------------------------|--------------------|------------------|--------------|
//! | none (unknown order)   | ignored            | ignored          | ignored      |
//! | `OrderFailed`          | ignored            | ignored          | ignored      |
//! | `OrderCreated`         | cancelled          | cancelled        | confirmed    |
//! | `OrderConfirmed`       | cancelled (refund) | ignored (paid)   | repeated     |
//! | `OrderCancelled`       | repeated           | repeated         | ignored      |
//!
//! "Repeated" re-emits the latest outcome unchanged: a redelivered request
//! (or one whose outcome was lost in a crash) reaches the same result.

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
}

impl StockLevel {
    /// Adds `units` to the stock and to what is left.
    pub fn add(&mut self, units: u64) {
        self.stock = self.stock.saturating_add(units).min(MAX_STOCK);
        self.remaining = self.remaining.saturating_add(units).min(self.stock);
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
    /// The request was decided before: emit the stored outcome again.
    Repeat,
    /// Nothing to do; the reason is for logs and metrics.
    Ignore(&'static str),
}

/// Decides a cancellation of the order whose latest outcome is `latest`;
/// on `Apply`, the units are back in `level`.
pub fn cancel(
    level: Option<&mut StockLevel>,
    latest: Option<&Envelope>,
    request: &OrderRequest,
    now: DateTime<Utc>,
) -> FollowUp {
    let reason = request.reason.unwrap_or(CancelReason::Requested);
    let order = match latest.map(|envelope| &envelope.event) {
        None => return FollowUp::Ignore("unknown_order"),
        Some(Event::OrderCreated(created)) => &created.order,
        Some(Event::OrderConfirmed(confirmed)) if reason == CancelReason::Requested => &confirmed.order,
        Some(Event::OrderConfirmed(_)) => return FollowUp::Ignore("confirmed"),
        Some(Event::OrderCancelled(_)) => return FollowUp::Repeat,
        Some(_) => return FollowUp::Ignore("not_created"),
    };
    let Some(level) = level else { return FollowUp::Ignore("unknown_voucher") };
    level.remaining = level.remaining.saturating_add(u64::from(order.quantity)).min(level.stock);
    FollowUp::Apply(Envelope::new(Event::OrderCancelled(OrderCancelled {
        order: order.clone(),
        cancelled_at: now.max(order.accepted_at),
        reason,
        remaining: level.remaining,
    })))
}

/// Decides a confirmation of the order whose latest outcome is `latest`.
pub fn confirm(latest: Option<&Envelope>, now: DateTime<Utc>) -> FollowUp {
    match latest.map(|envelope| &envelope.event) {
        None => FollowUp::Ignore("unknown_order"),
        Some(Event::OrderCreated(created)) => FollowUp::Apply(Envelope::new(Event::OrderConfirmed(OrderConfirmed {
            order: created.order.clone(),
            confirmed_at: now.max(created.decided_at),
        }))),
        Some(Event::OrderConfirmed(_)) => FollowUp::Repeat,
        Some(Event::OrderCancelled(_)) => FollowUp::Ignore("cancelled"),
        Some(_) => FollowUp::Ignore("not_created"),
    }
}

/// Decides `order` against `level` (None: the voucher is unknown) and, when
/// created, takes its units from `level`.
pub fn decide(level: Option<&mut StockLevel>, order: &OrderAccepted) -> Result<u64, FailReason> {
    let level = level.ok_or(FailReason::UnknownVoucher)?;
    let quantity = u64::from(order.quantity);
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
        OrderAccepted {
            order_id: OrderId::generate(),
            voucher_id: VoucherId::generate(),
            user_id: UserId::parse("u1").expect("valid"),
            quantity,
            accepted_at: Utc::now(),
        }
    }

    #[test]
    fn takes_units_until_exactly_zero() {
        let mut level = StockLevel { stock: 3, remaining: 3, hold_seconds: 0 };
        assert_eq!(decide(Some(&mut level), &order(2)), Ok(1));
        assert_eq!(decide(Some(&mut level), &order(2)), Err(FailReason::SoldOut));
        assert_eq!(decide(Some(&mut level), &order(1)), Ok(0));
        assert_eq!(decide(Some(&mut level), &order(1)), Err(FailReason::SoldOut));
        assert_eq!(level.remaining, 0);
    }

    #[test]
    fn unknown_voucher_fails() {
        assert_eq!(decide(None, &order(1)), Err(FailReason::UnknownVoucher));
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

    #[test]
    fn cancelling_returns_the_units_once_and_only_for_created_orders() {
        let mut level = StockLevel { stock: 5, remaining: 5, hold_seconds: 0 };
        let created = outcome(order(2), decide(Some(&mut level), &order(2)), Utc::now());
        assert_eq!(level.remaining, 3);

        let cancel_request = request(Some(CancelReason::Requested));
        let cancelled = applied(cancel(Some(&mut level), Some(&created), &cancel_request, Utc::now()));
        assert_eq!(level.remaining, 5);
        assert!(matches!(&cancelled.event, Event::OrderCancelled(c) if c.remaining == 5));
        assert_eq!(cancel(Some(&mut level), Some(&cancelled), &cancel_request, Utc::now()), FollowUp::Repeat);
        assert_eq!(level.remaining, 5, "a repeated cancellation returns nothing more");

        let failed = outcome(order(1), Err(FailReason::SoldOut), Utc::now());
        assert_eq!(
            cancel(Some(&mut level), Some(&failed), &cancel_request, Utc::now()),
            FollowUp::Ignore("not_created")
        );
        assert_eq!(cancel(Some(&mut level), None, &cancel_request, Utc::now()), FollowUp::Ignore("unknown_order"));
        assert_eq!(confirm(Some(&cancelled), Utc::now()), FollowUp::Ignore("cancelled"));
    }

    #[test]
    fn a_confirmed_order_never_expires_but_can_be_cancelled_by_request() {
        let mut level = StockLevel { stock: 1, remaining: 1, hold_seconds: 60 };
        let created = outcome(order(1), decide(Some(&mut level), &order(1)), Utc::now());
        let Event::OrderCreated(created_event) = &created.event else { panic!("created") };
        assert_eq!(level.hold_deadline(created_event), Some(created_event.decided_at + Duration::seconds(60)));

        let confirmed = applied(confirm(Some(&created), Utc::now()));
        assert_eq!(confirm(Some(&confirmed), Utc::now()), FollowUp::Repeat);
        let expiry = request(Some(CancelReason::Expired));
        assert_eq!(cancel(Some(&mut level), Some(&confirmed), &expiry, Utc::now()), FollowUp::Ignore("confirmed"));
        assert_eq!(level.remaining, 0);
        let refund = request(Some(CancelReason::Requested));
        applied(cancel(Some(&mut level), Some(&confirmed), &refund, Utc::now()));
        assert_eq!(level.remaining, 1);
    }

    #[test]
    fn added_stock_is_bounded() {
        let mut level = StockLevel { stock: 2, remaining: 0, hold_seconds: 0 };
        level.add(3);
        assert_eq!((level.stock, level.remaining), (5, 3));
        level.add(u64::MAX);
        assert_eq!(level.stock, MAX_STOCK);
    }
}
