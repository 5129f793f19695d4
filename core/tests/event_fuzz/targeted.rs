//! Boundary cases, one by one: each fixture is accepted, so each refusal is
//! the one change made to it.

use crate::mutate::*;
use crate::valid::*;
use chrono::{DateTime, TimeDelta, Utc};
use seckill_core::decision::StockLevel;
use seckill_core::event::{
    CancelReason, Envelope, Event, EventError, FailReason, OrderAccepted, OrderCancelled, OrderCreated, OrderFailed,
    OrderPaid, OrderRequest, VoucherCreated, VoucherUpdated, MAX_EVENT_BYTES, MAX_HOLD_SECONDS, MAX_QUANTITY,
    MAX_SHARDS, MAX_STOCK, SCHEMA_VERSION,
};
use seckill_core::ids::MAX_USER_ID_LEN;
use seckill_core::UserId;
use serde_json::Value;
use uuid::Uuid;

fn at(rfc3339: &str) -> DateTime<Utc> {
    rfc3339.parse().expect("fixture times are RFC 3339")
}

fn fixture_order() -> OrderAccepted {
    OrderAccepted {
        order_id: "0192f0c4-7a7e-7cc1-8000-000000000002".parse().expect("a UUID"),
        voucher_id: "0192f0c4-7a7e-7cc1-8000-000000000001".parse().expect("a UUID"),
        user_id: UserId::parse("alice").expect("a valid user id"),
        quantity: 1,
        accepted_at: at("2026-11-21T10:00:00Z"),
        amount: 0,
        currency: None,
        idempotency_key: None,
    }
}

fn fixture_voucher() -> VoucherCreated {
    VoucherCreated {
        voucher_id: fixture_order().voucher_id,
        stock: 100,
        per_user_limit: 1,
        begins_at: at("2026-11-21T10:00:00Z"),
        ends_at: at("2026-11-21T11:00:00Z"),
        hold_seconds: 0,
        shards: 1,
        title: None,
        description: None,
        price: 0,
        currency: None,
        queue: None,
        draw: None,
        challenge_bits: 0,
    }
}

fn fixture_request(reason: Option<CancelReason>) -> OrderRequest {
    let order = fixture_order();
    OrderRequest {
        order_id: order.order_id,
        voucher_id: order.voucher_id,
        reason,
        requested_at: order.accepted_at,
        settled_checkouts: None,
    }
}

/// The five events that carry a whole order, decided at the moment it was
/// accepted (the earliest valid instant).
fn order_events(order: &OrderAccepted) -> [Event; 5] {
    let at = order.accepted_at;
    [
        Event::OrderAccepted(order.clone()),
        Event::OrderCreated(OrderCreated { order: order.clone(), decided_at: at, remaining: 0, pay_by: None }),
        Event::OrderFailed(OrderFailed { order: order.clone(), decided_at: at, reason: FailReason::SoldOut }),
        Event::OrderPaid(OrderPaid { order: order.clone(), paid_at: at, payment_id: None }),
        Event::OrderCancelled(OrderCancelled {
            order: order.clone(),
            cancelled_at: at,
            reason: CancelReason::Requested,
            remaining: 0,
        }),
    ]
}

fn record(event: Event) -> Vec<u8> {
    Envelope {
        schema: SCHEMA_VERSION,
        event_id: Uuid::try_parse("0192f0c4-7a7e-7cc1-8000-000000000000").expect("a UUID"),
        emitted_at: at("2026-11-21T10:00:01Z"),
        event,
    }
    .encode()
}

/// `event`'s record with one field set to `value` in the JSON.
fn record_with(event: Event, field: &str, value: Value) -> Vec<u8> {
    let mut record = record(event);
    edit_object(&mut record, |object| {
        object.insert(field.to_owned(), value);
    });
    record
}

/// Why `record` was refused; fails the test if it was accepted.
fn refusal(record: &[u8]) -> EventError {
    match Envelope::decode(record) {
        Ok(envelope) => panic!("accepted {} as {envelope:?}", String::from_utf8_lossy(record)),
        Err(error) => error,
    }
}

