//! The fold: every fact the log holds about a voucher and its orders, each
//! event once (by event id), with where it first appeared in its topic.
//!
//! Positions matter because the processor reads a voucher's sales records
//! in offset order (they share a partition) and writes its outcomes in that
//! order: positions, not clocks, say which decision came last or whether a
//! cancellation followed its creation.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use chrono::{DateTime, Utc};
use seckill_core::event::{
    CancelReason, FailReason, OrderAccepted, PaymentSource, RefundReason, VoucherCreated, WindowsExtended,
    MAX_CHECKOUTS,
};
use seckill_core::ids::{OrderId, UserId, VoucherId};
use seckill_core::money::Currency;
use seckill_core::{Envelope, Event};
use uuid::Uuid;

use super::draw::DrawLog;
pub use super::position::Position;
use super::queue::{Logged, QueueLog};

/// What one outcome event says happened to an order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutcomeKind {
    Created,
    Failed(FailReason),
    /// `OrderPaid`: paid, or (a free voucher) claimed by its owner.
    Paid,
    Cancelled(CancelReason),
}

/// One outcome event on the orders topic, as first seen. The processor
/// re-emits an outcome with its first event id, so a redelivery is the same
/// outcome; a second event id is a second outcome.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    pub event_id: Uuid,
    pub kind: OutcomeKind,
    /// `decided_at`, `paid_at` or `cancelled_at`.
    pub at: DateTime<Utc>,
    /// The persistent stock left after it (creations and cancellations).
    pub remaining: Option<u64>,
    /// Where it first appeared on the orders topic.
    pub position: Position,
}

/// Everything the log says about one order.
#[derive(Clone, Debug, PartialEq)]
pub struct OrderLog {
    pub user_id: UserId,
    pub quantity: u32,
    pub accepted_at: DateTime<Utc>,
    /// What the order owes (0 when free), as the gate fixed it; the
    /// acceptance's copy wins over an outcome's.
    pub amount: u64,
    pub currency: Option<Currency>,
    /// The `pay_by` its creation carried, if one did (see
    /// [`VoucherLog::pay_by`] for the deadline the processor applied).
    pub pay_by: Option<DateTime<Utc>>,
    /// Where its `OrderAccepted` first appeared on the sales topic; `None`
    /// when the log has outcomes of the order but no acceptance.
    pub accepted: Option<Position>,
    /// `OrderCreated` and `OrderFailed` events, each event id once.
    pub decisions: Vec<Outcome>,
    /// `OrderCancelled` events, each event id once.
    pub cancellations: Vec<Outcome>,
    /// `OrderPaid` events, each event id once.
    pub paid: Vec<Outcome>,
}

/// Where an order ended, as the view would show it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FinalStatus {
    Created,
    /// Paid, or (a free voucher) claimed by its owner.
    Paid,
    Cancelled,
    Failed,
    /// Accepted and not decided (yet).
    Pending,
}

impl FinalStatus {
    /// Every status, in the order charts stack them.
    pub const ALL: [FinalStatus; 5] = [Self::Created, Self::Paid, Self::Cancelled, Self::Failed, Self::Pending];

    /// The lowercase name used in the report and its data attributes.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Created => "created",
            Self::Paid => "paid",
            Self::Cancelled => "cancelled",
            Self::Failed => "failed",
            Self::Pending => "pending",
        }
    }
}

impl OrderLog {
    fn new(order: &OrderAccepted) -> Self {
        Self {
            user_id: order.user_id.clone(),
            quantity: order.quantity,
            accepted_at: order.accepted_at,
            amount: order.amount,
            currency: order.currency,
            pay_by: None,
            accepted: None,
            decisions: Vec::new(),
            cancellations: Vec::new(),
            paid: Vec::new(),
        }
    }

    /// The first creation of the order, if it was created.
    pub fn creation(&self) -> Option<&Outcome> {
        self.decisions.iter().filter(|d| d.kind == OutcomeKind::Created).min_by_key(|d| d.position)
    }

