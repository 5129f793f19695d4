//! The order-status view: what clients poll.
//!
//! Events reach the projector from two topics in no guaranteed relative
//! order, and may be redelivered. [`merge_order`] makes applying them
//! commutative and idempotent: a status only moves forward (`PENDING` before
//! `CREATED`/`FAILED`), and counters move only on a transition.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use seckill_core::event::{CancelReason, Event, FailReason, OrderAccepted, VoucherCreated, VoucherUpdated};
use seckill_core::money::Currency;
use seckill_core::{Envelope, OrderId, UserId, VoucherId};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::StoreError;

/// Most orders or vouchers one list query returns.
pub const MAX_PAGE: usize = 100;

/// Where an order stands.
///
/// `PENDING → CREATED → PAID → REFUNDED`, with `CREATED → CANCELLED`
/// (`requested` or `expired`) and `PENDING → FAILED`. The processor decides
/// every move in log order; the view only keeps the furthest status it has
/// seen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum OrderStatus {
    /// Admitted by Redis; the processor has not decided yet.
    Pending,
    /// The order holds its units.
    Created,
    /// The processor refused the order.
    Failed,
    /// Paid in time (or, free, claimed); it no longer expires. Logs and
    /// stores from before payments say `CONFIRMED`.
    #[serde(alias = "CONFIRMED")]
    Paid,
    /// The order gave its units back unpaid (or, free, on request).
    Cancelled,
    /// An admin refunded the paid order; its units went back.
    Refunded,
}

impl OrderStatus {
    /// Statuses only move to a higher rank.
    fn rank(self) -> u8 {
        match self {
            Self::Pending => 0,
            Self::Created | Self::Failed => 1,
            Self::Paid => 2,
            Self::Cancelled | Self::Refunded => 3,
        }
    }

    /// Whether an order with this status holds, or once held, its units.
    fn was_created(self) -> bool {
        matches!(self, Self::Created | Self::Paid | Self::Cancelled | Self::Refunded)
    }
}

/// Why an order failed or was cancelled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum OrderReason {
    Failed(FailReason),
    Cancelled(CancelReason),
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
    pub reason: Option<OrderReason>,
    pub accepted_at: DateTime<Utc>,
    /// When the processor created or failed the order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_at: Option<DateTime<Utc>>,
    /// When the order was paid (`confirmed_at` in rows from before
    /// payments).
    #[serde(default, skip_serializing_if = "Option::is_none", alias = "confirmed_at")]
    pub paid_at: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancelled_at: Option<DateTime<Utc>>,
    /// What the order owes (price × quantity, minor units); 0 when free.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub amount: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub currency: Option<Currency>,
    /// When a created order expires unless paid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pay_by: Option<DateTime<Utc>>,
    /// The provider's payment that paid it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payment_id: Option<String>,
    /// The newest checkout session opened for it (`cs_…`): the platform's
    /// own record of where the buyer pays, so asking again never opens a
    /// second one while it lives, whatever the provider remembers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkout_id: Option<String>,
    /// When the provider expires that session by itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkout_expires_at: Option<DateTime<Utc>>,
}

fn is_zero(value: &u64) -> bool {
    *value == 0
}

/// Order counts of one voucher, maintained by the projector. Each counts
/// the orders that ever reached that status.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct VoucherCounters {
    /// Orders seen (every order Redis admitted that reached the log).
    pub admitted: u64,
    /// Orders created (including those later confirmed or cancelled).
    pub created: u64,
    /// Orders failed.
    pub failed: u64,
    /// Orders paid (or, free, claimed); `confirmed` in older rows.
    #[serde(alias = "confirmed")]
    pub paid: u64,
    /// Paid orders an admin refunded.
    pub refunded: u64,
    /// Sum of the paid orders' amounts (refunded ones included).
    pub paid_amount: u64,
    /// Sum of the admin-refunded orders' amounts.
    pub refunded_amount: u64,
    /// Orders cancelled.
    pub cancelled: u64,
    /// Units taken by created orders.
    pub created_units: u64,
    /// Units given back by cancelled orders.
    pub cancelled_units: u64,
}

/// A voucher's definition as it stands after its updates.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct VoucherRecord {
    /// The definition, with `stock` and `ends_at` as updated since.
    #[serde(flatten)]
    pub definition: VoucherCreated,
    #[serde(default)]
    pub paused: bool,
    /// The newest update whose settings (pause, end) were applied.
    #[serde(default)]
    pub settings_version: Option<Uuid>,
}