fn assert_out_of_range(event: Event) {
    let record = record(event);
    let error = refusal(&record);
    assert!(matches!(error, EventError::Invalid(_)), "{}: {error}", String::from_utf8_lossy(&record));
}

fn assert_malformed(record: &[u8]) {
    let error = refusal(record);
    assert!(matches!(error, EventError::Malformed(_)), "{}: {error}", String::from_utf8_lossy(record));
}

#[test]
fn fixtures_are_accepted_so_each_refusal_below_is_the_change_alone() {
    let mut events = vec![
        Event::VoucherCreated(fixture_voucher()),
        Event::CancelRequested(fixture_request(Some(CancelReason::Requested))),
        Event::ConfirmRequested(fixture_request(None)),
    ];
    events.extend(order_events(&fixture_order()));
    let long_user = UserId::parse(&"u".repeat(MAX_USER_ID_LEN)).expect("64 characters is the limit");
    events.extend(order_events(&OrderAccepted { user_id: long_user, quantity: MAX_QUANTITY, ..fixture_order() }));
    for event in events {
        let record = record(event);
        assert!(Envelope::decode(&record).is_ok(), "{} refused", String::from_utf8_lossy(&record));
    }
}

#[test]
fn quantities_outside_one_to_max_are_refused() {
    for quantity in [0, MAX_QUANTITY + 1] {
        for event in order_events(&OrderAccepted { quantity, ..fixture_order() }) {
            assert_out_of_range(event);
        }
    }
}

#[test]
fn stock_over_max_is_refused() {
    assert_out_of_range(Event::VoucherCreated(VoucherCreated { stock: MAX_STOCK + 1, ..fixture_voucher() }));
    let (order, remaining) = (fixture_order(), MAX_STOCK + 1);
    let at = order.accepted_at;
    assert_out_of_range(Event::OrderCreated(OrderCreated {
        order: order.clone(),
        decided_at: at,
        remaining,
        pay_by: None,
    }));
    let reason = CancelReason::Requested;
    assert_out_of_range(Event::OrderCancelled(OrderCancelled { order, cancelled_at: at, reason, remaining }));
    let update = VoucherUpdated { voucher_id: fixture_voucher().voucher_id, paused: None, ends_at: None, add_stock: 0 };
    assert_out_of_range(Event::VoucherUpdated(VoucherUpdated { add_stock: MAX_STOCK + 1, ..update }));
}

#[test]
fn per_user_limit_outside_one_to_max_is_refused() {
    for per_user_limit in [0, MAX_QUANTITY + 1] {
        assert_out_of_range(Event::VoucherCreated(VoucherCreated { per_user_limit, ..fixture_voucher() }));
    }
    let hold_seconds = MAX_HOLD_SECONDS + 1;
    assert_out_of_range(Event::VoucherCreated(VoucherCreated { hold_seconds, ..fixture_voucher() }));
    for shards in [0, MAX_SHARDS + 1] {
        assert_out_of_range(Event::VoucherCreated(VoucherCreated { shards, ..fixture_voucher() }));
    }
}

#[test]
fn a_sale_must_end_after_it_begins() {
    let voucher = fixture_voucher();
    assert_out_of_range(Event::VoucherCreated(VoucherCreated { ends_at: voucher.begins_at, ..voucher.clone() }));
    let ends_at = voucher.begins_at - TimeDelta::nanoseconds(1);
    assert_out_of_range(Event::VoucherCreated(VoucherCreated { ends_at, ..voucher }));
}

#[test]
fn sale_times_outside_1970_to_9999_are_refused() {
    let before_1970 = timestamp(SALE_FIRST_SECOND, 0) - TimeDelta::nanoseconds(1);
    assert_out_of_range(Event::VoucherCreated(VoucherCreated { begins_at: before_1970, ..fixture_voucher() }));
    let update = VoucherUpdated { voucher_id: fixture_voucher().voucher_id, paused: None, ends_at: None, add_stock: 0 };
    assert_out_of_range(Event::VoucherUpdated(VoucherUpdated { ends_at: Some(before_1970), ..update.clone() }));
    let year_10000 = Value::from("+10000-01-01T00:00:00Z");
    refusal(&record_with(Event::VoucherCreated(fixture_voucher()), "ends_at", year_10000.clone()));
    refusal(&record_with(Event::VoucherUpdated(update.clone()), "ends_at", year_10000));

    let (first, last) = (timestamp(SALE_FIRST_SECOND, 0), timestamp(SALE_END_SECOND - 1, 999_999_999));
    let edges = [
        Event::VoucherCreated(VoucherCreated { begins_at: first, ends_at: last, ..fixture_voucher() }),
        Event::VoucherUpdated(VoucherUpdated { ends_at: Some(last), ..update }),
    ];
    for event in edges {
        let record = record(event);
        assert!(Envelope::decode(&record).is_ok(), "{} refused", String::from_utf8_lossy(&record));
    }
}