    /// The first decision (creation or failure) on the orders topic.
    pub fn first_decision(&self) -> Option<&Outcome> {
        self.decisions.iter().min_by_key(|d| d.position)
    }

    /// The first cancellation on the orders topic.
    pub fn cancellation(&self) -> Option<&Outcome> {
        self.cancellations.iter().min_by_key(|c| c.position)
    }

    /// Where the order ended: a cancellation outranks a payment, which
    /// outranks the decision (as in the view, statuses only move forward).
    pub fn final_status(&self) -> FinalStatus {
        if !self.cancellations.is_empty() {
            FinalStatus::Cancelled
        } else if !self.paid.is_empty() {
            FinalStatus::Paid
        } else if self.creation().is_some() {
            FinalStatus::Created
        } else if !self.decisions.is_empty() {
            FinalStatus::Failed
        } else {
            FinalStatus::Pending
        }
    }

    /// Whether the processor refused the order (decided, never created).
    pub fn failed(&self) -> bool {
        !self.decisions.is_empty() && self.creation().is_none()
    }

    /// Whether the order holds units at the gate: admitted and neither
    /// failed nor cancelled (a pending order holds them too); the gate gave
    /// back the units of the others.
    pub fn holds_admission(&self) -> bool {
        !self.failed() && self.cancellations.is_empty()
    }
}

/// Stock an admin added (or an update that changed only settings).
#[derive(Clone, Debug, PartialEq)]
pub struct StockUpdate {
    pub add_stock: u64,
    /// The pause it set or lifted, if any (what the draw's window checks
    /// hold the logged stalls against).
    pub paused: Option<bool>,
    pub emitted_at: DateTime<Utc>,
    /// Where it first appeared on the sales topic.
    pub position: Position,
}

/// One voucher's history.
#[derive(Clone, Debug, PartialEq)]
pub struct VoucherLog {
    pub voucher_id: VoucherId,
    /// The sale's definition; `None` when the log lacks it.
    pub definition: Option<VoucherCreated>,
    /// Updates by event id, each once.
    pub updates: BTreeMap<Uuid, StockUpdate>,
    pub orders: HashMap<OrderId, OrderLog>,
    /// Where each order's `CancelRequested` records appeared on the sales
    /// topic, with the reason each gave (see
    /// [`VoucherLog::cancellation_decided_at`] for the one the processor
    /// acted on).
    pub cancel_requests: HashMap<OrderId, BTreeMap<Position, CancelReason>>,
    /// The checkout sessions each expiry request says it settled (the
    /// sweeper's `settled_checkouts`), by the request's position.
    expiry_settled: HashMap<OrderId, BTreeMap<Position, Vec<String>>>,
    /// Each order's checkout sessions (`CheckoutOpened`, on the sales topic
    /// as the requests are) by where each first appeared.
    checkouts: HashMap<OrderId, HashMap<String, Position>>,
    /// Every payment the log mentions, by the provider's payment id.
    pub payments: BTreeMap<String, PaymentLog>,
    /// The payment ids each order's payments go by.
    payments_of: HashMap<OrderId, BTreeSet<String>>,
    /// The waiting room's records (queue-mode sales; empty otherwise).
    pub queue: QueueLog,
    /// The draw's records (draw-mode sales; empty otherwise).
    pub draw: DrawLog,
    /// The stalls of the waiting room or the draw, by event id: while each
    /// lasted nobody could order, so the windows open then ran longer.
    pub stalls: BTreeMap<Uuid, Logged<WindowsExtended>>,
}

