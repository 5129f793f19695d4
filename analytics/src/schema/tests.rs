use std::collections::BTreeSet;

use seckill_core::event::CheckoutOpened;
use seckill_core::ids::OrderId;
use seckill_core::Event;

use super::*;
use crate::sale::draw_script::draw_sale;
use crate::sale::queue_script::queue_sale;
use crate::sale::script::{at, busy_sale, paid_sale, Script};

/// `docs/schemas/` in the repository.
fn committed() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/schemas")
}

#[test]
fn the_committed_schemas_are_the_generated_ones() {
    if std::env::var_os("SECKILL_WRITE_SCHEMAS").is_some() {
        write(&committed()).expect("schemas written");
    }
    let differences = differences(&committed());
    assert!(
        differences.is_empty(),
        "docs/schemas/ is not what this build generates:\n  {}\nregenerate with `cargo run -p seckill -- schema --out docs/schemas` \
         (or `SECKILL_WRITE_SCHEMAS=1 cargo test -p seckill-analytics --lib schema`) and commit the files",
        differences.join("\n  ")
    );
}

#[test]
fn every_kind_has_its_file_and_the_envelope_lists_them_all() {
    let names = kind_names();
    assert_eq!(names.len(), 27, "{names:?}");
    assert!(names.iter().any(|name| name == "CheckoutOpened"));
    let files: Vec<String> = schemas().into_iter().map(|(name, _)| name).collect();
    assert_eq!(files.len(), names.len() + 1);
}

/// Every record of the scripted sales (first come, paid, queue, draw) and a
/// checkout session, each with the event id and time of the script.
fn scripted_records() -> Vec<Envelope> {
    let mut records = Vec::new();
    for script in [busy_sale(), paid_sale(), queue_sale(), draw_sale().script] {
        records.extend(script.records.iter().map(|(envelope, _)| envelope.clone()));
    }
    let mut checkout = Script::priced(1, 1, 60, 500, Some("EUR"));
    let order = checkout.accept("alice", 1, 0);
    checkout.decide(&order, 5);
    checkout.sales(Event::CheckoutOpened(CheckoutOpened {
        order_id: order.order_id,
        voucher_id: checkout.voucher,
        session_id: "cs_test_a".to_owned(),
        opened_at: at(10),
        expires_at: at(1_800_010),
    }));
    checkout.request_cancel(&order, 60_000, seckill_core::event::CancelReason::Expired);
    records.extend(checkout.records.iter().map(|(envelope, _)| envelope.clone()));
    records
}

fn validators() -> Vec<(String, jsonschema::Validator)> {
    schemas()
        .into_iter()
        .map(|(name, schema)| {
            let validator = jsonschema::options()
                .should_validate_formats(true)
                .build(&schema)
                .unwrap_or_else(|e| panic!("{name} is not a valid schema: {e}"));
            (name, validator)
        })
        .collect()
}

fn validator<'a>(validators: &'a [(String, jsonschema::Validator)], file: &str) -> &'a jsonschema::Validator {
    &validators.iter().find(|(name, _)| name == file).unwrap_or_else(|| panic!("no schema {file}")).1
}

fn errors(validator: &jsonschema::Validator, record: &Value) -> Vec<String> {
    validator.iter_errors(record).map(|e| format!("{} at {}", e, e.instance_path())).collect()
}

#[test]
fn every_scripted_record_is_valid_against_its_kinds_schema_and_the_envelopes() {
    let validators = validators();
    let mut seen = BTreeSet::new();
    for envelope in scripted_records() {
        let record: Value = serde_json::from_slice(&envelope.encode()).expect("a record is JSON");
        let kind = envelope.kind();
        seen.insert(kind.to_owned());
        let own = errors(validator(&validators, &format!("{kind}.json")), &record);
        assert!(own.is_empty(), "{kind} record {record} is not valid against {kind}.json: {own:?}");
        let any = errors(validator(&validators, ENVELOPE_FILE), &record);
        assert!(any.is_empty(), "{kind} record {record} is not valid against {ENVELOPE_FILE}: {any:?}");
    }
    let all: BTreeSet<String> = kind_names().into_iter().collect();
    let missing: Vec<&String> = all.difference(&seen).collect();
    assert!(missing.is_empty(), "no scripted record of {missing:?}: add one so its schema is checked");
}

#[test]
fn a_field_the_schema_lacks_or_a_missing_one_or_a_wrong_type_fails() {
    let validators = validators();
    let mut sale = Script::new(4, 2, 5);
    let order = sale.accept("zoe", 1, 9_000);
    let created = sale.decide(&order, 9_010);
    assert_eq!(created.kind(), "OrderCreated");
    let record: Value = serde_json::from_slice(&created.encode()).expect("JSON");
    let schema = validator(&validators, "OrderCreated.json");
    assert!(errors(schema, &record).is_empty());

    let mut extra = record.clone();
    extra["coupon"] = json!("SPRING");
    assert!(!errors(schema, &extra).is_empty(), "an unknown field passes");

    let mut missing = record.clone();
    missing.as_object_mut().expect("an object").remove("decided_at");
    assert!(!errors(schema, &missing).is_empty(), "a missing field passes");

    let mut wrong = record.clone();
    wrong["remaining"] = json!("three");
    assert!(!errors(schema, &wrong).is_empty(), "a string count passes");

    let mut not_a_time = record.clone();
    not_a_time["decided_at"] = json!("yesterday");
    assert!(!errors(schema, &not_a_time).is_empty(), "a timestamp that is none passes");

    let mut not_an_id = record;
    not_an_id["order_id"] = json!(OrderId::generate().to_string() + "x");
    assert!(!errors(schema, &not_an_id).is_empty(), "an order id that is no UUID passes");
}