#[test]
fn times_outside_1970_to_9999_are_refused_in_every_field() {
    let mut events = vec![
        Event::VoucherCreated(fixture_voucher()),
        Event::CancelRequested(fixture_request(Some(CancelReason::Requested))),
        Event::ConfirmRequested(fixture_request(None)),
    ];
    events.extend(order_events(&fixture_order()));
    let outside = [
        Value::from("1969-12-31T23:59:59.999999999Z"),
        Value::from("+10000-01-01T00:00:00Z"),
        Value::from(DateTime::<Utc>::MAX_UTC.to_rfc3339()),
        Value::from(DateTime::<Utc>::MIN_UTC.to_rfc3339()),
    ];
    for event in events {
        let fields: Vec<String> = match serde_json::from_slice(&record(event.clone())).expect("a JSON record") {
            Value::Object(object) => object.keys().filter(|name| name.ends_with("_at")).cloned().collect(),
            _ => unreachable!("records are objects"),
        };
        assert!(fields.contains(&"emitted_at".to_owned()), "{fields:?}");
        for field in &fields {
            for time in &outside {
                refusal(&record_with(event.clone(), field, time.clone()));
            }
        }
        // The edges themselves are accepted (every time field at once, so
        // outcomes stay in order; a sale still ends after it begins).
        let (first, last) = (timestamp(SALE_FIRST_SECOND, 0), timestamp(SALE_END_SECOND - 1, 999_999_999));
        for edge in [first, last] {
            let mut record = record(event.clone());
            edit_object(&mut record, |object| {
                let is_sale = object.contains_key("begins_at");
                for field in &fields {
                    let at = match field.as_str() {
                        "ends_at" if is_sale => last,
                        "begins_at" => edge.min(last - TimeDelta::nanoseconds(1)),
                        _ => edge,
                    };
                    object.insert(field.clone(), Value::from(at.to_rfc3339()));
                }
            });
            assert!(Envelope::decode(&record).is_ok(), "{} refused", String::from_utf8_lossy(&record));
        }
    }
}

#[test]
fn an_order_accepted_at_the_end_of_chronos_range_is_refused_before_any_decision() {
    // Once accepted, this record's hold deadline overflowed chrono and
    // panicked the processor on every redelivery.
    for accepted_at in ["+262142-12-31T23:59:59.999999999Z", "+10000-01-01T00:00:00Z"] {
        let error =
            refusal(&record_with(Event::OrderAccepted(fixture_order()), "accepted_at", Value::from(accepted_at)));
        assert!(matches!(error, EventError::Invalid(_) | EventError::Malformed(_)), "{accepted_at}: {error}");
    }
}

#[test]
fn a_hold_deadline_saturates_at_the_end_of_chronos_range() {
    let order = OrderAccepted { accepted_at: DateTime::<Utc>::MAX_UTC, ..fixture_order() };
    let created = OrderCreated { order, decided_at: DateTime::<Utc>::MAX_UTC, remaining: 0, pay_by: None };
    let level = StockLevel { remaining: 0, ..StockLevel::new(1, MAX_HOLD_SECONDS, 1) };
    assert_eq!(level.hold_deadline(&created), Some(DateTime::<Utc>::MAX_UTC));
}