/// Everything the log says about one payment.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PaymentLog {
    /// The order it was made for.
    pub order_id: Option<OrderId>,
    /// What the provider reported (0 when no `PaymentReceived` is in the
    /// log).
    pub amount: u64,
    pub currency: Option<Currency>,
    /// `PaymentReceived` events by event id: when it was paid, how it was
    /// learnt.
    pub reported: BTreeMap<Uuid, (DateTime<Utc>, PaymentSource)>,
    /// Where it was first reported on the sales topic: where the processor
    /// decided it.
    pub reported_position: Option<Position>,
    /// `OrderPaid` events naming it, by event id, with the order each paid.
    pub paid: BTreeMap<Uuid, OrderId>,
    /// `RefundRequested` events by event id.
    pub refund_requests: BTreeMap<Uuid, RefundRequest>,
    /// `PaymentRefunded` events by the provider's refund id.
    pub refunds: BTreeMap<String, RefundDone>,
}

/// One `RefundRequested` event.
#[derive(Clone, Debug, PartialEq)]
pub struct RefundRequest {
    pub reason: RefundReason,
    pub amount: u64,
    pub currency: Currency,
    pub requested_at: DateTime<Utc>,
    /// Where it first appeared on the orders topic: after the outcomes the
    /// processor had written for the order when it decided the payment.
    pub position: Position,
}

/// One refund the provider acknowledged (`PaymentRefunded`).
#[derive(Clone, Debug, PartialEq)]
pub struct RefundDone {
    pub amount: u64,
    pub currency: Currency,
    pub refunded_at: DateTime<Utc>,
}

impl PaymentLog {
    /// Amount refunded, each provider refund once.
    pub fn refunded_amount(&self) -> u64 {
        self.refunds.values().map(|refund| refund.amount).sum()
    }

    /// Whether a `PaymentReceived` reported it.
    pub fn is_reported(&self) -> bool {
        !self.reported.is_empty()
    }

    /// When the provider completed it: the earliest time reported (every
    /// report of one payment carries the provider's own time).
    pub fn paid_at(&self) -> Option<DateTime<Utc>> {
        self.reported.values().map(|(at, _)| *at).min()
    }

    /// The distinct orders `OrderPaid` events say it paid.
    pub fn orders_paid(&self) -> BTreeSet<OrderId> {
        self.paid.values().copied().collect()
    }

    /// Why it is refunded: the reason of its first refund request on the
    /// orders topic.
    pub fn refund_reason(&self) -> Option<RefundReason> {
        self.refund_requests.values().min_by_key(|request| request.position).map(|request| request.reason)
    }

    /// What became of it, as the log tells.
    pub fn settlement(&self) -> Settlement {
        let paid = self.orders_paid();
        let own = |order: &OrderId| Some(*order) == self.order_id;
        if !self.is_reported() {
            Settlement::Unreported
        } else if paid.len() > 1 || paid.iter().any(|order| !own(order)) {
            Settlement::PaidWrongly
        } else if self.refunds.len() > 1 {
            Settlement::RefundedMoreThanOnce
        } else if self.refunds.len() == 1 {
            Settlement::Refunded
        } else if !self.refund_requests.is_empty() {
            Settlement::RefundPending
        } else if paid.len() == 1 {
            Settlement::Kept
        } else {
            Settlement::Undecided
        }
    }
}

/// What became of one payment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Settlement {
    /// It paid the order it was made for, and was not refunded.
    Kept,
    /// Refunded exactly once (one provider refund id).
    Refunded,
    /// A refund was requested and not (yet) acknowledged.
    RefundPending,
    /// Refunded under two or more provider refund ids.
    RefundedMoreThanOnce,
    /// Named as paying a second order, or an order it was not made for.
    PaidWrongly,
    /// Reported, and neither paid an order nor was refunded.
    Undecided,
    /// Named by `OrderPaid` or refund events but never reported by a
    /// `PaymentReceived`.
    Unreported,
}

impl Settlement {
    /// Whether the payment is settled as the rules want.
    pub fn is_settled(self) -> bool {
        matches!(self, Self::Kept | Self::Refunded)
    }
}

impl VoucherLog {
    /// A voucher the log has said nothing about yet.
    pub fn new(voucher_id: VoucherId) -> Self {
        Self {
            voucher_id,
            definition: None,
            updates: BTreeMap::new(),
            orders: HashMap::new(),
            cancel_requests: HashMap::new(),
            expiry_settled: HashMap::new(),
            checkouts: HashMap::new(),
            payments: BTreeMap::new(),
            payments_of: HashMap::new(),
            queue: QueueLog::default(),
            draw: DrawLog::default(),
            stalls: BTreeMap::new(),
        }
    }

