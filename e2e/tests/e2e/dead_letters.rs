//! Poison records are parked with their reason; the partition keeps moving.
//! Besides hand-made ones, a seeded fuzzer mutates valid events (dropped and
//! retyped fields, truncation, flipped bytes, random bytes) and every record
//! the decoder refuses must reach the dead-letter topic from each service
//! that reads it, byte for byte, while real orders behind them complete.

use std::collections::HashMap;

use reqwest::StatusCode;
use seckill_core::Envelope;
use seckill_kafka::{Headers, Message, OwnedHeaders};
use serde_json::Value;

use crate::helpers::Platform;

#[tokio::test]
async fn malformed_events_are_dead_lettered_and_the_partition_moves_on() {
    let platform = Platform::start().await;
    let voucher = platform.create_voucher(3, 1).await;
    let topics = platform.kafka.topics();
    let producer = platform.producer();
    // Same key as the voucher's real events: same partition.
    let key = voucher.as_bytes();
    producer.send_raw(&topics.sales, Some(key), b"{not json", OwnedHeaders::new()).await.expect("garbage produced");
    let zero_quantity = serde_json::json!({
        "schema": 1, "event_id": uuid::Uuid::now_v7(), "emitted_at": chrono::Utc::now(),
        "type": "OrderAccepted", "order_id": uuid::Uuid::now_v7(), "voucher_id": voucher,
        "user_id": "mallory", "quantity": 0, "accepted_at": chrono::Utc::now(),
    });
    producer
        .send_raw(&topics.sales, Some(key), zero_quantity.to_string().as_bytes(), OwnedHeaders::new())
        .await
        .expect("invalid event produced");

    // A real order behind the poison records still completes.
    let (status, body) = platform.order(&voucher, "honest").await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let order = platform.wait_final(body["order_id"].as_str().expect("order_id")).await;
    assert_eq!(order["status"], "CREATED");
    assert_eq!(platform.persistent_remaining(&voucher).await, 2, "the poison changed no stock");

    // Both consumers of the sales topic park both records.
    let read = platform.read_topic(&topics.dead_letters, |read| read.len() >= 4).await;
    let parked: Vec<HashMap<String, String>> = read
        .iter()
        .map(|message| {
            let mut fields: HashMap<String, String> = message
                .headers()
                .map(|headers| {
                    headers
                        .iter()
                        .map(|h| (h.key.to_owned(), String::from_utf8_lossy(h.value.unwrap_or_default()).into_owned()))
                        .collect()
                })
                .unwrap_or_default();
            fields
                .insert("payload".into(), String::from_utf8_lossy(message.payload().unwrap_or_default()).into_owned());
            fields
        })
        .collect();

    let from_processor: Vec<_> = parked.iter().filter(|p| p["dlq.service"] == "processor").collect();
    assert_eq!(from_processor.len(), 2, "{parked:?}");
    assert_eq!(parked.iter().filter(|p| p["dlq.service"] == "projector").count(), 2, "{parked:?}");
    for record in &parked {
        assert_eq!(record["dlq.source.topic"], topics.sales);
        assert!(record["dlq.source.offset"].parse::<i64>().is_ok(), "{record:?}");
    }
    let garbage =
        from_processor.iter().find(|p| p["payload"] == "{not json").expect("the garbage is kept byte for byte");
    assert!(garbage["dlq.reason"].contains("not a valid event"), "{garbage:?}");
    let invalid =
        from_processor.iter().find(|p| p["payload"].contains("mallory")).expect("the invalid event is parked");
    assert!(invalid["dlq.reason"].contains("quantity"), "{invalid:?}");
}

/// A small deterministic generator (xorshift), so the fuzzed records are
/// the same on every run and a failure can be replayed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// A valid record of `kind` for `voucher`, as JSON.
fn valid_record(kind: &str, voucher: &str) -> Value {
    let now = chrono::Utc::now();
    let mut record = serde_json::json!({
        "schema": 1, "event_id": uuid::Uuid::now_v7(), "emitted_at": now, "type": kind,
        "order_id": uuid::Uuid::now_v7(), "voucher_id": voucher, "user_id": "fuzzed",
        "quantity": 1, "accepted_at": now,
    });
    if kind == "OrderCreated" {
        record["decided_at"] = serde_json::json!(now);
        record["remaining"] = serde_json::json!(1);
    }
    record
}

