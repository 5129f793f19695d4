//! The processor's rule, kept pure so every store backend applies the same one.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::event::{Envelope, Event, FailReason, OrderAccepted, OrderCreated, OrderFailed};

/// A voucher's persistent stock as the processor keeps it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StockLevel {
    /// Units the voucher was created with.
    pub stock: u64,
    /// Units not yet taken by a created order.
    pub remaining: u64,
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
        let mut level = StockLevel { stock: 3, remaining: 3 };
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
}