    fn payment(&mut self, payment_id: &str, order_id: OrderId) -> &mut PaymentLog {
        self.payments_of.entry(order_id).or_default().insert(payment_id.to_owned());
        let payment = self.payments.entry(payment_id.to_owned()).or_default();
        payment.order_id.get_or_insert(order_id);
        payment
    }

    /// Units offered before any update: the definition's stock.
    pub fn initial_stock(&self) -> u64 {
        self.definition.as_ref().map_or(0, |d| d.stock)
    }

    /// Units added by updates, each update once.
    pub fn added_stock(&self) -> u64 {
        self.updates.values().map(|u| u.add_stock).sum()
    }

    /// Takes one event of this voucher, read at `position` of its topic,
    /// into account. Duplicates change nothing; the order of calls does not
    /// matter.
    pub fn apply(&mut self, envelope: &Envelope, position: Position) {
        let event_id = envelope.event_id;
        match &envelope.event {
            Event::VoucherCreated(definition) => self.definition = Some(definition.clone()),
            Event::VoucherUpdated(update) => {
                let incoming = StockUpdate {
                    add_stock: update.add_stock,
                    paused: update.paused,
                    emitted_at: envelope.emitted_at,
                    position,
                };
                self.updates
                    .entry(event_id)
                    .and_modify(|kept| kept.position = kept.position.min(position))
                    .or_insert(incoming);
            }
            Event::OrderAccepted(order) => {
                let log = self.order(order);
                log.accepted = Some(log.accepted.map_or(position, |kept| kept.min(position)));
                // The acceptance is what the gate admitted; an outcome's copy
                // of the order is the same data, but the acceptance wins.
                log.accepted_at = order.accepted_at;
                (log.amount, log.currency) = (order.amount, order.currency);
            }
            Event::CancelRequested(request) => {
                let reason = request.reason.unwrap_or(CancelReason::Requested);
                self.cancel_requests.entry(request.order_id).or_default().insert(position, reason);
                if let (CancelReason::Expired, Some(settled)) = (reason, &request.settled_checkouts) {
                    self.expiry_settled.entry(request.order_id).or_default().insert(position, settled.clone());
                }
            }
            Event::ConfirmRequested(_) => {}
            Event::QueueSeedCommitted(_)
            | Event::QueueJoined(_)
            | Event::QueueSeedRevealed(_)
            | Event::QueueEntryIssued(_)
            | Event::QueuePlaceExpired(_)
            | Event::QueueEntryUsed(_) => self.queue.apply(envelope, position),
            Event::DrawSeedCommitted(_)
            | Event::DrawEntered(_)
            | Event::DrawSeedRevealed(_)
            | Event::DrawRanked(_)
            | Event::DrawWinnersSelected(_)
            | Event::DrawWinnerPromoted(_)
            | Event::DrawWinUsed(_) => self.draw.apply(envelope, position),
            Event::WindowsExtended(stall) => {
                let incoming = Logged { position, emitted_at: envelope.emitted_at, record: stall.clone() };
                self.stalls
                    .entry(event_id)
                    .and_modify(|kept| {
                        if position < kept.position {
                            kept.position = position;
                        }
                    })
                    .or_insert(incoming);
            }
            // The checkouts a buyer was sent to: the provider's business
            // until one is paid (`PaymentReceived`); kept only to tell
            // which expiry request the processor acted on.
            Event::CheckoutOpened(opened) => {
                let sessions = self.checkouts.entry(opened.order_id).or_default();
                sessions
                    .entry(opened.session_id.clone())
                    .and_modify(|at| *at = (*at).min(position))
                    .or_insert(position);
            }
            Event::PaymentReceived(received) => {
                let payment = self.payment(&received.payment_id, received.order_id);
                payment.amount = received.amount;
                payment.currency = Some(received.currency);
                payment.reported.entry(event_id).or_insert((received.paid_at, received.source));
                payment.reported_position = Some(payment.reported_position.map_or(position, |kept| kept.min(position)));
            }
            Event::RefundRequested(refund) => {
                let payment = self.payment(&refund.payment_id, refund.order_id);
                let incoming = RefundRequest {
                    reason: refund.reason,
                    amount: refund.amount,
                    currency: refund.currency,
                    requested_at: refund.requested_at,
                    position,
                };
                payment
                    .refund_requests
                    .entry(event_id)
                    .and_modify(|kept| kept.position = kept.position.min(position))
                    .or_insert(incoming);
            }
            Event::PaymentRefunded(refunded) => {
                let payment = self.payment(&refunded.payment_id, refunded.order_id);
                let done = RefundDone {
                    amount: refunded.amount,
                    currency: refunded.currency,
                    refunded_at: refunded.refunded_at,
                };
                payment.refunds.entry(refunded.refund_id.clone()).or_insert(done);
            }
            Event::OrderCreated(created) => {
                let outcome = outcome(event_id, OutcomeKind::Created, created.decided_at, Some(created.remaining));
                let order = self.order(&created.order);
                push(&mut order.decisions, outcome(position));
                order.pay_by = order.pay_by.or(created.pay_by);
            }
            Event::OrderFailed(failed) => {
                let outcome = outcome(event_id, OutcomeKind::Failed(failed.reason), failed.decided_at, None);
                push(&mut self.order(&failed.order).decisions, outcome(position));
            }
            Event::OrderPaid(paid) => {
                let outcome = outcome(event_id, OutcomeKind::Paid, paid.paid_at, None);
                push(&mut self.order(&paid.order).paid, outcome(position));
                if let Some(payment_id) = &paid.payment_id {
                    self.payment(payment_id, paid.order.order_id).paid.insert(event_id, paid.order.order_id);
                }
            }
            Event::OrderCancelled(cancelled) => {
                let kind = OutcomeKind::Cancelled(cancelled.reason);
                let outcome = outcome(event_id, kind, cancelled.cancelled_at, Some(cancelled.remaining));
                push(&mut self.order(&cancelled.order).cancellations, outcome(position));
            }
        }
    }

