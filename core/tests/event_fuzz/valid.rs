//! Strategies for valid envelopes of all twelve event types, with every field
//! in range and the boundaries (limits, equal and one-nanosecond-apart times)
//! drawn often: what a correct writer can put on a topic.

use chrono::{DateTime, TimeDelta, Utc};
use proptest::option;
use proptest::prelude::*;
use seckill_core::event::{
    CancelReason, DrawEntered, DrawRanked, DrawSeedCommitted, DrawSeedRevealed, DrawWinUsed, DrawWinnerPromoted,
    DrawWinnersSelected, Envelope, Event, FailReason, OrderAccepted, OrderCancelled, OrderCreated, OrderFailed,
    OrderPaid, OrderRequest, PaymentReceived, PaymentRefunded, PaymentSource, QueueEntryIssued, QueueEntryUsed,
    QueueJoined, QueuePlaceExpired, QueueSeedCommitted, QueueSeedRevealed, RefundReason, RefundRequested, StallReason,
    VoucherCreated, VoucherUpdated, WindowsExtended, MAX_HOLD_SECONDS, MAX_QUANTITY, MAX_STOCK, SCHEMA_VERSION,
};
use seckill_core::ids::MAX_USER_ID_LEN;
use seckill_core::money::{Currency, MAX_PRICE};
use seckill_core::{OrderId, UserId, VoucherId};
use uuid::Uuid;

/// 9000-01-01T00:00:00Z: the latest start of an interval, so that adding
/// [`MAX_GAP_SECONDS`] stays within four-digit years.
pub(crate) const LAST_START_SECOND: i64 = 221_845_392_000;
/// About 900 years: the longest gap between two ordered instants.
pub(crate) const MAX_GAP_SECONDS: i64 = 900 * 366 * 86_400;
/// 2020-01-01 and 2040-01-01: where real writers' `Utc::now()` lies.
pub(crate) const RECENT: std::ops::Range<i64> = 1_577_836_800..2_208_988_800;
/// 1970-01-01T00:00:00Z and 10000-01-01T00:00:00Z: sale times (a voucher's
/// begin and end) live in Redis as Unix milliseconds and every time travels
/// as RFC 3339 (four-digit years), so the decoder keeps every time an event
/// carries in the years 1970 to 9999.
pub(crate) const SALE_FIRST_SECOND: i64 = 0;
pub(crate) const SALE_END_SECOND: i64 = 253_402_300_800;

/// UUIDs in every text form `Uuid::try_parse` reads, so ids are built by the
/// ids' own parsers from what a writer could have put in the JSON.
pub(crate) fn uuid_text() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
        1 => "[0-9A-F]{8}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{12}",
        1 => "[0-9a-f]{32}",
        1 => "\\{[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\\}",
        1 => "urn:uuid:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
        1 => Just("00000000-0000-0000-0000-000000000000".to_owned()),
        1 => Just("ffffffff-ffff-ffff-ffff-ffffffffffff".to_owned()),
    ]
}

pub(crate) fn uuid() -> impl Strategy<Value = Uuid> {
    uuid_text().prop_map(|text| Uuid::try_parse(&text).expect("uuid_text writes UUIDs"))
}

pub(crate) fn order_id() -> impl Strategy<Value = OrderId> {
    uuid_text().prop_map(|text| text.parse().expect("uuid_text writes UUIDs"))
}

pub(crate) fn voucher_id() -> impl Strategy<Value = VoucherId> {
    uuid_text().prop_map(|text| text.parse().expect("uuid_text writes UUIDs"))
}

/// User ids exactly as `ids.rs` allows them: 1 to 64 of `[A-Za-z0-9_.:@-]`.
pub(crate) fn user_id_text() -> impl Strategy<Value = String> {
    prop_oneof!["[A-Za-z0-9_.:@-]{1,64}", Just("u".repeat(MAX_USER_ID_LEN)), Just("-".to_owned())]
}

pub(crate) fn user_id() -> impl Strategy<Value = UserId> {
    user_id_text().prop_map(|text| UserId::parse(&text).expect("user_id_text follows the user id rules"))
}