#[test]
fn outcomes_before_acceptance_are_refused() {
    let order = fixture_order();
    let before = order.accepted_at - TimeDelta::nanoseconds(1);
    assert_out_of_range(Event::OrderCreated(OrderCreated {
        order: order.clone(),
        decided_at: before,
        remaining: 0,
        pay_by: None,
    }));
    let reason = FailReason::UnknownVoucher;
    assert_out_of_range(Event::OrderFailed(OrderFailed { order: order.clone(), decided_at: before, reason }));
    assert_out_of_range(Event::OrderPaid(OrderPaid { order: order.clone(), paid_at: before, payment_id: None }));
    let reason = CancelReason::Expired;
    assert_out_of_range(Event::OrderCancelled(OrderCancelled { order, cancelled_at: before, reason, remaining: 0 }));
}

#[test]
fn a_cancel_request_needs_a_reason_and_a_confirm_request_has_none() {
    assert_out_of_range(Event::CancelRequested(fixture_request(None)));
    assert_out_of_range(Event::ConfirmRequested(fixture_request(Some(CancelReason::Requested))));
    let cancel = Event::CancelRequested(fixture_request(Some(CancelReason::Expired)));
    assert!(matches!(refusal(&record_with(cancel, "reason", Value::Null)), EventError::Invalid(_)));
}

#[test]
fn an_update_that_changes_nothing_is_refused() {
    let nothing =
        VoucherUpdated { voucher_id: fixture_voucher().voucher_id, paused: None, ends_at: None, add_stock: 0 };
    assert_out_of_range(Event::VoucherUpdated(nothing.clone()));
    let mut explicit = record(Event::VoucherUpdated(nothing));
    edit_object(&mut explicit, |object| {
        object.insert("paused".to_owned(), Value::Null);
        object.insert("ends_at".to_owned(), Value::Null);
        object.insert("add_stock".to_owned(), Value::from(0));
    });
    assert!(matches!(refusal(&explicit), EventError::Invalid(_)));
}

#[test]
fn user_ids_outside_the_rules_are_refused() {
    let too_long = "u".repeat(MAX_USER_ID_LEN + 1);
    for bad in ["", too_long.as_str(), "a b", "alice ", "é", "ali\u{0}ce", "x{v:1}"] {
        for event in order_events(&fixture_order()) {
            assert_malformed(&record_with(event, "user_id", Value::from(bad)));
        }
    }
}

#[test]
fn ids_that_are_not_uuids_are_refused() {
    let not_uuids = [
        Value::from("42"),
        Value::from(""),
        Value::from("0192f0c4-7a7e-7cc1-8000-00000000000"),
        Value::from("0192f0c4-7a7e-7cc1-8000-0000000000zz"),
        Value::from(42),
        Value::Null,
    ];
    for bad in &not_uuids {
        for event in order_events(&fixture_order()) {
            assert_malformed(&record_with(event.clone(), "order_id", bad.clone()));
            assert_malformed(&record_with(event, "voucher_id", bad.clone()));
        }
        let cancel = Event::CancelRequested(fixture_request(Some(CancelReason::Requested)));
        assert_malformed(&record_with(cancel, "order_id", bad.clone()));
        assert_malformed(&record_with(Event::VoucherCreated(fixture_voucher()), "event_id", bad.clone()));
    }
}

#[test]
fn a_type_tag_that_is_not_a_name_is_refused() {
    let mut not_names: Vec<Value> = (0..12_u64).map(Value::from).collect();
    not_names.extend([
        Value::from(-1),
        Value::from(2.0),
        Value::from("2"),
        Value::from("orderAccepted"),
        Value::Null,
        Value::Bool(true),
        Value::Array(vec![Value::from("OrderAccepted")]),
        Value::Object([("OrderAccepted".to_owned(), Value::Null)].into_iter().collect()),
    ]);
    for bad in &not_names {
        for event in order_events(&fixture_order()) {
            assert_malformed(&record_with(event, "type", bad.clone()));
        }
        assert_malformed(&record_with(Event::VoucherCreated(fixture_voucher()), "type", bad.clone()));
    }
}

#[test]
fn a_record_exactly_at_the_size_limit_is_still_read() {
    let mut record = record(Event::OrderAccepted(fixture_order()));
    record.resize(MAX_EVENT_BYTES, b' ');
    assert!(Envelope::decode(&record).is_ok(), "a {MAX_EVENT_BYTES}-byte record was refused");
}
