//! Mutations of valid records: at the byte level (what storage and transport
//! do to data) and at the JSON level (what a wrong writer does), plus records
//! with no structure at all.

use crate::valid::*;
use chrono::TimeDelta;
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::{select, Index};
use seckill_core::event::{MAX_HOLD_SECONDS, MAX_QUANTITY, MAX_STOCK, SCHEMA_VERSION};
use seckill_core::ids::MAX_USER_ID_LEN;
use serde_json::{Map, Value};

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
    "confirmed_at",
    "cancelled_at",
];

/// The nine `type` tags and the reason names: valid words in the wrong place.
pub(crate) const NAMES: &[&str] = &[
    "VoucherCreated",
    "VoucherUpdated",
    "OrderAccepted",
    "CancelRequested",
    "ConfirmRequested",
    "OrderCreated",
    "OrderFailed",
    "OrderConfirmed",
    "OrderCancelled",
    "requested",
    "expired",
    "sold_out",
    "unknown_voucher",
];

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
        select(NAMES).prop_map(str::to_owned),
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

/// For [`Mutation::ReplaceWithPlausible`]: one well-formed value of each
/// shape a field can have, so the record usually still parses and the range
/// checks, not the parser, must refuse it.
#[derive(Clone, Debug)]
pub(crate) struct Plausible {
    /// For counts and the schema: often at or just past a limit.
    count: Value,
    /// For times: any instant, or just either side of the sale years.
    time: Value,
    id: Value,
    user: Value,
    /// For `type` and `reason`: any tag or reason name.
    word: Value,
    flag: Value,
}

impl Plausible {
    /// The candidate shaped like the values of `field`.
    fn for_field(&self, field: &str) -> Value {
        match field {
            "schema" | "stock" | "per_user_limit" | "hold_seconds" | "add_stock" | "quantity" | "remaining" => {
                self.count.clone()
            }
            "event_id" | "voucher_id" | "order_id" => self.id.clone(),
            "user_id" => self.user.clone(),
            "type" | "reason" => self.word.clone(),
            "paused" => self.flag.clone(),
            _ => self.time.clone(),
        }
    }
}

pub(crate) fn plausible() -> impl Strategy<Value = Plausible> {
    let count = prop_oneof![
        edge_number(),
        (0..=u64::from(MAX_QUANTITY) + 1).prop_map(Value::from),
        (MAX_STOCK - 2..=MAX_STOCK + 2).prop_map(Value::from),
    ];
    let first_sale = timestamp(SALE_FIRST_SECOND, 0);
    let last_sale = timestamp(SALE_END_SECOND - 1, 999_999_999);
    let time = prop_oneof![
        3 => instant(),
        1 => select(vec![first_sale - TimeDelta::nanoseconds(1), first_sale, last_sale, last_sale + TimeDelta::nanoseconds(1)]),
    ];
    let flag = prop_oneof![Just(Value::Null), any::<bool>().prop_map(Value::Bool)];
    (count, time, uuid_text(), user_id_text(), select(NAMES), flag).prop_map(|(count, time, id, user, word, flag)| {
        Plausible {
            count,
            time: Value::from(time.to_rfc3339()),
            id: id.into(),
            user: user.into(),
            word: word.into(),
            flag,
        }
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

/// What a payload of a `type` tag can be swapped for: another type, a
/// near-miss spelling, a variant index, or no string at all.
pub(crate) fn type_tag() -> impl Strategy<Value = Value> {
    prop_oneof![
        select(NAMES).prop_map(Value::from),
        select(NAMES).prop_map(|name| Value::from(name.to_lowercase())),
        (0_u64..12).prop_map(Value::from),
        hostile_value(),
    ]
}

/// Schema versions a reader must refuse, and not-quite-numbers.
pub(crate) fn schema_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::from(0)),
        Just(Value::from(SCHEMA_VERSION + 1)),
        Just(Value::from(u16::MAX)),
        Just(Value::from(65_536)),
        Just(Value::from(-1)),
        Just(Value::from(SCHEMA_VERSION.to_string())),
        Just(Value::from(f64::from(SCHEMA_VERSION))),
        Just(Value::Null),
    ]
}

