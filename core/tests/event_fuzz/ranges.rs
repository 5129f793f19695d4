//! What every record the decoder accepts must satisfy: a string `type` tag
//! (never a variant index such as `"type": 2`) and the range rules, written
//! apart from the decoder's own `validate` so that a decoder which skipped or
//! weakened a check is caught rather than agreed with.

use crate::valid::*;
use chrono::{DateTime, Utc};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use seckill_core::event::{Envelope, Event, OrderAccepted, MAX_HOLD_SECONDS, MAX_QUANTITY, MAX_STOCK, SCHEMA_VERSION};
use seckill_core::ids::MAX_USER_ID_LEN;
use seckill_core::money::MAX_PRICE;
use serde_json::Value;

/// The first rule `envelope` breaks, if any. Deliberately written apart from
/// the decoder's `validate` (and from `UserId::parse`), so a decoder that
/// skipped or weakened a check is caught rather than agreed with.
pub(crate) fn broken_rule(envelope: &Envelope) -> Option<&'static str> {
    let mut rules = vec![
        (envelope.schema >= 1 && envelope.schema <= SCHEMA_VERSION, "schema is 1..=SCHEMA_VERSION"),
        (in_sale_years(envelope.emitted_at), "emitted_at is in 1970..=9999"),
    ];
    match &envelope.event {
        Event::VoucherCreated(v) => rules.extend([
            (v.stock <= MAX_STOCK, "stock <= MAX_STOCK"),
            (v.per_user_limit >= 1 && v.per_user_limit <= MAX_QUANTITY, "per_user_limit is 1..=MAX_QUANTITY"),
            (v.hold_seconds <= MAX_HOLD_SECONDS, "hold_seconds <= MAX_HOLD_SECONDS"),
            (in_sale_years(v.begins_at), "begins_at is in 1970..=9999"),
            (in_sale_years(v.ends_at), "ends_at is in 1970..=9999"),
            (v.begins_at < v.ends_at, "begins_at < ends_at"),
            (v.title.as_ref().is_none_or(|t| (1..=200).contains(&t.chars().count())), "title is 1-200 characters"),
            (v.title.as_ref().is_none_or(|t| !t.chars().any(char::is_control)), "title has no control characters"),
            (v.description.as_ref().is_none_or(|d| d.chars().count() <= 2_000), "description is at most 2000"),
            (v.price <= MAX_PRICE, "price <= MAX_PRICE"),
            ((v.price > 0) == v.currency.is_some(), "a currency exactly with a price"),
            (v.price == 0 || v.hold_seconds > 0, "a priced voucher has payment_seconds"),
        ]),
        Event::PaymentReceived(p) => rules.extend([
            (provider_id_ok(&p.payment_id), "payment_id is 1-255 printable ASCII"),
            (p.amount >= 1 && p.amount <= MAX_AMOUNT, "amount is 1..=MAX_AMOUNT"),
            (in_sale_years(p.paid_at), "paid_at is in 1970..=9999"),
        ]),
        Event::CheckoutOpened(c) => rules.extend([
            (provider_id_ok(&c.session_id), "session_id is 1-255 printable ASCII"),
            (in_sale_years(c.opened_at), "opened_at is in 1970..=9999"),
            (in_sale_years(c.expires_at), "expires_at is in 1970..=9999"),
            (c.expires_at >= c.opened_at, "expires_at >= opened_at"),
        ]),
        Event::RefundRequested(r) => rules.extend([
            (provider_id_ok(&r.payment_id), "payment_id is 1-255 printable ASCII"),
            (r.amount <= MAX_AMOUNT, "amount <= MAX_AMOUNT"),
            (in_sale_years(r.requested_at), "requested_at is in 1970..=9999"),
        ]),
        Event::PaymentRefunded(r) => rules.extend([
            (provider_id_ok(&r.payment_id), "payment_id is 1-255 printable ASCII"),
            (provider_id_ok(&r.refund_id), "refund_id is 1-255 printable ASCII"),
            (r.amount <= MAX_AMOUNT, "amount <= MAX_AMOUNT"),
            (in_sale_years(r.refunded_at), "refunded_at is in 1970..=9999"),
        ]),
        Event::QueueSeedCommitted(c) => {
            rules.push((hex64(&c.seed_hash), "seed_hash is 64 lowercase hex digits"));
            rules.push((c.sealed_seed.as_deref().is_none_or(hex64), "sealed_seed is 64 lowercase hex digits"));
        }
        Event::QueueSeedRevealed(r) => rules.push((hex64(&r.seed), "seed is 64 lowercase hex digits")),
        Event::QueueJoined(j) => rules.extend([
            (in_sale_years(j.joined_at), "joined_at is in 1970..=9999"),
            (j.attempt >= 1, "attempt >= 1"),
            (j.pre_queue == j.seq.is_none(), "a seq exactly after the start"),
            (j.seq.is_none_or(|seq| (1..1 << 52).contains(&seq)), "seq is 1..2^52"),
        ]),
        Event::QueueEntryIssued(e) => rules.extend([
            (e.place >= 1 && e.entry >= 1, "place and entry >= 1"),
            (in_sale_years(e.expires_at), "expires_at is in 1970..=9999"),
        ]),
        Event::QueuePlaceExpired(e) => rules.push((e.place >= 1, "place >= 1")),
        Event::QueueEntryUsed(e) => rules.push((e.entry >= 1, "entry >= 1")),
        Event::DrawSeedCommitted(c) => {
            rules.push((hex64(&c.seed_hash), "seed_hash is 64 lowercase hex digits"));
            rules.push((c.sealed_seed.as_deref().is_none_or(hex64), "sealed_seed is 64 lowercase hex digits"));
        }
        Event::DrawEntered(e) => {
            rules.extend([(in_sale_years(e.entered_at), "entered_at is in 1970..=9999"), (e.seq >= 1, "seq >= 1")])
        }
        Event::DrawSeedRevealed(r) => rules.extend([
            (hex64(&r.seed), "seed is 64 lowercase hex digits"),
            ((r.entries == 0) == r.entries_hash.is_empty(), "an entries_hash exactly when there are entries"),
        ]),
        Event::DrawRanked(r) => rules.extend([
            (r.chunk < r.chunks, "chunk < chunks"),
            (r.first_rank >= 1, "first_rank >= 1"),
            (!r.users.is_empty() && r.users.len() <= 500, "1 to 500 users"),
        ]),
        Event::DrawWinnersSelected(w) => rules.extend([
            (w.winners <= MAX_STOCK, "winners <= MAX_STOCK"),
            (in_sale_years(w.purchase_until), "purchase_until is in 1970..=9999"),
        ]),
        Event::DrawWinnerPromoted(p) => rules.extend([
            (p.rank >= 1, "rank >= 1"),
            (in_sale_years(p.purchase_until), "purchase_until is in 1970..=9999"),
        ]),
        Event::DrawWinUsed(u) => rules.push((u.rank >= 1, "rank >= 1")),
        Event::WindowsExtended(w) => rules.extend([
            (in_sale_years(w.from), "from is in 1970..=9999"),
            (in_sale_years(w.until), "until is in 1970..=9999"),
            (w.until >= w.from, "until >= from"),
        ]),
        Event::VoucherUpdated(u) => rules.extend([
            (u.add_stock <= MAX_STOCK, "add_stock <= MAX_STOCK"),
            (u.ends_at.is_none_or(in_sale_years), "ends_at is in 1970..=9999"),
            (u.paused.is_some() || u.ends_at.is_some() || u.add_stock != 0, "an update changes something"),
        ]),
        Event::OrderAccepted(o) => rules.extend(order_rules(o)),
        Event::CancelRequested(r) => rules.extend([
            (r.reason.is_some(), "a cancel request has a reason"),
            (in_sale_years(r.requested_at), "requested_at is in 1970..=9999"),
        ]),
        Event::ConfirmRequested(r) => rules.extend([
            (r.reason.is_none(), "a confirm request has no reason"),
            (in_sale_years(r.requested_at), "requested_at is in 1970..=9999"),
        ]),
        Event::OrderCreated(c) => {
            rules.extend(order_rules(&c.order));
            rules.push((in_sale_years(c.decided_at), "decided_at is in 1970..=9999"));
            rules.push((c.order.accepted_at <= c.decided_at, "accepted_at <= decided_at"));
            rules.push((c.remaining <= MAX_STOCK, "remaining <= MAX_STOCK"));
        }
        Event::OrderFailed(f) => {
            rules.extend(order_rules(&f.order));
            rules.push((in_sale_years(f.decided_at), "decided_at is in 1970..=9999"));
            rules.push((f.order.accepted_at <= f.decided_at, "accepted_at <= decided_at"));
        }
        Event::OrderPaid(c) => {
            rules.extend(order_rules(&c.order));
            rules.push((in_sale_years(c.paid_at), "paid_at is in 1970..=9999"));
            rules.push((c.order.accepted_at <= c.paid_at, "accepted_at <= paid_at"));
            rules.push((c.payment_id.as_deref().is_none_or(provider_id_ok), "payment_id is 1-255 printable ASCII"));
        }
        Event::OrderCancelled(c) => {
            rules.extend(order_rules(&c.order));
            rules.push((in_sale_years(c.cancelled_at), "cancelled_at is in 1970..=9999"));
            rules.push((c.order.accepted_at <= c.cancelled_at, "accepted_at <= cancelled_at"));
            rules.push((c.remaining <= MAX_STOCK, "remaining <= MAX_STOCK"));
        }
    }
    rules.into_iter().find(|(holds, _)| !holds).map(|(_, rule)| rule)
}

