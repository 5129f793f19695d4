//! The hostile vocabulary: field names, tag words, JSON fragments, near-miss
//! UUIDs and times, edge numbers and raw JSON text, from which the mutations
//! and the structureless records are drawn. Kept apart from the mutations so
//! each list can grow without burying how records are changed.

use crate::valid::*;
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::select;
use seckill_core::event::{Event, MAX_HOLD_SECONDS, MAX_QUANTITY, MAX_STOCK};
use seckill_core::ids::MAX_USER_ID_LEN;
use serde_json::Value;

/// Every field name of every event type, so mutations hit fields the decoder
/// actually reads (and fields that belong to another type).
pub(crate) const FIELDS: &[&str] = &[
    "schema",
    "event_id",
    "emitted_at",
    "type",
    "voucher_id",
    "stock",
    "per_user_limit",
    "begins_at",
    "ends_at",
    "hold_seconds",
    "paused",
    "add_stock",
    "order_id",
    "user_id",
    "quantity",
    "accepted_at",
    "decided_at",
    "remaining",
    "reason",
    "requested_at",
    "paid_at",
    "cancelled_at",
];

/// The cancel and fail reason names: valid words in the wrong place (the
/// `type` tags, `Event::KINDS`, are the other half of [`names`]).
const REASONS: &[&str] = &["requested", "expired", "sold_out", "unknown_voucher"];

/// The `type` tags and the reason names.
pub(crate) fn names() -> Vec<&'static str> {
    Event::KINDS.iter().chain(REASONS).copied().collect()
}

/// Fragments of JSON that, spliced into a record, break its structure in the
/// ways hand-edited or torn records do: stray brackets, duplicate keys,
/// escapes, numbers out of every range, a byte-order mark.
pub(crate) const JSON_TOKENS: &[&str] = &[
    "{",
    "}",
    "[",
    "]",
    ":",
    ",",
    "\"",
    "\\",
    "null",
    "true",
    "false",
    "-",
    "0",
    "-0",
    "1e999",
    "18446744073709551616",
    "\\u0000",
    "\\ud800",
    "\u{feff}",
    " ",
    "\"type\":",
    "\"type\":\"OrderAccepted\",",
    ",\"quantity\":0",
    ",\"quantity\":10001",
    ",\"schema\":2",
    ",\"remaining\":1000000001",
    ",\"reason\":\"requested\"",
    ",\"user_id\":\"a b\"",
    "\"2026-01-01T00:00:00Z\"",
];

/// Strings that are one slip away from a UUID.
pub(crate) const ALMOST_UUIDS: &[&str] = &[
    "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{11}",
    "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{13}",
    "[0-9a-f]{8}-[0-9a-f]{4}-[g-zG-Z ][0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}",
    "[0-9a-f]{9}-[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
    "[0-9a-f]{8}_[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
    " [0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12} ?",
    "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}-",
    "\\{[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
    "urn:uuid:[0-9a-f]{31,33}",
    "[0-9a-f]{31}|[0-9a-f]{33}",
    "0x[0-9a-f]{32}",
    "[0-9]{1,6}",
];

/// Strings that are one slip away from an RFC 3339 time, including some that
/// chrono does accept (leap seconds, offsets, a space separator), which must
/// then still read back as themselves.
pub(crate) const ALMOST_TIMES: &[&str] = &[
    "20[0-9]{2}-(00|1[3-9])-[0-2][1-9]T[01][0-9]:[0-5][0-9]:[0-5][0-9]Z",
    "20[0-9]{2}-02-3[01]T00:00:00Z",
    "20[0-9]{2}-0[1-9]-00T00:00:00Z",
    "20[0-9]{2}-01-01T2[4-9]:00:00Z",
    "20[0-9]{2}-01-01T00:[6-9][0-9]:00Z",
    "20[0-9]{2}-(06-30|12-31)T23:59:60(\\.[0-9]{1,9})?Z",
    "20[0-9]{2}-01-01T00:00:6[1-9]Z",
    "20[0-9]{2}-01-01T00:00:00",
    "20[0-9]{2}-01-01T00:00:00[+-](2[4-9]|[3-9][0-9]):00",
    "20[0-9]{2}-01-01T00:00:00[+-][01][0-9]:[0-5][0-9]",
    "20[0-9]{2}-01-01[ t]00:00:00[zZ]",
    "20[0-9]{2}-01-01T00:00:00\\.[0-9]{10,20}Z",
    "20[0-9]{2}-01-01T00:00:00\\.Z",
    "20[0-9]{2}-01-01",
    "[+-]?[0-9]{5,6}-01-01T00:00:00Z",
    "-?0000-01-01T00:00:00Z",
    "[0-9]{1,3}-01-01T00:00:00Z",
    "20[0-9]{2}-1-1T0:0:0Z",
    "[0-9]{9,12}",
];

