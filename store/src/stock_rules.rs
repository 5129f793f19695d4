//! Applying sales-topic inputs to a stock state, the same way for every
//! backend: each backend only says how to read and write its rows.

use chrono::{DateTime, Utc};
use seckill_core::decision::{self, FollowUp, StockLevel};
use seckill_core::event::Event;
use seckill_core::{Envelope, OrderId, VoucherId};
use uuid::Uuid;

use crate::{Decided, StockInput, StoreError};

/// The rows the rules read and write. Writes take effect for later reads
/// of the same state; the backend makes them durable all at once.
pub(crate) trait StockState {
    fn level(&self, voucher: VoucherId) -> Result<Option<StockLevel>, StoreError>;
    fn put_level(&mut self, voucher: VoucherId, level: &StockLevel) -> Result<(), StoreError>;
    /// The order's latest outcome.
    fn latest(&self, voucher: VoucherId, order: OrderId) -> Result<Option<Envelope>, StoreError>;
    fn put_latest(&mut self, voucher: VoucherId, order: OrderId, outcome: &Envelope) -> Result<(), StoreError>;
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

/// Applies one input, pushing the outcomes to emit onto `decided`.
pub(crate) fn apply_input(
    state: &mut impl StockState,
    input: StockInput,
    decided: &mut Vec<Decided>,
) -> Result<(), StoreError> {
    match input {
        StockInput::Voucher(voucher) => {
            if state.level(voucher.voucher_id)?.is_none() {
                let level =
                    StockLevel { stock: voucher.stock, remaining: voucher.stock, hold_seconds: voucher.hold_seconds };
                state.put_level(voucher.voucher_id, &level)?;
            }
        }
        StockInput::Update { update_id, update } => {
            if update.add_stock == 0 || state.update_applied(update.voucher_id, update_id)? {
                return Ok(());
            }
            // An update of a voucher this store never saw cannot add to
            // anything; it is still marked, so it never applies later.
            if let Some(mut level) = state.level(update.voucher_id)? {
                level.add(update.add_stock);
                state.put_level(update.voucher_id, &level)?;
            }
            state.mark_update(update.voucher_id, update_id)?;
        }
        StockInput::Order(order) => {
            let (order_id, voucher_id) = (order.order_id, order.voucher_id);
            if let Some(previous) = state.latest(voucher_id, order_id)? {
                decided.push(Decided { outcome: previous, replayed: true });
                return Ok(());
            }
            let mut level = state.level(voucher_id)?;
            let result = decision::decide(level.as_mut(), &order);
            let outcome = decision::outcome(order, result, Utc::now());
            if let (Ok(_), Some(level)) = (&result, level) {
                state.put_level(voucher_id, &level)?;
                hold(state, &level, &outcome, true)?;
            }
            state.put_latest(voucher_id, order_id, &outcome)?;
            decided.push(Decided { outcome, replayed: false });
        }
        StockInput::Cancel(request) => {
            let latest = state.latest(request.voucher_id, request.order_id)?;
            let mut level = state.level(request.voucher_id)?;
            match decision::cancel(level.as_mut(), latest.as_ref(), &request, Utc::now()) {
                FollowUp::Apply(outcome) => {
                    let level = level.expect("a cancellation applies only to a known voucher");
                    state.put_level(request.voucher_id, &level)?;
                    if let Some(created) = &latest {
                        hold(state, &level, created, false)?;
                    }
                    state.put_latest(request.voucher_id, request.order_id, &outcome)?;
                    decided.push(Decided { outcome, replayed: false });
                }
                FollowUp::Repeat => decided.extend(latest.map(|outcome| Decided { outcome, replayed: true })),
                FollowUp::Ignore(_) => {}
            }
        }
        StockInput::Confirm(request) => {
            let latest = state.latest(request.voucher_id, request.order_id)?;
            match decision::confirm(latest.as_ref(), Utc::now()) {
                FollowUp::Apply(outcome) => {
                    if let (Some(level), Some(created)) = (state.level(request.voucher_id)?, &latest) {
                        hold(state, &level, created, false)?;
                    }
                    state.put_latest(request.voucher_id, request.order_id, &outcome)?;
                    decided.push(Decided { outcome, replayed: false });
                }
                FollowUp::Repeat => decided.extend(latest.map(|outcome| Decided { outcome, replayed: true })),
                FollowUp::Ignore(_) => {}
            }
        }
    }
    Ok(())
}

/// Adds or removes the hold of the order `created` describes, if its
/// voucher holds orders.
fn hold(state: &mut impl StockState, level: &StockLevel, created: &Envelope, keep: bool) -> Result<(), StoreError> {
    let Event::OrderCreated(created) = &created.event else { return Ok(()) };
    let Some(deadline) = level.hold_deadline(created) else { return Ok(()) };
    state.hold(deadline, created.order.order_id, created.order.voucher_id, keep)
}