/// The largest amount an order can owe.
const MAX_AMOUNT: u64 = MAX_PRICE * MAX_QUANTITY as u64;

fn provider_id_ok(id: &str) -> bool {
    (1..=255).contains(&id.len()) && id.bytes().all(|b| (b'!'..=b'~').contains(&b))
}

pub(crate) fn in_sale_years(time: DateTime<Utc>) -> bool {
    (SALE_FIRST_SECOND..SALE_END_SECOND).contains(&time.timestamp())
}

pub(crate) fn order_rules(order: &OrderAccepted) -> [(bool, &'static str); 5] {
    let user = order.user_id.as_str();
    let user_ok = !user.is_empty()
        && user.len() <= MAX_USER_ID_LEN
        && user.bytes().all(|b| b.is_ascii_alphanumeric() || b"_.:@-".contains(&b));
    [
        (order.quantity >= 1 && order.quantity <= MAX_QUANTITY, "quantity is 1..=MAX_QUANTITY"),
        (user_ok, "user_id is 1-64 of [A-Za-z0-9_.:@-]"),
        (in_sale_years(order.accepted_at), "accepted_at is in 1970..=9999"),
        (order.amount <= MAX_AMOUNT, "amount <= MAX_AMOUNT"),
        ((order.amount > 0) == order.currency.is_some(), "a currency exactly with an amount"),
    ]
}

/// The `type` tag of `record` if it parses as a JSON object whose tag is
/// present but not a string: a variant index (`"type": 2`), `null`, a bool,
/// an array or an object. No writer of the log means any of these.
pub(crate) fn non_string_tag(record: &[u8]) -> Option<Value> {
    match serde_json::from_slice(record) {
        Ok(Value::Object(object)) => object.get("type").filter(|tag| !tag.is_string()).cloned(),
        _ => None,
    }
}

/// What every `Ok` from the decoder must satisfy: the record's `type` tag was
/// a string, every range rule holds, and the event writes back to a record
/// that decodes to the same event (so a processor that re-emits it does not
/// produce something it cannot read).
pub(crate) fn check_accepted(input: &[u8], decoded: &Envelope) -> Result<(), TestCaseError> {
    let tag = non_string_tag(input);
    let input = String::from_utf8_lossy(input);
    if let Some(tag) = tag {
        return Err(TestCaseError::fail(format!("decode accepted {input} although its type tag is {tag}")));
    }
    if let Some(rule) = broken_rule(decoded) {
        return Err(TestCaseError::fail(format!("decode accepted {input} although it breaks `{rule}`: {decoded:?}")));
    }
    match Envelope::decode(&decoded.encode()) {
        Ok(again) => prop_assert_eq!(&again, decoded, "re-encoding {} changed the event", input),
        Err(error) => {
            return Err(TestCaseError::fail(format!("decode accepted {input} but refuses its re-encoding: {error}")))
        }
    }
    Ok(())
}

fn hex64(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}