/// Any instant an event may carry (from 1970 on).
pub(crate) fn instant() -> impl Strategy<Value = DateTime<Utc>> {
    instant_from(SALE_FIRST_SECOND)
}

/// An instant from `first_second` to [`LAST_START_SECOND`], weighted towards
/// the recent millisecond-precision times real writers produce.
pub(crate) fn instant_from(first_second: i64) -> impl Strategy<Value = DateTime<Utc>> {
    prop_oneof![
        (RECENT, 0..1_000_u32).prop_map(|(secs, millis)| timestamp(secs, millis * 1_000_000)),
        (first_second..=LAST_START_SECOND, 0..1_000_000_000_u32).prop_map(|(secs, nanos)| timestamp(secs, nanos)),
    ]
}

/// The start of a sale, often exactly the first instant a sale may have.
pub(crate) fn sale_start() -> impl Strategy<Value = DateTime<Utc>> {
    prop_oneof![1 => Just(timestamp(SALE_FIRST_SECOND, 0)), 6 => instant_from(SALE_FIRST_SECOND)]
}

/// Any sale time, often exactly the first or the last a sale may have.
pub(crate) fn sale_instant() -> impl Strategy<Value = DateTime<Utc>> {
    prop_oneof![1 => Just(timestamp(SALE_END_SECOND - 1, 999_999_999)), 6 => sale_start()]
}

pub(crate) fn timestamp(secs: i64, nanos: u32) -> DateTime<Utc> {
    DateTime::from_timestamp(secs, nanos).expect("strategies stay within four-digit years")
}

/// How far a later instant lies after an earlier one. The edges (equal, one
/// nanosecond apart) are where an off-by-one in an ordering rule shows.
pub(crate) fn gap(strict: bool) -> BoxedStrategy<TimeDelta> {
    let positive = prop_oneof![
        Just(TimeDelta::nanoseconds(1)),
        (1..1_000_000_000_i64).prop_map(TimeDelta::nanoseconds),
        (1..=MAX_GAP_SECONDS).prop_map(TimeDelta::seconds),
    ];
    if strict {
        positive.boxed()
    } else {
        prop_oneof![1 => Just(TimeDelta::zero()), 3 => positive].boxed()
    }
}

/// Two instants, the first drawn from `first`, the second at or after it
/// (strictly after if `strict`), as `validate` requires of begins/ends and
/// accepted/decided.
pub(crate) fn ordered_instants(
    first: impl Strategy<Value = DateTime<Utc>>,
    strict: bool,
) -> impl Strategy<Value = (DateTime<Utc>, DateTime<Utc>)> {
    (first, gap(strict)).prop_map(|(first, gap)| (first, first + gap))
}

pub(crate) fn stall_reason() -> impl Strategy<Value = StallReason> {
    prop_oneof![
        Just(StallReason::Paused),
        Just(StallReason::Backlog),
        Just(StallReason::Outage),
        Just(StallReason::Granting)
    ]
}

pub(crate) fn quantity() -> impl Strategy<Value = u32> {
    prop_oneof![Just(1), Just(MAX_QUANTITY), 1..=MAX_QUANTITY]
}

pub(crate) fn stock() -> impl Strategy<Value = u64> {
    prop_oneof![Just(0), Just(MAX_STOCK), 0..=MAX_STOCK]
}

pub(crate) fn hold_seconds() -> impl Strategy<Value = u32> {
    prop_oneof![Just(0), Just(MAX_HOLD_SECONDS), 0..=MAX_HOLD_SECONDS]
}

pub(crate) fn cancel_reason() -> impl Strategy<Value = CancelReason> {
    prop_oneof![Just(CancelReason::Requested), Just(CancelReason::Expired), Just(CancelReason::Refunded)]
}

pub(crate) fn currency() -> impl Strategy<Value = Currency> {
    "[A-Z]{3}".prop_map(|code| Currency::parse(&code).expect("three capitals"))
}