/// Mutates a valid record into one that decodes to an error, or gives up.
fn poisoned(rng: &mut Rng, record: &Value) -> Option<Vec<u8>> {
    let hostile = [
        Value::Null,
        serde_json::json!(-1),
        serde_json::json!(1.5),
        serde_json::json!(u64::MAX),
        serde_json::json!(""),
        serde_json::json!("x".repeat(300)),
        serde_json::json!([1, 2]),
        serde_json::json!({"nested": true}),
        serde_json::json!("0192-not-a-uuid"),
        serde_json::json!("2026-13-45T99:99:99Z"),
    ];
    let mut bytes = match rng.below(6) {
        0 => {
            let mut object = record.as_object().expect("object").clone();
            let key = object.keys().nth(rng.below(object.len())).expect("a key").clone();
            object.remove(&key);
            serde_json::to_vec(&object).expect("json")
        }
        1 | 2 => {
            let mut object = record.as_object().expect("object").clone();
            let key = object.keys().nth(rng.below(object.len())).expect("a key").clone();
            object.insert(key, hostile[rng.below(hostile.len())].clone());
            serde_json::to_vec(&object).expect("json")
        }
        3 => {
            let mut bytes = serde_json::to_vec(record).expect("json");
            bytes.truncate(rng.below(bytes.len()));
            bytes
        }
        4 => {
            let mut bytes = serde_json::to_vec(record).expect("json");
            for _ in 0..1 + rng.below(4) {
                let at = rng.below(bytes.len());
                bytes[at] = (rng.next() & 0xff) as u8;
            }
            bytes
        }
        _ => (0..rng.below(200)).map(|_| (rng.next() & 0xff) as u8).collect(),
    };
    if Envelope::decode(&bytes).is_ok() {
        return None;
    }
    // Kafka keeps bytes as they are: an empty payload is a valid poison too.
    bytes.shrink_to_fit();
    Some(bytes)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fuzzed_records_on_both_topics_are_all_dead_lettered_and_orders_keep_flowing() {
    const PER_TOPIC: usize = 60;
    let platform = Platform::start().await;
    let voucher = platform.create_voucher(5, 1).await;
    let topics = platform.kafka.topics();
    let producer = platform.producer();
    let mut rng = Rng(0x5eed_cafe_f00d_d00d);
    let mut poison: HashMap<&str, Vec<Vec<u8>>> = HashMap::new();
    for (topic, kind) in [(topics.sales.as_str(), "OrderAccepted"), (topics.orders.as_str(), "OrderCreated")] {
        let records = poison.entry(topic).or_default();
        while records.len() < PER_TOPIC {
            if let Some(bytes) = poisoned(&mut rng, &valid_record(kind, &voucher)) {
                records.push(bytes);
            }
        }
    }

    // Poison, a real order, more poison, another real order: on the
    // voucher's own partitions, so each real order sits behind poison.
    let mut orders = Vec::new();
    for half in 0..2 {
        for (topic, records) in &poison {
            for bytes in &records[half * PER_TOPIC / 2..(half + 1) * PER_TOPIC / 2] {
                producer.send_raw(topic, Some(voucher.as_bytes()), bytes, OwnedHeaders::new()).await.expect("produced");
            }
        }
        let (status, body) = platform.order(&voucher, &format!("honest-{half}")).await;
        assert_eq!(status, StatusCode::ACCEPTED, "{body}");
        orders.push(body["order_id"].as_str().expect("order_id").to_owned());
    }
    for order in &orders {
        assert_eq!(platform.wait_final(order).await["status"], "CREATED", "orders behind poison are decided");
    }
    assert_eq!(platform.persistent_remaining(&voucher).await, 3, "the poison changed no stock");

    // The processor reads sales; the projector reads sales and orders: every
    // record is parked by each service that reads its topic, byte for byte.
    let expected = PER_TOPIC * 2 + PER_TOPIC;
    let parked = platform.read_topic(&topics.dead_letters, |read| read.len() >= expected).await;
    assert_eq!(parked.len(), expected);
    let header = |message: &seckill_kafka::OwnedMessage, key: &str| {
        message.headers().and_then(|headers| {
            headers.iter().find(|h| h.key == key).and_then(|h| h.value).map(|v| String::from_utf8_lossy(v).into_owned())
        })
    };
    for (service, topic, count) in [
        ("processor", &topics.sales, PER_TOPIC),
        ("projector", &topics.sales, PER_TOPIC),
        ("projector", &topics.orders, PER_TOPIC),
    ] {
        let mut payloads: Vec<Vec<u8>> = parked
            .iter()
            .filter(|m| header(m, "dlq.service").as_deref() == Some(service))
            .filter(|m| header(m, "dlq.source.topic").as_deref() == Some(topic.as_str()))
            .map(|m| m.payload().unwrap_or_default().to_vec())
            .collect();
        assert_eq!(payloads.len(), count, "{service} parks every record of {topic}");
        let mut sent = poison[topic.as_str()].clone();
        payloads.sort();
        sent.sort();
        assert_eq!(payloads, sent, "{service} keeps {topic}'s records byte for byte");
    }
}
