//! Applying events to the status view, the same way for every backend:
//! each backend only says how to read and write its rows.

use seckill_core::event::Event;
use seckill_core::{Envelope, OrderId, VoucherId};
use uuid::Uuid;

use crate::view::{merge_order, OrderView, VoucherCounters, VoucherRecord};
use crate::StoreError;

/// The rows the rules read and write. Writes take effect for later reads
/// of the same state; the backend makes them durable all at once.
pub(crate) trait ViewState {
    fn voucher(&self, voucher: VoucherId) -> Result<Option<VoucherRecord>, StoreError>;
    fn put_voucher(&mut self, record: &VoucherRecord) -> Result<(), StoreError>;
    fn update_applied(&self, voucher: VoucherId, update: Uuid) -> Result<bool, StoreError>;
    fn mark_update(&mut self, voucher: VoucherId, update: Uuid) -> Result<(), StoreError>;
    fn order(&self, voucher: VoucherId, order: OrderId) -> Result<Option<OrderView>, StoreError>;
    /// Stores `row`; `first_seen` when the order was not in the view before
    /// (so it joins its user's list).
    fn put_order(&mut self, row: &OrderView, first_seen: bool) -> Result<(), StoreError>;
    fn counters(&self, voucher: VoucherId) -> Result<VoucherCounters, StoreError>;
    fn put_counters(&mut self, voucher: VoucherId, counters: &VoucherCounters) -> Result<(), StoreError>;
}

/// Applies one event; returns whether it changed the view.
pub(crate) fn apply_event(state: &mut impl ViewState, envelope: &Envelope) -> Result<bool, StoreError> {
    match &envelope.event {
        Event::VoucherCreated(voucher) => {
            if state.voucher(voucher.voucher_id)?.is_some() {
                return Ok(false);
            }
            state.put_voucher(&VoucherRecord::new(voucher.clone()))?;
            Ok(true)
        }
        Event::VoucherUpdated(update) => {
            // Updates follow their voucher on one partition; one without a
            // voucher has nothing to change.
            let Some(mut record) = state.voucher(update.voucher_id)? else { return Ok(false) };
            if state.update_applied(update.voucher_id, envelope.event_id)? {
                return Ok(false);
            }
            record.update(envelope.event_id, update);
            state.put_voucher(&record)?;
            state.mark_update(update.voucher_id, envelope.event_id)?;
            Ok(true)
        }
        Event::CheckoutOpened(opened) => {
            // Only an order the view has, and only a newer session: the
            // view keeps the one the buyer should be sent to.
            let Some(mut row) = state.order(opened.voucher_id, opened.order_id)? else { return Ok(false) };
            if row.checkout_expires_at.is_some_and(|known| known >= opened.expires_at) {
                return Ok(false);
            }
            row.checkout_id = Some(opened.session_id.clone());
            row.checkout_expires_at = Some(opened.expires_at);
            state.put_order(&row, false)?;
            Ok(true)
        }
        event => {
            let Some(row) = OrderView::from_event(event) else { return Ok(false) };
            let existing = state.order(row.voucher_id, row.order_id)?;
            let Some((transition, row)) = merge_order(existing.as_ref(), &row) else { return Ok(false) };
            state.put_order(&row, transition.first_seen())?;
            let mut counters = state.counters(row.voucher_id)?;
            transition.count(&mut counters, row.quantity, row.amount);
            state.put_counters(row.voucher_id, &counters)?;
            Ok(true)
        }
    }
}