/// A unit price and its currency: free (none) as often as priced.
pub(crate) fn price() -> impl Strategy<Value = (u64, Option<Currency>)> {
    prop_oneof![
        Just((0, None)),
        (prop_oneof![Just(1), Just(MAX_PRICE), 1..=MAX_PRICE], currency()).prop_map(|(p, c)| (p, Some(c))),
    ]
}

/// A provider's id (`pi_…`, `re_…`): printable ASCII, up to 255 bytes.
pub(crate) fn provider_id() -> impl Strategy<Value = String> {
    prop_oneof!["pi_[A-Za-z0-9]{8,24}", "[!-~]{1,255}"]
}

/// An amount a payment or refund can carry.
pub(crate) fn amount() -> impl Strategy<Value = u64> {
    prop_oneof![Just(1), Just(MAX_PRICE * u64::from(MAX_QUANTITY)), 1..=MAX_PRICE * u64::from(MAX_QUANTITY)]
}

pub(crate) fn refund_reason() -> impl Strategy<Value = RefundReason> {
    prop_oneof![
        Just(RefundReason::Late),
        Just(RefundReason::Duplicate),
        Just(RefundReason::Admin),
        Just(RefundReason::AmountMismatch)
    ]
}

pub(crate) fn fail_reason() -> impl Strategy<Value = FailReason> {
    prop_oneof![Just(FailReason::SoldOut), Just(FailReason::UnknownVoucher)]
}

pub(crate) fn voucher_created() -> impl Strategy<Value = Event> {
    let shown = (option::of("[A-Za-z0-9 .,!éü€\u{4e00}-\u{4e10}]{1,200}"), option::of("[ -~\n]{0,300}"));
    (voucher_id(), stock(), quantity(), hold_seconds(), 1u32..=64, ordered_instants(sale_start(), true), shown, price())
        .prop_map(
            |(
                voucher_id,
                stock,
                per_user_limit,
                hold_seconds,
                shards,
                (begins_at, ends_at),
                (title, description),
                (price, currency),
            )| {
                // A priced voucher's orders must be paid in some time.
                let hold_seconds = if price > 0 { hold_seconds.max(1) } else { hold_seconds };
                Event::VoucherCreated(VoucherCreated {
                    voucher_id,
                    stock,
                    per_user_limit,
                    begins_at,
                    ends_at,
                    hold_seconds,
                    shards,
                    title,
                    description,
                    price,
                    currency,
                    queue: None,
                    draw: None,
                    challenge_bits: 0,
                })
            },
        )
}

/// Updates leave fields out as often as they set them, since an absent field
/// is serialized differently (skipped) from a present one; at least one must
/// be set for the update to be valid.
pub(crate) fn voucher_updated() -> impl Strategy<Value = Event> {
    let add_stock = prop_oneof![Just(0), stock()];
    (voucher_id(), option::of(any::<bool>()), option::of(sale_instant()), add_stock)
        .prop_filter("an update changes something", |(_, paused, ends_at, add_stock)| {
            paused.is_some() || ends_at.is_some() || *add_stock > 0
        })
        .prop_map(|(voucher_id, paused, ends_at, add_stock)| {
            Event::VoucherUpdated(VoucherUpdated { voucher_id, paused, ends_at, add_stock })
        })
}

/// An admitted order and an instant at or after its admission, for the
/// outcomes that must not precede it.
pub(crate) fn order_and_later() -> impl Strategy<Value = (OrderAccepted, DateTime<Utc>)> {
    (order_id(), voucher_id(), user_id(), quantity(), ordered_instants(instant(), false), price()).prop_map(
        |(order_id, voucher_id, user_id, quantity, (accepted_at, later), (price, currency))| {
            let amount = price * u64::from(quantity);
            (
                OrderAccepted {
                    order_id,
                    voucher_id,
                    user_id,
                    quantity,
                    accepted_at,
                    amount,
                    currency,
                    idempotency_key: None,
                },
                later,
            )
        },
    )
}

pub(crate) fn order_request(
    reason: impl Strategy<Value = Option<CancelReason>>,
) -> impl Strategy<Value = OrderRequest> {
    (order_id(), voucher_id(), reason, instant()).prop_map(|(order_id, voucher_id, reason, requested_at)| {
        OrderRequest { order_id, voucher_id, reason, requested_at, settled_checkouts: None }
    })
}

