//! Hostile times: instants anywhere chrono can hold, its very ends, either
//! side of the years 1970 to 9999, and signed years written by hand, put
//! into the time fields (`…_at`) of valid records; and the decision
//! functions run on whatever the decoder accepts, which must never panic.
//!
//! A record's times reach arithmetic downstream (a hold's deadline is the
//! decision time plus the voucher's hold, a latency is one time minus
//! another); chrono's `+` panics on overflow, so an accepted time near the
//! end of its range once stalled a partition for good.

use chrono::{DateTime, TimeDelta, Utc};
use proptest::prelude::*;
use proptest::sample::{select, Index};
use proptest::test_runner::TestCaseError;
use seckill_core::decision::{self, FollowUp, OrderRecord, StockLevel};
use seckill_core::event::{
    CancelReason, Envelope, Event, OrderRequest, PaymentReceived, PaymentSource, MAX_HOLD_SECONDS, MAX_QUANTITY,
    MAX_STOCK,
};
use seckill_core::money::Currency;
use serde_json::Value;

use crate::mutate::edit_object;
use crate::valid::{timestamp, SALE_END_SECOND, SALE_FIRST_SECOND};

/// Instants at and near the ends of chrono's range and of the years 1970
/// to 9999, computed without arithmetic that could itself overflow.
fn edges() -> Vec<DateTime<Utc>> {
    let (min, max) = (DateTime::<Utc>::MIN_UTC, DateTime::<Utc>::MAX_UTC);
    let first = timestamp(SALE_FIRST_SECOND, 0);
    let last = timestamp(SALE_END_SECOND - 1, 999_999_999);
    let mut edges = vec![min, max, first, last];
    for delta in [TimeDelta::nanoseconds(1), TimeDelta::seconds(1), TimeDelta::seconds(i64::from(MAX_HOLD_SECONDS))] {
        edges.extend(max.checked_sub_signed(delta));
        edges.extend(min.checked_add_signed(delta));
        edges.extend(first.checked_sub_signed(delta));
        edges.extend(last.checked_add_signed(delta));
    }
    edges
}

/// A time as a record could carry it: RFC 3339 as chrono writes it (with a
/// sign and more digits outside four-digit years), or written by hand.
pub(crate) fn hostile_time() -> impl Strategy<Value = Value> {
    let (min, max) = (DateTime::<Utc>::MIN_UTC.timestamp(), DateTime::<Utc>::MAX_UTC.timestamp());
    prop_oneof![
        3 => select(edges()).prop_map(|at| Value::from(at.to_rfc3339())),
        3 => (min..=max, 0..1_000_000_000_u32)
            .prop_filter_map("within chrono's range", |(secs, nanos)| DateTime::from_timestamp(secs, nanos))
            .prop_map(|at| Value::from(at.to_rfc3339())),
        1 => select(vec![
            "+262142-12-31T23:59:59.999999999Z",
            "+262143-12-31T23:59:59Z",
            "+10000-01-01T00:00:00Z",
            "-0001-01-01T00:00:00Z",
            "0000-01-01T00:00:00Z",
            "1969-12-31T23:59:59.999999999Z",
            "9999-12-31T23:59:59.999999999-01:00",
            "1970-01-01T00:00:00+01:00",
        ])
        .prop_map(Value::from),
        1 => (-1_000_000_000_000_000_i64..1_000_000_000_000_000).prop_map(Value::from),
    ]
}

/// Sets the time field `which` picks (or, with `all`, every time field) of
/// `record` to `time`. Setting them all keeps an outcome's times in order,
/// so only the range check stands between the record and the decisions.
pub(crate) fn set_times(record: &mut Vec<u8>, which: &Index, all: bool, time: &Value) {
    edit_object(record, |object| {
        let fields: Vec<String> = object.keys().filter(|name| name.ends_with("_at")).cloned().collect();
        if fields.is_empty() {
            return;
        }
        let chosen = if all { fields } else { vec![fields[which.index(fields.len())].clone()] };
        for field in chosen {
            object.insert(field, time.clone());
        }
    });
}

