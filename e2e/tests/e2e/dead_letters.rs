//! Poison records are parked with their reason; the partition keeps moving.

use std::collections::HashMap;

use reqwest::StatusCode;
use seckill_kafka::{Headers, Message, OwnedHeaders};

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