pub(crate) fn payment_received() -> impl Strategy<Value = Event> {
    let source = prop_oneof![Just(PaymentSource::Webhook), Just(PaymentSource::Reconciliation)];
    (order_id(), voucher_id(), provider_id(), amount(), currency(), instant(), source).prop_map(
        |(order_id, voucher_id, payment_id, amount, currency, paid_at, source)| {
            Event::PaymentReceived(PaymentReceived {
                order_id,
                voucher_id,
                payment_id,
                amount,
                currency,
                paid_at,
                source,
            })
        },
    )
}

pub(crate) fn refund_requested() -> impl Strategy<Value = Event> {
    (order_id(), voucher_id(), provider_id(), amount(), currency(), refund_reason(), instant()).prop_map(
        |(order_id, voucher_id, payment_id, amount, currency, reason, requested_at)| {
            Event::RefundRequested(RefundRequested {
                order_id,
                voucher_id,
                payment_id,
                amount,
                currency,
                reason,
                requested_at,
            })
        },
    )
}

pub(crate) fn payment_refunded() -> impl Strategy<Value = Event> {
    (order_id(), voucher_id(), provider_id(), provider_id(), amount(), currency(), instant()).prop_map(
        |(order_id, voucher_id, payment_id, refund_id, amount, currency, refunded_at)| {
            Event::PaymentRefunded(PaymentRefunded {
                order_id,
                voucher_id,
                payment_id,
                refund_id,
                amount,
                currency,
                refunded_at,
            })
        },
    )
}

/// 64 lowercase hexadecimal digits: a waiting room's seed or its hash.
fn seed() -> impl Strategy<Value = String> {
    "[0-9a-f]{64}"
}

/// The waiting room's six records, each with in-range fields.
pub(crate) fn queue_event() -> BoxedStrategy<Event> {
    let place = 1u64..=1_000_000_000;
    prop_oneof![
        (voucher_id(), seed(), option::of(seed())).prop_map(|(voucher_id, seed_hash, sealed_seed)| {
            Event::QueueSeedCommitted(QueueSeedCommitted { voucher_id, seed_hash, sealed_seed })
        }),
        (voucher_id(), user_id(), instant(), option::of(1u64..(1 << 52)), 1u32..=1_000).prop_map(
            |(voucher_id, user_id, joined_at, seq, attempt)| {
                Event::QueueJoined(QueueJoined {
                    voucher_id,
                    user_id,
                    joined_at,
                    pre_queue: seq.is_none(),
                    seq,
                    attempt,
                })
            }
        ),
        (voucher_id(), seed(), 0u64..=1_000_000_000).prop_map(|(voucher_id, seed, pre_queued)| {
            Event::QueueSeedRevealed(QueueSeedRevealed {
                voucher_id,
                seed,
                pre_queued,
                beacon: None,
                entries_hash: None,
            })
        }),
        (voucher_id(), user_id(), place.clone(), place.clone(), instant()).prop_map(
            |(voucher_id, user_id, place, entry, expires_at)| {
                Event::QueueEntryIssued(QueueEntryIssued { voucher_id, user_id, place, entry, expires_at })
            }
        ),
        (voucher_id(), user_id(), place.clone()).prop_map(|(voucher_id, user_id, place)| {
            Event::QueuePlaceExpired(QueuePlaceExpired { voucher_id, user_id, place })
        }),
        (voucher_id(), user_id(), place, order_id()).prop_map(|(voucher_id, user_id, entry, order_id)| {
            Event::QueueEntryUsed(QueueEntryUsed { voucher_id, user_id, entry, order_id })
        }),
    ]
    .boxed()
}