    /// The order's payment deadline as the processor applied it: the
    /// `pay_by` its creation carried, else the definition's
    /// `payment_seconds` after its first creation (whole seconds, as
    /// [`seckill_core::decision::pay_by`] computes it). None for orders
    /// never created or of vouchers holding orders without payment.
    pub fn pay_by(&self, order: &OrderLog) -> Option<DateTime<Utc>> {
        let creation = order.creation()?;
        let hold = self.definition.as_ref().map_or(0, |definition| definition.hold_seconds);
        order.pay_by.or_else(|| (hold > 0).then(|| seckill_core::decision::pay_by(creation.at, hold)))
    }

    /// Whether the sale takes money: priced, or payments or amounts in its
    /// log. The payment rules and the report's payments apply to these.
    pub fn takes_payments(&self) -> bool {
        self.definition.as_ref().is_some_and(|definition| definition.price > 0)
            || !self.payments.is_empty()
            || self.orders.values().any(|order| order.amount > 0)
    }

    /// Whether the sale is queue mode: its definition has a waiting room,
    /// or the log has records of one (so a room's records on a voucher
    /// defined first come, first served are audited, not ignored). The
    /// queue rules and the report's waiting room apply to these.
    pub fn queue_mode(&self) -> bool {
        self.definition.as_ref().is_some_and(|definition| definition.queue.is_some()) || !self.queue.is_empty()
    }

    /// Whether the sale is draw mode: its definition has a draw, or the log
    /// has records of one (so draw records on a voucher defined otherwise
    /// are audited, not ignored). The draw rules apply to these.
    pub fn draw_mode(&self) -> bool {
        self.definition.as_ref().is_some_and(|definition| definition.draw.is_some()) || !self.draw.is_empty()
    }

