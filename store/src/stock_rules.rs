//! Applying sales-topic inputs to a stock state, the same way for every
//! backend: each backend only says how to read and write its rows.

use std::collections::HashSet;

use chrono::{DateTime, Utc};
use seckill_core::decision::{self, FollowUp, OrderRecord, Request, SaleWindow, StockLevel, MAX_PARKED};
use seckill_core::event::{CancelReason, Event, OrderAccepted, OrderRequest, RefundReason};
use seckill_core::{Envelope, OrderId, UserId, VoucherId};
use uuid::Uuid;

use crate::{Decided, StockInput, StoreError};

/// The rows the rules read and write. Writes take effect for later reads
/// of the same state; the backend makes them durable all at once.
pub(crate) trait StockState {
    fn level(&self, voucher: VoucherId) -> Result<Option<StockLevel>, StoreError>;
    fn put_level(&mut self, voucher: VoucherId, level: &StockLevel) -> Result<(), StoreError>;
    /// The voucher's end and pauses as the log set them; None for vouchers
    /// stored before they were kept.
    fn window(&self, voucher: VoucherId) -> Result<Option<SaleWindow>, StoreError>;
    fn put_window(&mut self, voucher: VoucherId, window: &SaleWindow) -> Result<(), StoreError>;
    /// What was decided about the order so far.
    fn order(&self, voucher: VoucherId, order: OrderId) -> Result<Option<OrderRecord>, StoreError>;
    fn put_order(&mut self, voucher: VoucherId, order: OrderId, record: &OrderRecord) -> Result<(), StoreError>;
    /// Units held by the user's created, not cancelled, orders of the voucher.
    fn held(&self, voucher: VoucherId, user: &UserId) -> Result<u64, StoreError>;
    fn put_held(&mut self, voucher: VoucherId, user: &UserId, units: u64) -> Result<(), StoreError>;
    /// The order `user`'s `Idempotency-Key` `key` first came with for the
    /// voucher, if one did.
    fn keyed_order(&self, voucher: VoucherId, user: &UserId, key: &str) -> Result<Option<OrderId>, StoreError>;
    fn put_keyed_order(
        &mut self,
        voucher: VoucherId,
        user: &UserId,
        key: &str,
        order: OrderId,
    ) -> Result<(), StoreError>;
    fn update_applied(&self, voucher: VoucherId, update: Uuid) -> Result<bool, StoreError>;
    fn mark_update(&mut self, voucher: VoucherId, update: Uuid) -> Result<(), StoreError>;
    /// Records (`keep`) or forgets that `order` expires at `deadline`.
    fn hold(
        &mut self,
        deadline: DateTime<Utc>,
        order: OrderId,
        voucher: VoucherId,
        keep: bool,
    ) -> Result<(), StoreError>;
}

/// The outcomes a batch emits, each once: an order's history emitted again
/// for two of its redelivered inputs is sent once.
#[derive(Debug, Default)]
pub(crate) struct Outcomes {
    decided: Vec<Decided>,
    emitted: HashSet<Uuid>,
}

impl Outcomes {
    fn push(&mut self, outcome: Envelope, replayed: bool) {
        if self.emitted.insert(outcome.event_id) {
            self.decided.push(Decided { outcome, replayed });
        }
    }

    /// Emits every outcome of `record` again, in the order they were decided.
    fn replay(&mut self, record: &OrderRecord) {
        for outcome in record.history() {
            self.push(outcome.clone(), true);
        }
    }

    /// Outcomes pushed so far.
    pub(crate) fn len(&self) -> usize {
        self.decided.len()
    }

    /// The outcomes, in the order they were pushed.
    pub(crate) fn into_vec(self) -> Vec<Decided> {
        self.decided
    }
}