/// The draw's seven records and `WindowsExtended`, each with in-range fields.
pub(crate) fn draw_event() -> BoxedStrategy<Event> {
    let rank = 1u64..=1_000_000_000;
    prop_oneof![
        (voucher_id(), seed(), proptest::option::of(seed())).prop_map(|(voucher_id, seed_hash, sealed_seed)| {
            Event::DrawSeedCommitted(DrawSeedCommitted { voucher_id, seed_hash, sealed_seed })
        }),
        (voucher_id(), user_id(), instant(), rank.clone()).prop_map(|(voucher_id, user_id, entered_at, seq)| {
            Event::DrawEntered(DrawEntered { voucher_id, user_id, entered_at, seq })
        }),
        (voucher_id(), seed(), option::of("[0-9a-f]{40}")).prop_map(|(voucher_id, seed, hash)| {
            let entries = u64::from(hash.is_some());
            Event::DrawSeedRevealed(DrawSeedRevealed {
                voucher_id,
                seed,
                entries,
                entries_hash: hash.unwrap_or_default(),
                beacon: None,
            })
        }),
        (voucher_id(), 0u64..100, rank.clone(), proptest::collection::vec(user_id(), 1..5)).prop_map(
            |(voucher_id, chunk, first_rank, users)| {
                Event::DrawRanked(DrawRanked { voucher_id, chunk, chunks: chunk + 1, first_rank, users })
            }
        ),
        (voucher_id(), 0u64..=1_000_000_000, instant()).prop_map(|(voucher_id, winners, purchase_until)| {
            Event::DrawWinnersSelected(DrawWinnersSelected { voucher_id, winners, purchase_until })
        }),
        (voucher_id(), user_id(), rank.clone(), instant()).prop_map(|(voucher_id, user_id, rank, purchase_until)| {
            Event::DrawWinnerPromoted(DrawWinnerPromoted { voucher_id, user_id, rank, purchase_until })
        }),
        (voucher_id(), user_id(), rank, order_id()).prop_map(|(voucher_id, user_id, rank, order_id)| {
            Event::DrawWinUsed(DrawWinUsed { voucher_id, user_id, rank, order_id })
        }),
        (voucher_id(), ordered_instants(sale_start(), false), stall_reason()).prop_map(
            |(voucher_id, (from, until), reason)| {
                Event::WindowsExtended(WindowsExtended { voucher_id, from, until, reason })
            }
        ),
    ]
    .boxed()
}

/// Every one of the eighteen event types, each with in-range fields. Each arm is
/// boxed: unboxed, the arms' value trees are moved around as one value
/// that overflows a test thread's 2 MiB stack in a debug build.
pub(crate) fn valid_event() -> BoxedStrategy<Event> {
    prop_oneof![
        voucher_created().boxed(),
        voucher_updated().boxed(),
        order_and_later().prop_map(|(order, _)| Event::OrderAccepted(order)).boxed(),
        order_request(cancel_reason().prop_map(Some)).prop_map(Event::CancelRequested).boxed(),
        order_request(Just(None)).prop_map(Event::ConfirmRequested).boxed(),
        (order_and_later(), stock(), option::of(sale_instant()))
            .prop_map(|((order, decided_at), remaining, pay_by)| {
                Event::OrderCreated(OrderCreated { order, decided_at, remaining, pay_by })
            })
            .boxed(),
        (order_and_later(), fail_reason())
            .prop_map(|((order, decided_at), reason)| Event::OrderFailed(OrderFailed { order, decided_at, reason }))
            .boxed(),
        (order_and_later(), option::of(provider_id()))
            .prop_map(|((order, paid_at), payment_id)| Event::OrderPaid(OrderPaid { order, paid_at, payment_id }))
            .boxed(),
        (order_and_later(), cancel_reason(), stock())
            .prop_map(|((order, cancelled_at), reason, remaining)| {
                Event::OrderCancelled(OrderCancelled { order, cancelled_at, reason, remaining })
            })
            .boxed(),
        payment_received().boxed(),
        refund_requested().boxed(),
        payment_refunded().boxed(),
        queue_event(),
        draw_event(),
    ]
    .boxed()
}

pub(crate) fn valid_envelope() -> impl Strategy<Value = Envelope> {
    (1..=SCHEMA_VERSION, uuid(), instant(), valid_event()).prop_map(|(schema, event_id, emitted_at, event)| Envelope {
        schema,
        event_id,
        emitted_at,
        event,
    })
}
