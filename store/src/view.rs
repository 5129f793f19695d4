//! The order-status view: what clients poll.
//!
//! Events reach the projector from two topics in no guaranteed relative
//! order, and may be redelivered. [`merge_order`] makes applying them
//! commutative and idempotent: a status only moves forward (`PENDING` before
//! `CREATED`/`FAILED`), and counters move only on a transition.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use seckill_core::event::{Event, FailReason, OrderAccepted, VoucherCreated};
use seckill_core::{Envelope, OrderId, UserId, VoucherId};
use serde::{Deserialize, Serialize};

use crate::StoreError;

/// Most orders one list query returns.
pub const MAX_PAGE: usize = 100;

/// Where an order stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum OrderStatus {
    /// Admitted by Redis; the processor has not decided yet.
    Pending,
    /// The order holds its units.
    Created,
    /// The processor refused the order.
    Failed,
}

impl OrderStatus {
    /// Statuses only move to a higher rank.
    fn rank(self) -> u8 {
        match self {
            Self::Pending => 0,
            Self::Created | Self::Failed => 1,
        }
    }
}

/// One order as clients see it (`GET /api/v1/orders/{order_id}`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OrderView {
    pub order_id: OrderId,
    pub voucher_id: VoucherId,
    pub user_id: UserId,
    pub quantity: u32,
    pub status: OrderStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<FailReason>,
    pub accepted_at: DateTime<Utc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_at: Option<DateTime<Utc>>,
}

/// Order counts of one voucher, maintained by the projector.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VoucherCounters {
    /// Orders seen (every order Redis admitted that reached the log).
    pub admitted: u64,
    /// Orders created.
    pub created: u64,
    /// Orders failed.
    pub failed: u64,
    /// Units held by created orders.
    pub created_units: u64,
}

/// A voucher as clients see it (`GET /api/v1/vouchers/{voucher_id}`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct VoucherView {
    pub voucher_id: VoucherId,
    pub stock: u64,
    /// Units not held by created orders: the persistent stock as projected.
    pub remaining: u64,
    pub per_user_limit: u32,
    pub begins_at: DateTime<Utc>,
    pub ends_at: DateTime<Utc>,
    pub admitted: u64,
    pub created: u64,
    pub failed: u64,
}

impl VoucherView {
    /// Combines a definition with its counters.
    pub fn new(definition: &VoucherCreated, counters: VoucherCounters) -> Self {
        Self {
            voucher_id: definition.voucher_id,
            stock: definition.stock,
            remaining: definition.stock.saturating_sub(counters.created_units),
            per_user_limit: definition.per_user_limit,
            begins_at: definition.begins_at,
            ends_at: definition.ends_at,
            admitted: counters.admitted,
            created: counters.created,
            failed: counters.failed,
        }
    }
}

/// What applying one order event changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transition {
    /// The order was not in the view before.
    pub first_seen: bool,
    /// The status it moved to.
    pub to: OrderStatus,
}

impl Transition {
    /// Applies this transition to a voucher's counters.
    pub fn count(&self, counters: &mut VoucherCounters, quantity: u32) {
        if self.first_seen {
            counters.admitted += 1;
        }
        match self.to {
            OrderStatus::Pending => {}
            OrderStatus::Created => {
                counters.created += 1;
                counters.created_units += u64::from(quantity);
            }
            OrderStatus::Failed => counters.failed += 1,
        }
    }
}

impl OrderView {
    /// The row an order event describes; None for voucher events.
    pub fn from_event(event: &Event) -> Option<Self> {
        let row = |order: &OrderAccepted, status, reason, decided_at| Self {
            order_id: order.order_id,
            voucher_id: order.voucher_id,
            user_id: order.user_id.clone(),
            quantity: order.quantity,
            status,
            reason,
            accepted_at: order.accepted_at,
            decided_at,
        };
        match event {
            Event::VoucherCreated(_) => None,
            Event::OrderAccepted(o) => Some(row(o, OrderStatus::Pending, None, None)),
            Event::OrderCreated(c) => Some(row(&c.order, OrderStatus::Created, None, Some(c.decided_at))),
            Event::OrderFailed(f) => Some(row(&f.order, OrderStatus::Failed, Some(f.reason), Some(f.decided_at))),
        }
    }
}

/// Decides whether `incoming` replaces `existing`: only a move to a higher
/// status rank does. Returns the transition to record, or None when the event
/// is stale or a duplicate.
pub fn merge_order(existing: Option<&OrderView>, incoming: &OrderView) -> Option<Transition> {
    match existing {
        Some(current) if current.status.rank() >= incoming.status.rank() => None,
        Some(_) => Some(Transition { first_seen: false, to: incoming.status }),
        None => Some(Transition { first_seen: true, to: incoming.status }),
    }
}

/// Read side of the view.
#[async_trait]
pub trait ViewReader: Send + Sync + std::fmt::Debug + 'static {
    /// One order.
    async fn order(&self, order: OrderId) -> Result<Option<OrderView>, StoreError>;
    /// A user's orders, newest first, at most `limit` (capped at [`MAX_PAGE`]).
    async fn user_orders(&self, user: &UserId, limit: usize) -> Result<Vec<OrderView>, StoreError>;
    /// One voucher with its counts; None until its definition is projected.
    async fn voucher(&self, voucher: VoucherId) -> Result<Option<VoucherView>, StoreError>;
}

/// The projector's side: apply events, read the result.
#[async_trait]
pub trait ViewStore: ViewReader {
    /// Applies `events` atomically and idempotently; returns, per event,
    /// whether it changed the view.
    async fn apply(&self, events: Vec<Envelope>) -> Result<Vec<bool>, StoreError>;
}

#[cfg(test)]
mod tests {
    use super::*;
    use seckill_core::event::{OrderCreated, OrderFailed};

    fn accepted() -> OrderAccepted {
        OrderAccepted {
            order_id: OrderId::generate(),
            voucher_id: VoucherId::generate(),
            user_id: UserId::parse("bob").expect("valid"),
            quantity: 2,
            accepted_at: Utc::now(),
        }
    }

    #[test]
    fn status_only_moves_forward() {
        let order = accepted();
        let pending = OrderView::from_event(&Event::OrderAccepted(order.clone())).expect("row");
        let created = OrderView::from_event(&Event::OrderCreated(OrderCreated {
            order: order.clone(),
            decided_at: Utc::now(),
            remaining: 1,
        }))
        .expect("row");

        // Outcome first, acceptance late: the late acceptance changes nothing.
        let first = merge_order(None, &created).expect("new row");
        assert_eq!(first, Transition { first_seen: true, to: OrderStatus::Created });
        assert_eq!(merge_order(Some(&created), &pending), None);
        assert_eq!(merge_order(Some(&created), &created), None);

        // Acceptance first, then the outcome.
        assert!(merge_order(None, &pending).expect("new").first_seen);
        let moved = merge_order(Some(&pending), &created).expect("moves");
        assert!(!moved.first_seen);

        let mut counters = VoucherCounters::default();
        first.count(&mut counters, order.quantity);
        assert_eq!(counters, VoucherCounters { admitted: 1, created: 1, failed: 0, created_units: 2 });
    }

    #[test]
    fn failed_rows_keep_their_reason() {
        let row = OrderView::from_event(&Event::OrderFailed(OrderFailed {
            order: accepted(),
            decided_at: Utc::now(),
            reason: FailReason::SoldOut,
        }))
        .expect("row");
        let json = serde_json::to_value(&row).expect("json");
        assert_eq!(json["status"], "FAILED");
        assert_eq!(json["reason"], "sold_out");
    }
}