/// Applies one input, pushing the outcomes to emit onto `outcomes`.
pub(crate) fn apply_input(
    state: &mut impl StockState,
    input: StockInput,
    outcomes: &mut Outcomes,
) -> Result<(), StoreError> {
    match input {
        StockInput::Voucher(voucher) => {
            if state.level(voucher.voucher_id)?.is_none() {
                let level = StockLevel::new(voucher.stock, voucher.hold_seconds, voucher.per_user_limit);
                state.put_level(voucher.voucher_id, &level)?;
                state.put_window(voucher.voucher_id, &SaleWindow::new(voucher.ends_at))?;
            }
        }
        StockInput::Update { update_id, update } => {
            if state.update_applied(update.voucher_id, update_id)? {
                return Ok(());
            }
            // An update of a voucher this store never saw cannot change
            // anything; it is still marked, so it never applies later.
            if let Some(mut level) = state.level(update.voucher_id)? {
                if update.add_stock > 0 {
                    level.add(update.add_stock);
                    state.put_level(update.voucher_id, &level)?;
                }
                // A pause, a resume or a new end, placed by when it was
                // made: the processor judges orders by it even if Redis
                // loses it.
                let mut window = state.window(update.voucher_id)?.unwrap_or_default();
                if window.apply(update_id, &update) {
                    state.put_window(update.voucher_id, &window)?;
                }
            }
            state.mark_update(update.voucher_id, update_id)?;
        }
        StockInput::Order(order) => decide_order(state, order, seckill_core::clock::now(), outcomes)?,
        StockInput::OrderAsDecided { order, decided_at } => decide_order(state, order, decided_at, outcomes)?,
        StockInput::Cancel(request) => {
            let (voucher, order) = (request.voucher_id, request.order_id);
            let mut record = state.order(voucher, order)?.unwrap_or_default();
            if follow_up(state, &mut record, Request::Cancel(request), outcomes)? {
                state.put_order(voucher, order, &record)?;
            }
        }
        StockInput::Confirm(request) => {
            let (voucher, order) = (request.voucher_id, request.order_id);
            let mut record = state.order(voucher, order)?.unwrap_or_default();
            if follow_up(state, &mut record, Request::Confirm(request), outcomes)? {
                state.put_order(voucher, order, &record)?;
            }
        }
        StockInput::Checkout(opened) => {
            let (voucher, order) = (opened.voucher_id, opened.order_id);
            let mut record = state.order(voucher, order)?.unwrap_or_default();
            if record.add_checkout(&opened.session_id) {
                state.put_order(voucher, order, &record)?;
            }
        }
        StockInput::Pay(payment) => {
            let (voucher, order) = (payment.voucher_id, payment.order_id);
            let mut record = state.order(voucher, order)?.unwrap_or_default();
            if follow_up(state, &mut record, Request::Pay(payment), outcomes)? {
                state.put_order(voucher, order, &record)?;
            }
        }
    }
    Ok(())
}

/// Decides an accepted order, then the requests that arrived before it.
/// Decides `order`, the decision dated `decided_at` (its `pay_by` counts
/// from it).
fn decide_order(
    state: &mut impl StockState,
    order: OrderAccepted,
    decided_at: DateTime<Utc>,
    outcomes: &mut Outcomes,
) -> Result<(), StoreError> {
    let (order_id, voucher_id) = (order.order_id, order.voucher_id);
    let mut record = state.order(voucher_id, order_id)?.unwrap_or_default();
    if record.is_decided() {
        outcomes.replay(&record);
        return Ok(());
    }
    let mut level = state.level(voucher_id)?;
    let window = state.window(voucher_id)?;
    let held = state.held(voucher_id, &order.user_id)?;
    let user = order.user_id.clone();
    let quantity = u64::from(order.quantity);
    // The first order under a key is the request's, whatever its outcome; a
    // later one is a retry Redis admitted twice.
    let first = match &order.idempotency_key {
        Some(key) => {
            let first = state.keyed_order(voucher_id, &user, key)?;
            if first.is_none() {
                state.put_keyed_order(voucher_id, &user, key, order_id)?;
            }
            first
        }
        None => None,
    };
    let result = decision::decide_request(level.as_mut(), window.as_ref(), held, first, &order);
    let mut outcome = decision::outcome(order, result, decided_at);
    if let (Event::OrderCreated(created), Some(level)) = (&mut outcome.event, &level) {
        created.pay_by = level.hold_deadline(created);
    }
    if let (Ok(_), Some(level)) = (&result, level) {
        state.put_level(voucher_id, &level)?;
        state.put_held(voucher_id, &user, held.saturating_add(quantity))?;
        hold(state, &level, &outcome, true)?;
    }
    record.decision = Some(outcome.clone());
    outcomes.push(outcome, false);
    for request in std::mem::take(&mut record.parked) {
        follow_up(state, &mut record, request, outcomes)?;
    }
    state.put_order(voucher_id, order_id, &record)
}

