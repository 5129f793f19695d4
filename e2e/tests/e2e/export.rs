//! `seckill export` reading the topics themselves (not a JSON Lines copy):
//! a sale on the real broker, one malformed record and one of a newer
//! schema in the sales topic, exported to Parquet and read back by DuckDB.
//! Every row carries where it was read (topic, partition, offset, time) as
//! Kafka has it; the bad records are named and counted, the rest written.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::AtomicBool;

use reqwest::StatusCode;
use seckill_analytics::export::{export_topics, ExportOptions};
use seckill_kafka::{Message, OwnedHeaders};
use serde_json::Value;

use crate::helpers::Platform;

/// The Python `scripts/setup --tests` installs DuckDB into.
fn duckdb_python() -> PathBuf {
    let path = std::env::var_os("SECKILL_DUCKDB_PYTHON").map(PathBuf::from).unwrap_or_else(|| {
        let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_default();
        home.join(".local/share/seckill/duckdb/bin/python")
    });
    assert!(path.exists(), "{} is missing: run scripts/setup --tests (it installs DuckDB)", path.display());
    path
}

/// The rows DuckDB answers `sql` with, as JSON.
fn duckdb(sql: &str) -> Vec<Vec<Value>> {
    let script = "import json, sys, duckdb\n\
                  rows = duckdb.sql(sys.argv[1]).fetchall()\n\
                  print(json.dumps([[v if isinstance(v, (int, float, str, type(None))) else str(v) for v in r] for r in rows]))";
    let output = Command::new(duckdb_python()).args(["-c", script, sql]).output().expect("python runs");
    assert!(output.status.success(), "{sql}: {}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).expect("json rows")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_export_of_the_topics_types_every_row_and_names_the_records_it_cannot_read() {
    let platform = Platform::start().await;
    let voucher = platform.create_voucher(2, 1).await;
    let mut created = Vec::new();
    for user in ["ann", "ben"] {
        let (status, body) = platform.order(&voucher, user).await;
        assert_eq!(status, StatusCode::ACCEPTED, "{body}");
        let order = platform.wait_final(body["order_id"].as_str().expect("order_id")).await;
        assert_eq!(order["status"], "CREATED", "{order}");
        created.push(order["order_id"].as_str().expect("id").to_owned());
    }
    let (status, body) = platform.post(&format!("/api/v1/orders/{}/cancel", created[0]), Some("ann"), None).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    platform.wait_order(&created[0], |row| row["status"] == "CANCELLED").await;
    let topics = platform.kafka.topics();
    let producer = platform.producer();
    let key = voucher.as_bytes();
    producer.send_raw(&topics.sales, Some(key), b"{not json", OwnedHeaders::new()).await.expect("produced");
    let newer = serde_json::json!({
        "schema": 99, "event_id": uuid::Uuid::now_v7(), "emitted_at": chrono::Utc::now(),
        "type": "OrderAccepted", "voucher_id": voucher, "what": "a field of the future",
    });
    producer
        .send_raw(&topics.sales, Some(key), newer.to_string().as_bytes(), OwnedHeaders::new())
        .await
        .expect("produced");

    // Where Kafka holds each OrderCreated: the rows must say the same.
    let orders_topic = topics.orders.clone();
    let read = platform
        .read_topic(&orders_topic, |read| {
            read.iter().filter(|m| m.payload().is_some_and(|p| p.windows(14).any(|w| w == b"\"OrderCreated\""))).count()
                >= 2
        })
        .await;
    let mut placed: BTreeMap<String, (i32, i64)> = BTreeMap::new();
    for message in &read {
        let Some(envelope) = message.payload().and_then(|p| seckill_core::Envelope::decode(p).ok()) else { continue };
        if let seckill_core::Event::OrderCreated(c) = &envelope.event {
            placed.insert(c.order.order_id.to_string(), (message.partition(), message.offset()));
        }
    }

    let dir = tempfile::tempdir().expect("a directory");
    let out = dir.path().join("sale");
    let kafka = platform.kafka.clone();
    let target = out.clone();
    let summary = tokio::task::spawn_blocking(move || {
        export_topics(&kafka, &ExportOptions::default(), &target, &AtomicBool::new(false))
    })
    .await
    .expect("the export thread")
    .expect("the export ends");

    assert_eq!(summary.rows.get("VoucherCreated"), Some(&1), "{summary:?}");
    assert_eq!(summary.rows.get("OrderAccepted"), Some(&2), "{summary:?}");
    assert_eq!(summary.rows.get("OrderCreated"), Some(&2), "{summary:?}");
    assert_eq!(summary.rows.get("CancelRequested"), Some(&1), "{summary:?}");
    assert_eq!(summary.rows.get("OrderCancelled"), Some(&1), "{summary:?}");
    assert_eq!((summary.malformed, summary.newer), (1, 1), "the bad records counted: {summary:?}");
    assert_eq!(summary.named.len(), 2, "and named: {summary:?}");
    assert!(summary.named.iter().all(|skipped| skipped.at.contains(&topics.sales)), "{:?}", summary.named);

    let file = |kind: &str| out.join(format!("{kind}.parquet")).display().to_string();
    let rows = duckdb(&format!(
        "SELECT order_id, log_topic, log_partition, log_offset, typeof(decided_at), typeof(remaining), \
         typeof(log_time) FROM '{}' ORDER BY log_offset",
        file("OrderCreated")
    ));
    assert_eq!(rows.len(), 2, "{rows:?}");
    for row in &rows {
        let order = row[0].as_str().expect("an id as text");
        let (partition, offset) = placed[order];
        assert_eq!(row[1], orders_topic.as_str(), "{row:?}");
        assert_eq!((row[2].as_i64(), row[3].as_i64()), (Some(i64::from(partition)), Some(offset)), "{row:?}");
        assert!(row[4].as_str().is_some_and(|t| t.starts_with("TIMESTAMP")), "a time is a timestamp: {row:?}");
        assert_eq!(row[5], "BIGINT", "an amount is an integer: {row:?}");
        assert!(row[6].as_str().is_some_and(|t| t.starts_with("TIMESTAMP")), "{row:?}");
    }
    let cancelled = duckdb(&format!("SELECT order_id, user_id, reason FROM '{}'", file("OrderCancelled")));
    assert_eq!(cancelled, [[Value::from(created[0].as_str()), Value::from("ann"), Value::from("requested")]]);
}
