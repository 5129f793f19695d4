use std::fs::File;

use arrow_array::cast::AsArray;
use arrow_array::types::{Int64Type, TimestampMicrosecondType};
use arrow_schema::{DataType, TimeUnit};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use seckill_core::event::SCHEMA_VERSION;

use super::*;
use crate::sale::script::{at, busy_sale, paid_sale};

/// The records of `scripts`, one JSON Lines text as `seckill replay` writes.
pub(crate) fn lines(records: &[Envelope]) -> String {
    records.iter().map(|envelope| String::from_utf8(envelope.encode()).expect("UTF-8") + "\n").collect()
}

fn batches(dir: &Path, kind: &str) -> Vec<RecordBatch> {
    let file = File::open(dir.join(format!("{kind}.parquet"))).expect("the file");
    let reader = ParquetRecordBatchReaderBuilder::try_new(file).expect("Parquet").build().expect("a reader");
    reader.map(|batch| batch.expect("a batch")).collect()
}

use arrow_array::{Array, RecordBatch};

#[test]
fn a_sale_becomes_one_typed_table_per_kind_with_where_each_record_was() {
    let sale = paid_sale();
    let records: Vec<Envelope> = sale.records.iter().map(|(envelope, _)| envelope.clone()).collect();
    let dir = tempfile::tempdir().expect("a directory");
    let summary = export_lines(lines(&records).as_bytes(), "sale.jsonl", &ExportOptions::default(), dir.path())
        .expect("exported");
    assert_eq!(summary.written(), records.len() as u64, "{summary}");
    assert_eq!(summary.bad(), 0);
    assert_eq!(summary.files.len(), seckill_core::Event::KINDS.len(), "every kind has its file");
    let created = records.iter().filter(|e| e.kind() == "OrderCreated").count() as u64;
    assert_eq!(summary.rows["OrderCreated"], created);
    assert_eq!(summary.rows["DrawRanked"], 0);

    let batches = batches(dir.path(), "OrderCreated");
    let batch = &batches[0];
    let schema = batch.schema();
    let type_of = |name: &str| schema.field_with_name(name).expect(name).data_type().clone();
    assert_eq!(type_of("decided_at"), DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())));
    assert_eq!(type_of("log_time"), DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())));
    assert_eq!(type_of("amount"), DataType::Int64);
    assert_eq!(type_of("remaining"), DataType::Int64);
    assert_eq!(type_of("log_partition"), DataType::Int32);
    assert_eq!(type_of("order_id"), DataType::Utf8);
    assert_eq!(type_of("currency"), DataType::Utf8);
    let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).take(7).collect();
    assert_eq!(names, ["log_topic", "log_partition", "log_offset", "log_time", "schema", "event_id", "emitted_at"]);
    assert!(schema.field_with_name("type").is_err(), "the table is the type");

    let first = records.iter().position(|e| e.kind() == "OrderCreated").expect("one");
    let offsets = batch.column_by_name("log_offset").expect("log_offset").as_primitive::<Int64Type>();
    assert_eq!(offsets.value(0), first as i64, "a file's offset is the line");
    let amounts = batch.column_by_name("amount").expect("amount").as_primitive::<Int64Type>();
    assert_eq!(amounts.value(0), 1_250);
    let decided = batch.column_by_name("decided_at").expect("decided_at").as_primitive::<TimestampMicrosecondType>();
    assert_eq!(decided.value(0), at(5).timestamp_micros());
    assert!(batch.column_by_name("log_partition").expect("partition").is_null(0), "a file has no partition");
}

#[test]
fn free_orders_read_amount_zero_and_a_voucher_one_shard() {
    let sale = busy_sale();
    let records: Vec<Envelope> = sale.records.iter().map(|(envelope, _)| envelope.clone()).collect();
    let dir = tempfile::tempdir().expect("a directory");
    export_lines(lines(&records).as_bytes(), "busy.jsonl", &ExportOptions::default(), dir.path()).expect("exported");
    let batch = &batches(dir.path(), "OrderAccepted")[0];
    let amounts = batch.column_by_name("amount").expect("amount").as_primitive::<Int64Type>();
    assert!((0..batch.num_rows()).all(|row| amounts.is_valid(row) && amounts.value(row) == 0));
    let voucher = &batches(dir.path(), "VoucherCreated")[0];
    let shards = voucher.column_by_name("shards").expect("shards").as_primitive::<Int64Type>();
    assert_eq!(shards.value(0), 1);
    assert!(voucher.column_by_name("price").expect("price").is_valid(0));
}

#[test]
fn newer_and_malformed_records_are_named_counted_and_skipped_and_the_rest_written() {
    let sale = busy_sale();
    let records: Vec<Envelope> = sale.records.iter().map(|(envelope, _)| envelope.clone()).collect();
    let mut newer = records[1].clone();
    newer.schema = SCHEMA_VERSION + 1;
    let mut text = lines(&records);
    text.push_str(&String::from_utf8(newer.encode()).expect("UTF-8"));
    text.push_str("\nnot json at all\n{\"schema\":1,\"type\":\"OrderShipped\"}\n\n");
    let dir = tempfile::tempdir().expect("a directory");
    let summary = export_lines(text.as_bytes(), "bad.jsonl", &ExportOptions::default(), dir.path()).expect("exported");
    assert_eq!(summary.written(), records.len() as u64);
    assert_eq!((summary.newer, summary.malformed), (1, 2), "{summary}");
    let at: Vec<&str> = summary.named.iter().map(|skipped| skipped.at.as_str()).collect();
    let n = records.len();
    assert_eq!(at, [format!("bad.jsonl:{}", n + 1), format!("bad.jsonl:{}", n + 2), format!("bad.jsonl:{}", n + 3)]);
    assert!(summary.named[0].why.contains("schema version 2"), "{:?}", summary.named[0]);
    let shown = summary.to_string();
    assert!(shown.contains("1 of a newer schema version skipped, 2 malformed skipped"), "{shown}");
}

#[test]
fn voucher_since_and_until_leave_records_out() {
    let busy = busy_sale();
    let paid = paid_sale();
    let records: Vec<Envelope> =
        busy.records.iter().chain(paid.records.iter()).map(|(envelope, _)| envelope.clone()).collect();
    let dir = tempfile::tempdir().expect("a directory");
    let options = ExportOptions { voucher: Some(paid.voucher), ..ExportOptions::default() };
    let summary = export_lines(lines(&records).as_bytes(), "two.jsonl", &options, dir.path()).expect("exported");
    assert_eq!(summary.written(), paid.records.len() as u64);
    assert_eq!(summary.filtered, busy.records.len() as u64);

    let window: Vec<Envelope> = busy.records.iter().map(|(envelope, _)| envelope.clone()).collect();
    let (since, until) = (window[3].emitted_at, window[6].emitted_at);
    let inside = window.iter().filter(|e| e.emitted_at >= since && e.emitted_at < until).count() as u64;
    let options = ExportOptions { since: Some(since), until: Some(until), ..ExportOptions::default() };
    let summary = export_lines(lines(&window).as_bytes(), "busy.jsonl", &options, dir.path()).expect("exported");
    assert_eq!(summary.written(), inside);
    assert_eq!(summary.filtered, window.len() as u64 - inside);
}