/// Decides a request about the order `record` describes; returns whether
/// the record changed.
fn follow_up(
    state: &mut impl StockState,
    record: &mut OrderRecord,
    request: Request,
    outcomes: &mut Outcomes,
) -> Result<bool, StoreError> {
    let (voucher, order) = match &request {
        Request::Cancel(r) | Request::Confirm(r) => (r.voucher_id, r.order_id),
        Request::Pay(p) => (p.voucher_id, p.order_id),
    };
    let (decided, level) = match &request {
        Request::Cancel(r) => {
            let mut level = state.level(voucher)?;
            (decision::cancel(level.as_mut(), record, r, seckill_core::clock::now()), level)
        }
        Request::Confirm(r) => {
            let level = state.level(voucher)?;
            (decision::confirm(level.as_ref(), record, r, seckill_core::clock::now()), None)
        }
        Request::Pay(p) => {
            let level = state.level(voucher)?;
            (decision::pay(level.as_ref(), record, p), None)
        }
    };
    match decided {
        FollowUp::Apply(outcome) => {
            if let Some(level) = level {
                state.put_level(voucher, &level)?;
            }
            // A payment made after `pay_by` of an order still unpaid: the
            // deadline has passed, so the order expires with its refund
            // (the provider's clock says so; no need to wait for the sweep).
            let expires = matches!(&outcome.event, Event::RefundRequested(r) if r.reason == RefundReason::Late)
                && matches!(record.latest().map(|e| &e.event), Some(Event::OrderCreated(_)));
            // Paid or cancelled, a created order no longer expires; a
            // refund leaves the order as it stands.
            let refund = matches!(outcome.event, Event::RefundRequested(_));
            if let (false, Some(level), Some(created)) = (refund, state.level(voucher)?, &record.decision) {
                hold(state, &level, created, false)?;
            }
            match &outcome.event {
                Event::OrderCancelled(cancelled) => {
                    let held = state.held(voucher, &cancelled.order.user_id)?;
                    let units = u64::from(cancelled.order.quantity);
                    state.put_held(voucher, &cancelled.order.user_id, held.saturating_sub(units))?;
                    let admin_refund = match (&record.paid, cancelled.reason) {
                        (Some(Envelope { event: Event::OrderPaid(paid), .. }), CancelReason::Refunded) => {
                            decision::admin_refund(paid, cancelled.cancelled_at)
                        }
                        _ => None,
                    };
                    record.cancelled = Some(outcome.clone());
                    outcomes.push(outcome, false);
                    if let Some(refund) = admin_refund {
                        record.refunds.push(refund.clone());
                        outcomes.push(refund, false);
                    }
                    return Ok(true);
                }
                Event::RefundRequested(_) => record.refunds.push(outcome.clone()),
                _ => record.paid = Some(outcome.clone()),
            }
            outcomes.push(outcome, false);
            if expires {
                let expiry = OrderRequest {
                    order_id: order,
                    voucher_id: voucher,
                    reason: Some(CancelReason::Expired),
                    requested_at: seckill_core::clock::now(),
                    settled_checkouts: None,
                };
                follow_up(state, record, Request::Cancel(expiry), outcomes)?;
            }
            Ok(true)
        }
        FollowUp::Repeat => {
            outcomes.replay(record);
            Ok(false)
        }
        FollowUp::Park if record.parked.iter().any(|parked| parked.same_kind(&request)) => {
            // Decided after the order like the one waiting, it would only
            // repeat that one's outcome.
            tracing::debug!(%order, "A request like one already waiting for its order; kept once.");
            Ok(false)
        }
        FollowUp::Park if record.parked.len() >= MAX_PARKED => {
            // Only payments can come this far (one of each other kind is
            // kept), and a payment is never dropped: past the bound it is
            // given back, as a duplicate of those waiting.
            let Request::Pay(payment) = request else { return Ok(false) };
            tracing::warn!(%order, "Too many payments waiting for their order; this one is refunded.");
            let refund = decision::refund_request(&payment, RefundReason::Duplicate);
            record.refunds.push(refund.clone());
            outcomes.push(refund, false);
            Ok(true)
        }
        FollowUp::Park => {
            record.parked.push(request);
            Ok(true)
        }
        FollowUp::Ignore(_) => Ok(false),
    }
}

/// Adds or removes the hold of the order `created` describes, if its
/// voucher holds orders.
fn hold(state: &mut impl StockState, level: &StockLevel, created: &Envelope, keep: bool) -> Result<(), StoreError> {
    let Event::OrderCreated(created) = &created.event else { return Ok(()) };
    let Some(deadline) = level.hold_deadline(created) else { return Ok(()) };
    state.hold(deadline, created.order.order_id, created.order.voucher_id, keep)
}