impl VoucherRecord {
    /// A voucher as created.
    pub fn new(definition: VoucherCreated) -> Self {
        Self { definition, paused: false, settings_version: None }
    }

    /// Applies `update` (the record with event id `update_id`). The caller
    /// passes each update once; settings only move to a newer update's,
    /// so an update delivered late never undoes a newer one.
    pub fn update(&mut self, update_id: Uuid, update: &VoucherUpdated) {
        self.definition.stock = self.definition.stock.saturating_add(update.add_stock);
        if self.settings_version.is_some_and(|newest| newest >= update_id) {
            return;
        }
        if update.paused.is_none() && update.ends_at.is_none() {
            return;
        }
        if let Some(paused) = update.paused {
            self.paused = paused;
        }
        if let Some(ends_at) = update.ends_at {
            self.definition.ends_at = ends_at;
        }
        self.settings_version = Some(update_id);
    }
}

/// A voucher as clients see it (`GET /api/v1/vouchers/{voucher_id}`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct VoucherView {
    pub voucher_id: VoucherId,
    /// Units for sale in all (initial stock plus additions).
    pub stock: u64,
    /// Units not held by created orders: the persistent stock as projected.
    pub remaining: u64,
    pub per_user_limit: u32,
    pub begins_at: DateTime<Utc>,
    pub ends_at: DateTime<Utc>,
    /// Seconds a created order has to be paid.
    pub payment_seconds: u32,
    /// `payment_seconds` under its old name, kept for one release.
    pub hold_seconds: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Price of one unit in minor units; 0 when free.
    #[serde(default)]
    pub price: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub currency: Option<Currency>,
    pub paused: bool,
    pub admitted: u64,
    pub created: u64,
    #[serde(alias = "confirmed")]
    pub paid: u64,
    pub failed: u64,
    pub cancelled: u64,
    #[serde(default)]
    pub refunded: u64,
    /// Paid minus refunded amounts of its orders, in minor units.
    #[serde(default)]
    pub revenue: u64,
}

impl VoucherView {
    /// Combines a definition with its counters.
    pub fn new(record: &VoucherRecord, counters: VoucherCounters) -> Self {
        let definition = &record.definition;
        let held = counters.created_units.saturating_sub(counters.cancelled_units);
        Self {
            voucher_id: definition.voucher_id,
            stock: definition.stock,
            remaining: definition.stock.saturating_sub(held),
            per_user_limit: definition.per_user_limit,
            begins_at: definition.begins_at,
            ends_at: definition.ends_at,
            payment_seconds: definition.hold_seconds,
            hold_seconds: definition.hold_seconds,
            title: definition.title.clone(),
            description: definition.description.clone(),
            price: definition.price,
            currency: definition.currency,
            paused: record.paused,
            admitted: counters.admitted,
            created: counters.created,
            paid: counters.paid,
            failed: counters.failed,
            cancelled: counters.cancelled,
            refunded: counters.refunded,
            revenue: counters.paid_amount.saturating_sub(counters.refunded_amount),
        }
    }
}

/// What applying one order event changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transition {
    /// The status before (None: the order was not in the view).
    pub from: Option<OrderStatus>,
    /// The status it moved to.
    pub to: OrderStatus,
}

impl Transition {
    /// The order was not in the view before.
    pub fn first_seen(&self) -> bool {
        self.from.is_none()
    }

    /// Applies this transition to a voucher's counters (saturating: no
    /// count of events can make it panic).
    pub fn count(&self, counters: &mut VoucherCounters, quantity: u32, amount: u64) {
        if self.from == Some(self.to) {
            // Details filled in; the order did not move.
            return;
        }
        let units = u64::from(quantity);
        let bump = |counter: &mut u64, by: u64| *counter = counter.saturating_add(by);
        if self.first_seen() {
            bump(&mut counters.admitted, 1);
        }
        // A cancellation seen before its creation (possible only in a
        // rebuilt view) still counts the creation it implies.
        if self.to.was_created() && !self.from.is_some_and(OrderStatus::was_created) {
            bump(&mut counters.created, 1);
            bump(&mut counters.created_units, units);
        }
        match self.to {
            OrderStatus::Pending | OrderStatus::Created => {}
            OrderStatus::Failed => bump(&mut counters.failed, 1),
            OrderStatus::Paid => {
                bump(&mut counters.paid, 1);
                bump(&mut counters.paid_amount, amount);
            }
            OrderStatus::Cancelled => {
                bump(&mut counters.cancelled, 1);
                bump(&mut counters.cancelled_units, units);
            }
            OrderStatus::Refunded => {
                // A refund seen before its payment (a rebuilt view) still
                // counts the payment it implies.
                if self.from != Some(OrderStatus::Paid) {
                    bump(&mut counters.paid, 1);
                    bump(&mut counters.paid_amount, amount);
                }
                bump(&mut counters.refunded, 1);
                bump(&mut counters.refunded_amount, amount);
                bump(&mut counters.cancelled_units, units);
            }
        }
    }
}