    /// Where, in the processor's reading of the sales topic, it decided the
    /// cancellation of `order` that gave `reason`: the first request with
    /// that reason (an earlier one it ignored, e.g. an expiry of a
    /// paid order, did not cancel it) that it did not refuse for a checkout
    /// its sweeper had not settled, and no earlier than the order's
    /// acceptance: a request that reached the log before its order (sent
    /// right after the `202`, it overtook the order through the outbox)
    /// waited and was decided right after the order. None when neither the
    /// request nor the acceptance is in the log.
    pub fn cancellation_decided_at(&self, order_id: &OrderId, reason: CancelReason) -> Option<Position> {
        let order = self.orders.get(order_id);
        let requests = self.cancel_requests.get(order_id);
        let same_reason = requests.and_then(|requests| {
            requests.iter().find(|(at, asked)| **asked == reason && !self.expiry_refused(order_id, **at))
        });
        let same_reason = same_reason.map(|(position, _)| *position);
        // An unpaid order also expires with a payment made after its
        // pay_by: decided where that payment was reported.
        let late_payment = (reason == CancelReason::Expired).then(|| self.late_payment_reported(order_id)).flatten();
        let any_request = || requests.and_then(|requests| requests.keys().next().copied());
        let request = match (same_reason, late_payment) {
            (Some(request), Some(payment)) => Some(request.min(payment)),
            (request, payment) => request.or(payment).or_else(any_request),
        };
        let accepted = order.and_then(|order| order.accepted);
        request.map(|request| accepted.map_or(request, |accepted| request.max(accepted)))
    }

    /// Whether the expiry request of `order_id` at `at` was one the
    /// processor ignored because its sweeper had not settled every checkout
    /// session the log held for the order by then (`decision::cancel`,
    /// "unsettled_checkout"; the sweeper asks again later, and that request
    /// is the one that cancels). The processor keeps an order's first
    /// [`MAX_CHECKOUTS`] sessions, so only those count.
    fn expiry_refused(&self, order_id: &OrderId, at: Position) -> bool {
        let Some(settled) = self.expiry_settled.get(order_id).and_then(|requests| requests.get(&at)) else {
            return false;
        };
        let mut sessions: Vec<(Position, &String)> =
            self.checkouts.get(order_id).into_iter().flatten().map(|(id, opened)| (*opened, id)).collect();
        sessions.sort_unstable();
        sessions.into_iter().take(MAX_CHECKOUTS).filter(|(opened, _)| *opened < at).any(|(_, id)| !settled.contains(id))
    }

    /// Where the first payment of `order_id` refunded as late was reported.
    fn late_payment_reported(&self, order_id: &OrderId) -> Option<Position> {
        let late = |payment: &&PaymentLog| payment.refund_requests.values().any(|r| r.reason == RefundReason::Late);
        self.payments_of
            .get(order_id)?
            .iter()
            .filter_map(|id| self.payments.get(id))
            .filter(late)
            .filter_map(|payment| payment.reported_position)
            .min()
    }

    fn order(&mut self, order: &OrderAccepted) -> &mut OrderLog {
        self.orders.entry(order.order_id).or_insert_with(|| OrderLog::new(order))
    }
}

/// An outcome waiting for its position.
fn outcome(
    event_id: Uuid,
    kind: OutcomeKind,
    at: DateTime<Utc>,
    remaining: Option<u64>,
) -> impl FnOnce(Position) -> Outcome {
    move |position| Outcome { event_id, kind, at, remaining, position }
}

/// Adds `incoming` unless its event id is there already (then keeps the
/// earlier position).
fn push(outcomes: &mut Vec<Outcome>, incoming: Outcome) {
    match outcomes.iter_mut().find(|kept| kept.event_id == incoming.event_id) {
        Some(kept) => kept.position = kept.position.min(incoming.position),
        None => outcomes.push(incoming),
    }
}