/// Runs every decision function the processor runs on `envelope`, at every
/// hold length, and checks that each outcome decodes again (it is what the
/// processor emits). Returns the failure instead of panicking only where a
/// decision returns; a panic inside one fails the property as it is.
pub(crate) fn decide_everything(envelope: &Envelope) -> Result<(), TestCaseError> {
    let now = Utc::now();
    for hold_seconds in [0, 1, MAX_HOLD_SECONDS] {
        let fresh = || StockLevel::new(MAX_STOCK, hold_seconds, MAX_QUANTITY);
        let mut level = fresh();
        let request = |reason: Option<CancelReason>| -> Option<OrderRequest> {
            let (order_id, voucher_id) = match &envelope.event {
                Event::OrderAccepted(o) => (o.order_id, o.voucher_id),
                Event::OrderCreated(c) => (c.order.order_id, c.order.voucher_id),
                Event::OrderPaid(c) => (c.order.order_id, c.order.voucher_id),
                Event::OrderCancelled(c) => (c.order.order_id, c.order.voucher_id),
                Event::OrderFailed(f) => (f.order.order_id, f.order.voucher_id),
                _ => return None,
            };
            Some(OrderRequest { order_id, voucher_id, reason, requested_at: now, settled_checkouts: None })
        };
        let latest = match &envelope.event {
            Event::OrderAccepted(order) => {
                let result = decision::decide(Some(&mut level), 0, order);
                let created = decision::outcome(order.clone(), result, now);
                decodes_again(&created)?;
                created
            }
            Event::CancelRequested(request) | Event::ConfirmRequested(request) => {
                // The order is unknown here: nothing to decide, nothing to panic on.
                let unknown = OrderRecord::default();
                decision::cancel(Some(&mut level), &unknown, request, now);
                decision::confirm(Some(&level), &unknown, request, now);
                continue;
            }
            Event::PaymentReceived(payment) => {
                decision::pay(Some(&level), &OrderRecord::default(), payment);
                continue;
            }
            Event::OrderCreated(_) | Event::OrderFailed(_) | Event::OrderPaid(_) | Event::OrderCancelled(_) => {
                envelope.clone()
            }
            Event::VoucherCreated(_)
            | Event::VoucherUpdated(_)
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
            | Event::WindowsExtended(_)
            | Event::CheckoutOpened(_) => continue,
        };
        if let Event::OrderCreated(created) = &latest.event {
            let _ = level.hold_deadline(created);
        }
        let record = OrderRecord { decision: Some(latest), ..OrderRecord::default() };
        for reason in [CancelReason::Requested, CancelReason::Expired] {
            let mut level = fresh();
            if let Some(request) = request(Some(reason)) {
                if let FollowUp::Apply(cancelled) = decision::cancel(Some(&mut level), &record, &request, now) {
                    decodes_again(&cancelled)?;
                }
            }
        }
        if let Some(request) = request(None) {
            if let FollowUp::Apply(confirmed) = decision::confirm(Some(&level), &record, &request, now) {
                decodes_again(&confirmed)?;
            }
        }
        // A payment of what the order owes, stamped at the event's own
        // extreme time: paid or refunded, the outcome must decode.
        if let Some(order) = record.latest().and_then(|latest| latest.event.order()) {
            let payment = PaymentReceived {
                order_id: order.order_id,
                voucher_id: order.voucher_id,
                payment_id: "pi_fuzz".to_owned(),
                amount: order.amount.max(1),
                currency: order.currency.unwrap_or(Currency::parse("EUR").expect("valid")),
                paid_at: now,
                source: PaymentSource::Webhook,
            };
            if let FollowUp::Apply(outcome) = decision::pay(Some(&level), &record, &payment) {
                decodes_again(&outcome)?;
            }
        }
    }
    Ok(())
}

fn decodes_again(outcome: &Envelope) -> Result<(), TestCaseError> {
    match Envelope::decode(&outcome.encode()) {
        Ok(_) => Ok(()),
        Err(error) => Err(TestCaseError::fail(format!("an outcome the processor would emit is refused: {error}"))),
    }
}