/// A string generated from one of `patterns`, chosen at random.
pub(crate) fn one_of_patterns(patterns: &'static [&'static str]) -> impl Strategy<Value = String> {
    select(patterns).prop_flat_map(|pattern| pattern)
}

/// Numbers at and just past every limit, and ones no integer field can hold.
pub(crate) fn edge_number() -> impl Strategy<Value = Value> {
    let quantity = u64::from(MAX_QUANTITY);
    let hold = u64::from(MAX_HOLD_SECONDS);
    prop_oneof![
        select(vec![
            0,
            1,
            quantity,
            quantity + 1,
            hold,
            hold + 1,
            MAX_STOCK,
            MAX_STOCK + 1,
            u64::from(u16::MAX),
            u64::from(u16::MAX) + 1,
            u64::from(u32::MAX),
            u64::from(u32::MAX) + 1,
            u64::MAX,
        ])
        .prop_map(Value::from),
        select(vec![-1_i64, -1_000_000_000, i64::MIN]).prop_map(Value::from),
        select(vec![0.5_f64, 1.0, -0.0, 1.5, 1e300, -1e300, f64::MIN_POSITIVE]).prop_map(Value::from),
    ]
}

/// Text a field may be set to: garbage, overlong, and near misses of every
/// format the envelope uses, plus valid values of other fields.
pub(crate) fn hostile_text() -> impl Strategy<Value = String> {
    prop_oneof![
        "\\PC{0,24}",
        "[\\x00-\\x1f]{1,4}",
        prop_oneof![Just(MAX_USER_ID_LEN + 1), (MAX_USER_ID_LEN + 2)..9_000].prop_map(|len| "u".repeat(len)),
        one_of_patterns(ALMOST_UUIDS),
        one_of_patterns(ALMOST_TIMES),
        uuid_text(),
        instant().prop_map(|at| at.to_rfc3339()),
        user_id_text(),
        select(names()).prop_map(str::to_owned),
    ]
}

/// Any JSON value, nested a few levels, built from the hostile leaves above.
pub(crate) fn hostile_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        edge_number(),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        hostile_text().prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..4).prop_map(Value::Array),
            vec((field_name(), inner), 0..4).prop_map(|fields| Value::Object(fields.into_iter().collect())),
        ]
    })
}

pub(crate) fn field_name() -> impl Strategy<Value = String> {
    prop_oneof![3 => select(FIELDS).prop_map(str::to_owned), 1 => "[a-z_]{1,12}"]
}

/// Raw JSON text that `serde_json::Value` cannot hold, so it is spliced into
/// the serialized record instead: integers past `u64`, overflowing floats,
/// leading zeros, non-JSON literals, lone surrogates.
pub(crate) const RAW_VALUES: &[&str] = &[
    "18446744073709551616",
    "-18446744073709551617",
    "100000000000000000000000000000",
    "1e400",
    "-1e400",
    "1E2",
    "01",
    "+1",
    "0x10",
    "NaN",
    "Infinity",
    "\"\\ud800\"",
    "\"\\u0000\"",
    "\"a\\u0000b\"",
    "\"\\u00e9\"",
    "[",
    "{\"a\":}",
];

/// Bytes with no structure, JSON fragments in random order, or nesting deep
/// enough to overflow a recursive parser without a depth limit.
pub(crate) fn arbitrary_record() -> impl Strategy<Value = Vec<u8>> {
    let token = prop_oneof![
        select(JSON_TOKENS).prop_map(str::to_owned),
        select(FIELDS).prop_map(|name| format!("\"{name}\":")),
        hostile_value().prop_map(|value| value.to_string()),
    ];
    let nesting = select(vec!["[", "{\"a\":", "{\"type\":\"VoucherUpdated\",\"paused\":"]);
    prop_oneof![
        vec(any::<u8>(), 0..8 * 1024),
        vec(token, 0..64).prop_map(|tokens| tokens.concat().into_bytes()),
        (nesting, 1..2_000_usize).prop_map(|(open, depth)| open.repeat(depth).into_bytes()),
    ]
}
