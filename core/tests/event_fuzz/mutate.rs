//! Mutations of valid records: at the byte level (what storage and transport
//! do to data) and at the JSON level (what a wrong writer does), and how each
//! is applied. The values they splice in come from [`crate::hostile`].

use crate::hostile::*;
use crate::valid::*;
use chrono::TimeDelta;
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::{select, Index};
use seckill_core::event::{MAX_QUANTITY, MAX_STOCK, SCHEMA_VERSION};
use serde_json::{Map, Value};

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
    (count, time, uuid_text(), user_id_text(), select(names()), flag).prop_map(|(count, time, id, user, word, flag)| {
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

/// What a payload of a `type` tag can be swapped for: another type, a
/// near-miss spelling, a variant index (`"type": 2`), or no string at all.
/// The decoder refuses every tag that is not a string, which
/// [`crate::ranges::check_accepted`] holds it to.
pub(crate) fn type_tag() -> impl Strategy<Value = Value> {
    prop_oneof![
        select(names()).prop_map(Value::from),
        select(names()).prop_map(|name| Value::from(name.to_lowercase())),
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