impl OrderView {
    /// The row an order event describes; None for other events.
    pub fn from_event(event: &Event) -> Option<Self> {
        let row = |order: &OrderAccepted, status| Self {
            order_id: order.order_id,
            voucher_id: order.voucher_id,
            user_id: order.user_id.clone(),
            quantity: order.quantity,
            status,
            reason: None,
            accepted_at: order.accepted_at,
            decided_at: None,
            paid_at: None,
            cancelled_at: None,
            amount: order.amount,
            currency: order.currency,
            pay_by: None,
            payment_id: None,
            checkout_id: None,
            checkout_expires_at: None,
        };
        match event {
            Event::OrderAccepted(o) => Some(row(o, OrderStatus::Pending)),
            Event::OrderCreated(c) => {
                Some(Self { decided_at: Some(c.decided_at), pay_by: c.pay_by, ..row(&c.order, OrderStatus::Created) })
            }
            Event::OrderFailed(f) => Some(Self {
                decided_at: Some(f.decided_at),
                reason: Some(OrderReason::Failed(f.reason)),
                ..row(&f.order, OrderStatus::Failed)
            }),
            Event::OrderPaid(c) => Some(Self {
                paid_at: Some(c.paid_at),
                payment_id: c.payment_id.clone(),
                ..row(&c.order, OrderStatus::Paid)
            }),
            Event::OrderCancelled(c) if c.reason == CancelReason::Refunded => {
                Some(Self { cancelled_at: Some(c.cancelled_at), ..row(&c.order, OrderStatus::Refunded) })
            }
            Event::OrderCancelled(c) => Some(Self {
                cancelled_at: Some(c.cancelled_at),
                reason: Some(OrderReason::Cancelled(c.reason)),
                ..row(&c.order, OrderStatus::Cancelled)
            }),
            Event::VoucherCreated(_)
            | Event::VoucherUpdated(_)
            | Event::CancelRequested(_)
            | Event::ConfirmRequested(_)
            | Event::PaymentReceived(_)
            | Event::CheckoutOpened(_)
            | Event::RefundRequested(_)
            | Event::PaymentRefunded(_)
            | Event::QueueSeedCommitted(_)
            | Event::QueueJoined(_)
            | Event::QueueSeedRevealed(_)
            | Event::QueueEntryIssued(_)
            | Event::QueuePlaceExpired(_)
            | Event::QueueEntryUsed(_)
            | Event::DrawSeedCommitted(_)
            | Event::DrawEntered(_)
            | Event::DrawSeedRevealed(_)
            | Event::DrawRanked(_)
            | Event::DrawWinnersSelected(_)
            | Event::DrawWinnerPromoted(_)
            | Event::DrawWinUsed(_)
            | Event::WindowsExtended(_) => None,
        }
    }
}