/// One change to a valid record, at the byte level (what storage and
/// transport do to data) or the JSON level (what a wrong writer does).
#[derive(Clone, Debug)]
pub(crate) enum Mutation {
    /// XOR one byte with a non-zero mask.
    FlipByte(Index, u8),
    /// Overwrite one byte.
    ReplaceByte(Index, u8),
    /// Cut the record short, as a torn write would.
    Truncate(Index),
    /// Splice in random bytes or a JSON fragment.
    Insert(Index, Vec<u8>),
    /// Drop one field.
    RemoveField(Index),
    /// Give one field another JSON value.
    ReplaceField(Index, Value),
    /// Give one field a well-formed value of its own shape.
    ReplaceWithPlausible(Index, Box<Plausible>),
    /// Swap two fields' values, e.g. an order's accepted and decided times.
    SwapFields(Index, Index),
    /// Give one field a value only raw JSON text can express.
    ReplaceFieldRaw(Index, &'static str),
    /// Add a field, often one that belongs to another event type.
    AddField(String, Value),
    /// Change the `type` tag.
    SetType(Value),
    /// Change the schema version.
    SetSchema(Value),
}

pub(crate) fn mutation() -> impl Strategy<Value = Mutation> {
    let spliced = prop_oneof![vec(any::<u8>(), 1..16), select(JSON_TOKENS).prop_map(|token| token.as_bytes().to_vec())];
    prop_oneof![
        1 => (any::<Index>(), 1..=u8::MAX).prop_map(|(at, mask)| Mutation::FlipByte(at, mask)),
        1 => (any::<Index>(), any::<u8>()).prop_map(|(at, byte)| Mutation::ReplaceByte(at, byte)),
        1 => any::<Index>().prop_map(Mutation::Truncate),
        1 => (any::<Index>(), spliced).prop_map(|(at, bytes)| Mutation::Insert(at, bytes)),
        1 => any::<Index>().prop_map(Mutation::RemoveField),
        2 => (any::<Index>(), hostile_value()).prop_map(|(at, value)| Mutation::ReplaceField(at, value)),
        4 => (any::<Index>(), plausible()).prop_map(|(at, values)| Mutation::ReplaceWithPlausible(at, Box::new(values))),
        2 => (any::<Index>(), any::<Index>()).prop_map(|(a, b)| Mutation::SwapFields(a, b)),
        1 => (any::<Index>(), select(RAW_VALUES)).prop_map(|(at, raw)| Mutation::ReplaceFieldRaw(at, raw)),
        1 => (field_name(), hostile_value()).prop_map(|(name, value)| Mutation::AddField(name, value)),
        1 => type_tag().prop_map(Mutation::SetType),
        1 => schema_value().prop_map(Mutation::SetSchema),
    ]
}

/// Marks the value that [`Mutation::ReplaceFieldRaw`] swaps for raw text.
pub(crate) const RAW_PLACEHOLDER: &str = "\u{1}raw-json-placeholder\u{1}";

/// Applies `mutation` to `record`. JSON-level mutations act only while the
/// record still parses as a JSON object; otherwise they change nothing.
pub(crate) fn apply(record: &mut Vec<u8>, mutation: &Mutation) {
    match mutation {
        Mutation::FlipByte(at, mask) => {
            if let Some(byte) = byte_at(record, at) {
                *byte ^= mask;
            }
        }
        Mutation::ReplaceByte(at, new) => {
            if let Some(byte) = byte_at(record, at) {
                *byte = *new;
            }
        }
        Mutation::Truncate(at) => record.truncate(at.index(record.len() + 1)),
        Mutation::Insert(at, bytes) => {
            let at = at.index(record.len() + 1);
            record.splice(at..at, bytes.iter().copied());
        }
        Mutation::RemoveField(at) => edit_object(record, |object| {
            if let Some(name) = nth_key(object, at) {
                object.remove(&name);
            }
        }),
        Mutation::ReplaceField(at, value) => edit_object(record, |object| {
            if let Some(name) = nth_key(object, at) {
                object.insert(name, value.clone());
            }
        }),
        Mutation::ReplaceWithPlausible(at, values) => edit_object(record, |object| {
            if let Some(name) = nth_key(object, at) {
                let value = values.for_field(&name);
                object.insert(name, value);
            }
        }),
        Mutation::SwapFields(a, b) => edit_object(record, |object| {
            if let (Some(a), Some(b)) = (nth_key(object, a), nth_key(object, b)) {
                let a_value = object.remove(&a).unwrap_or_default();
                let b_value = object.insert(b, a_value).unwrap_or_default();
                object.insert(a, b_value);
            }
        }),
        Mutation::ReplaceFieldRaw(at, raw) => {
            edit_object(record, |object| {
                if let Some(name) = nth_key(object, at) {
                    object.insert(name, Value::from(RAW_PLACEHOLDER));
                }
            });
            let placeholder = serde_json::to_string(RAW_PLACEHOLDER).expect("a string serializes");
            let text = String::from_utf8_lossy(record).replacen(&placeholder, raw, 1);
            *record = text.into_bytes();
        }
        Mutation::AddField(name, value) => edit_object(record, |object| {
            object.insert(name.clone(), value.clone());
        }),
        Mutation::SetType(value) => edit_object(record, |object| {
            object.insert("type".to_owned(), value.clone());
        }),
        Mutation::SetSchema(value) => edit_object(record, |object| {
            object.insert("schema".to_owned(), value.clone());
        }),
    }
}

/// The byte `at` picks, if the record has any.
pub(crate) fn byte_at<'a>(record: &'a mut [u8], at: &Index) -> Option<&'a mut u8> {
    if record.is_empty() {
        return None;
    }
    record.get_mut(at.index(record.len()))
}

pub(crate) fn nth_key(object: &Map<String, Value>, at: &Index) -> Option<String> {
    if object.is_empty() {
        return None;
    }
    object.keys().nth(at.index(object.len())).cloned()
}

pub(crate) fn edit_object(record: &mut Vec<u8>, edit: impl FnOnce(&mut Map<String, Value>)) {
    if let Ok(Value::Object(mut object)) = serde_json::from_slice(record) {
        edit(&mut object);
        *record = serde_json::to_vec(&Value::Object(object)).expect("a JSON value serializes");
    }
}

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