/// Decides whether `incoming` replaces `existing`: only a move to a higher
/// status rank does. Returns the transition and the merged row (times the
/// incoming event does not carry are kept), or None when the event is a
/// duplicate. A stale event (an order's creation delivered after its
/// payment) moves nothing but still fills in what the row lacks (when it
/// was decided, its `pay_by`): a transition from a status to itself, which
/// counts nothing.
pub fn merge_order(existing: Option<&OrderView>, incoming: &OrderView) -> Option<(Transition, OrderView)> {
    match existing {
        Some(current) if current.status.rank() >= incoming.status.rank() => {
            let filled = OrderView {
                decided_at: current.decided_at.or(incoming.decided_at),
                paid_at: current.paid_at.or(incoming.paid_at),
                cancelled_at: current.cancelled_at.or(incoming.cancelled_at),
                pay_by: current.pay_by.or(incoming.pay_by),
                payment_id: current.payment_id.clone().or_else(|| incoming.payment_id.clone()),
                checkout_id: current.checkout_id.clone().or_else(|| incoming.checkout_id.clone()),
                checkout_expires_at: current.checkout_expires_at.or(incoming.checkout_expires_at),
                ..current.clone()
            };
            (filled != *current).then_some((Transition { from: Some(current.status), to: current.status }, filled))
        }
        Some(current) => {
            let merged = OrderView {
                decided_at: incoming.decided_at.or(current.decided_at),
                paid_at: incoming.paid_at.or(current.paid_at),
                cancelled_at: incoming.cancelled_at.or(current.cancelled_at),
                pay_by: incoming.pay_by.or(current.pay_by),
                payment_id: incoming.payment_id.clone().or_else(|| current.payment_id.clone()),
                checkout_id: incoming.checkout_id.clone().or_else(|| current.checkout_id.clone()),
                checkout_expires_at: incoming.checkout_expires_at.or(current.checkout_expires_at),
                ..incoming.clone()
            };
            Some((Transition { from: Some(current.status), to: incoming.status }, merged))
        }
        None => Some((Transition { from: None, to: incoming.status }, incoming.clone())),
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
    /// Vouchers newest first, created before `before` when given, at most
    /// `limit` (capped at [`MAX_PAGE`]).
    async fn vouchers(&self, before: Option<VoucherId>, limit: usize) -> Result<Vec<VoucherView>, StoreError>;
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
    use seckill_core::event::{OrderCancelled, OrderCreated, OrderFailed};

    fn accepted() -> OrderAccepted {
        OrderAccepted::now(VoucherId::generate(), UserId::parse("bob").expect("valid"), 2)
    }

    fn row(event: Event) -> OrderView {
        OrderView::from_event(&event).expect("an order row")
    }

    #[test]
    fn status_only_moves_forward() {
        let order = accepted();
        let pending = row(Event::OrderAccepted(order.clone()));
        let created = row(Event::OrderCreated(OrderCreated {
            order: order.clone(),
            decided_at: Utc::now(),
            remaining: 1,
            pay_by: None,
        }));

        // Outcome first, acceptance late: the late acceptance changes nothing.
        let (first, _) = merge_order(None, &created).expect("new row");
        assert_eq!(first, Transition { from: None, to: OrderStatus::Created });
        assert_eq!(merge_order(Some(&created), &pending), None);
        assert_eq!(merge_order(Some(&created), &created), None);

        // Acceptance first, then the outcome.
        assert!(merge_order(None, &pending).expect("new").0.first_seen());
        let (moved, _) = merge_order(Some(&pending), &created).expect("moves");
        assert!(!moved.first_seen());

        let mut counters = VoucherCounters::default();
        first.count(&mut counters, order.quantity, 0);
        assert_eq!(counters, VoucherCounters { admitted: 1, created: 1, created_units: 2, ..Default::default() });
    }

    #[test]
    fn a_cancellation_keeps_the_creation_time_and_returns_the_units() {
        let order = accepted();
        let created = row(Event::OrderCreated(OrderCreated {
            order: order.clone(),
            decided_at: Utc::now(),
            remaining: 1,
            pay_by: None,
        }));
        let cancelled = row(Event::OrderCancelled(OrderCancelled {
            order: order.clone(),
            cancelled_at: Utc::now(),
            reason: CancelReason::Expired,
            remaining: 3,
        }));
        let mut counters = VoucherCounters::default();
        let (transition, _) = merge_order(None, &created).expect("new");
        transition.count(&mut counters, 2, 0);
        let (transition, merged) = merge_order(Some(&created), &cancelled).expect("moves");
        transition.count(&mut counters, 2, 0);
        assert_eq!(merged.decided_at, created.decided_at);
        assert_eq!(merged.status, OrderStatus::Cancelled);
        assert_eq!(serde_json::to_value(&merged).expect("json")["reason"], "expired");
        assert_eq!(
            (counters.created, counters.cancelled, counters.created_units, counters.cancelled_units),
            (1, 1, 2, 2)
        );
        assert_eq!(merge_order(Some(&merged), &created), None, "a late creation changes nothing");
    }

    #[test]
    fn older_settings_never_undo_newer_ones_but_stock_adds_up() {
        let now = Utc::now();
        let definition = VoucherCreated {
            voucher_id: VoucherId::generate(),
            stock: 5,
            per_user_limit: 1,
            begins_at: now,
            ends_at: now + chrono::Duration::hours(1),
            hold_seconds: 0,
            shards: 1,
            title: None,
            description: None,
            price: 0,
            currency: None,
            queue: None,
            draw: None,
            challenge_bits: 0,
        };
        let (older, newer) = (Uuid::now_v7(), Uuid::now_v7());
        let pause =
            VoucherUpdated { voucher_id: definition.voucher_id, paused: Some(true), ends_at: None, add_stock: 2 };
        let resume = VoucherUpdated { paused: Some(false), add_stock: 3, ..pause.clone() };
        let mut record = VoucherRecord::new(definition);
        record.update(newer, &resume);
        record.update(older, &pause);
        assert!(!record.paused);
        assert_eq!(record.definition.stock, 10);
    }

    #[test]
    fn failed_rows_keep_their_reason() {
        let failed = row(Event::OrderFailed(OrderFailed {
            order: accepted(),
            decided_at: Utc::now(),
            reason: FailReason::SoldOut,
        }));
        let json = serde_json::to_value(&failed).expect("json");
        assert_eq!(json["status"], "FAILED");
        assert_eq!(json["reason"], "sold_out");
        let back: OrderView = serde_json::from_value(json).expect("reads back");
        assert_eq!(back.reason, Some(OrderReason::Failed(FailReason::SoldOut)));
    }

    #[test]
    fn payments_and_refunds_move_the_status_and_the_revenue() {
        let currency = Currency::parse("EUR").expect("valid");
        let order = OrderAccepted { amount: 700, currency: Some(currency), ..accepted() };
        let now = Utc::now();
        let pay_by = now + chrono::Duration::seconds(60);
        let created = row(Event::OrderCreated(OrderCreated {
            order: order.clone(),
            decided_at: now,
            remaining: 1,
            pay_by: Some(pay_by),
        }));
        assert_eq!((created.amount, created.currency, created.pay_by), (700, Some(currency), Some(pay_by)));
        let paid = row(Event::OrderPaid(seckill_core::event::OrderPaid {
            order: order.clone(),
            paid_at: now,
            payment_id: Some("pi_1".to_owned()),
        }));
        let refunded = row(Event::OrderCancelled(OrderCancelled {
            order: order.clone(),
            cancelled_at: now,
            reason: CancelReason::Refunded,
            remaining: 3,
        }));
        assert_eq!(refunded.status, OrderStatus::Refunded);
        assert_eq!(refunded.reason, None, "REFUNDED says why by itself");

        let mut counters = VoucherCounters::default();
        let (t, merged) = merge_order(None, &created).expect("new");
        t.count(&mut counters, 2, 700);
        let (t, merged) = merge_order(Some(&merged), &paid).expect("moves");
        t.count(&mut counters, 2, 700);
        assert_eq!(
            (merged.status, merged.payment_id.as_deref(), merged.pay_by),
            (OrderStatus::Paid, Some("pi_1"), Some(pay_by))
        );
        let (t, merged) = merge_order(Some(&merged), &refunded).expect("moves");
        t.count(&mut counters, 2, 700);
        assert_eq!(merged.status, OrderStatus::Refunded);
        assert!(
            merge_order(
                Some(&merged),
                &row(Event::OrderCancelled(OrderCancelled {
                    order,
                    cancelled_at: now,
                    reason: CancelReason::Requested,
                    remaining: 3,
                }))
            )
            .is_none(),
            "a refunded order is final"
        );
        assert_eq!(
            (counters.paid, counters.refunded, counters.paid_amount, counters.refunded_amount),
            (1, 1, 700, 700)
        );
        assert_eq!(counters.created_units - counters.cancelled_units, 0, "the refund gave the units back");

        // Rows and counters stored before payments read as paid.
        let old: OrderView = serde_json::from_value(serde_json::json!({"order_id": merged.order_id,
            "voucher_id": merged.voucher_id, "user_id": "bob", "quantity": 1, "status": "CONFIRMED",
            "accepted_at": now, "confirmed_at": now}))
        .expect("an old row");
        assert_eq!((old.status, old.paid_at), (OrderStatus::Paid, Some(now)));
        let old: VoucherCounters = serde_json::from_value(serde_json::json!({"confirmed": 4})).expect("old counters");
        assert_eq!(old.paid, 4);
    }
}
