//! The order path from request to final status.

use chrono::Utc;
use reqwest::StatusCode;
use seckill_core::event::{Event, OrderAccepted};
use seckill_core::{Envelope, OrderId, UserId};
use seckill_kafka::{Message, OwnedMessage};

use crate::helpers::{eventually, Platform};

#[tokio::test]
async fn an_order_becomes_created_and_is_queryable() {
    let platform = Platform::start().await;
    let voucher = platform.create_voucher(2, 1).await;

    let (status, body) = platform.order(&voucher, "alice").await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    assert_eq!(body["status"], "PENDING");
    let order_id = body["order_id"].as_str().expect("order_id").to_owned();

    let order = platform.wait_final(&order_id).await;
    assert_eq!(order["status"], "CREATED", "{order}");
    assert_eq!(order["voucher_id"], voucher.as_str());
    assert_eq!(order["user_id"], "alice");
    assert!(order["accepted_at"].is_string() && order["decided_at"].is_string(), "{order}");

    // The decision reaches the ingress's follower before the projector's
    // view, which the user's list is read from: it shows the order soon.
    let url = format!("{}/api/v1/users/alice/orders", platform.base);
    let listed = eventually(|| async {
        let listed = platform.get(&url).await.1;
        (listed["orders"][0]["status"] == "CREATED").then_some(listed)
    })
    .await;
    assert_eq!(listed["orders"][0]["order_id"], order_id.as_str(), "{listed}");

    let shown = platform.wait_voucher(&voucher, |v| v["created"] == 1).await;
    assert_eq!((shown["stock"].as_u64(), shown["remaining"].as_u64()), (Some(2), Some(1)), "{shown}");
    assert_eq!(platform.persistent_remaining(&voucher).await, 1);
    assert_eq!(platform.redis_remaining(&voucher).await, 1);

    let unknown = platform.get(&format!("{}/api/v1/orders/{}", platform.base, OrderId::generate())).await;
    assert_eq!(unknown.0, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn rejections_use_the_documented_codes() {
    let platform = Platform::start().await;
    let voucher = platform.create_voucher(1, 1).await;

    let (first, admitted) = platform.order(&voucher, "u1").await;
    assert_eq!(first, StatusCode::ACCEPTED, "{admitted}");
    let (status, sold_out) = platform.order(&voucher, "u2").await;
    assert_eq!((status, sold_out["error"].as_str()), (StatusCode::CONFLICT, Some("sold_out")), "{sold_out}");
    let (status, duplicate) = platform.order(&voucher, "u1").await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(duplicate["error"], "duplicate_order");
    assert_eq!(duplicate["order_id"], admitted["order_id"], "the retrying user learns their order id");

    let unknown = platform.order(&OrderId::generate().to_string(), "u1").await;
    assert_eq!((unknown.0, unknown.1["error"].as_str()), (StatusCode::NOT_FOUND, Some("unknown_voucher")));
    let bad = platform.order("not-a-uuid", "u1").await;
    assert_eq!((bad.0, bad.1["error"].as_str()), (StatusCode::BAD_REQUEST, Some("invalid_request")));
    let anonymous = platform.http.post(format!("{}/api/v1/vouchers/{voucher}/orders", platform.base)).send().await;
    assert_eq!(anonymous.expect("answers").status(), StatusCode::UNAUTHORIZED);
    let as_admin = platform.post(&format!("/api/v1/vouchers/{voucher}/orders"), None, None).await;
    assert_eq!(
        (as_admin.0, as_admin.1["error"].as_str()),
        (StatusCode::FORBIDDEN, Some("forbidden")),
        "{}",
        as_admin.1
    );
    // Only owners confirm: the admin is refused before any order is looked up.
    for order in [admitted["order_id"].as_str().expect("id").to_owned(), OrderId::generate().to_string()] {
        let (status, body) = platform.post(&format!("/api/v1/orders/{order}/confirm"), None, None).await;
        assert_eq!((status, body["error"].as_str()), (StatusCode::FORBIDDEN, Some("forbidden")), "{body}");
    }

    let later = Utc::now() + chrono::Duration::hours(1);
    let future = platform.create_voucher_between(5, 1, later, later + chrono::Duration::hours(1)).await;
    let (status, body) = platform.order(&future, "u1").await;
    assert_eq!((status, body["error"].as_str()), (StatusCode::CONFLICT, Some("not_started")));

    let bad_voucher = platform
        .post(
            "/api/v1/vouchers",
            None,
            Some(serde_json::json!({"stock": 1, "begins_at": later, "ends_at": later, "per_user_limit": 1})),
        )
        .await;
    assert_eq!(bad_voucher.0, StatusCode::BAD_REQUEST, "{}", bad_voucher.1);
    let unknown_field = platform
        .post(
            "/api/v1/vouchers",
            None,
            Some(serde_json::json!({"stock": 1, "begins_at": later, "ends_at": later, "colour": "red"})),
        )
        .await;
    assert_eq!(unknown_field.1["error"], "invalid_request", "{}", unknown_field.1);

    // Nothing a rejected request did moved the stock.
    assert_eq!(platform.redis_remaining(&voucher).await, 0);
    assert_eq!(platform.redis_remaining(&future).await, 5);
    let order = platform.wait_final(admitted["order_id"].as_str().expect("order_id")).await;
    assert_eq!(order["status"], "CREATED");
}

#[tokio::test]
async fn an_order_delivered_twice_is_decided_once() {
    let platform = Platform::start().await;
    let voucher = platform.create_voucher(5, 1).await;
    let accepted = OrderAccepted {
        order_id: OrderId::generate(),
        voucher_id: voucher.parse().expect("uuid"),
        user_id: UserId::parse("twice").expect("valid"),
        quantity: 1,
        accepted_at: Utc::now(),
        amount: 0,
        currency: None,
        idempotency_key: None,
    };
    let producer = platform.producer();
    let envelope = Envelope::new(Event::OrderAccepted(accepted.clone()));
    let topics = platform.kafka.topics();
    producer.send(&topics.sales, &envelope).await.expect("first delivery");
    producer.send(&topics.sales, &envelope).await.expect("second delivery");

    let order = platform.wait_final(&accepted.order_id.to_string()).await;
    assert_eq!(order["status"], "CREATED");

    // Every outcome on the topic is the one decision, byte for byte: once
    // when both deliveries were in one batch, twice when the second came in
    // a later batch (its outcome re-emitted, never decided again).
    let ours = |messages: &[OwnedMessage]| -> Vec<Envelope> {
        messages
            .iter()
            .map(|m| Envelope::decode(m.payload().expect("payload")).expect("valid outcome"))
            .filter(|e| e.event.voucher_id() == accepted.voucher_id)
            .collect()
    };
    let read = platform.read_topic(&topics.orders, |read| !ours(read).is_empty()).await;
    let outcomes_seen = ours(&read);
    assert!(outcomes_seen.iter().all(|outcome| *outcome == outcomes_seen[0]), "{outcomes_seen:?}");
    assert!(matches!(outcomes_seen[0].event, Event::OrderCreated(_)));

    let shown = platform.wait_voucher(&voucher, |v| v["created"] == 1).await;
    assert_eq!(shown["remaining"], 4, "{shown}");
    assert_eq!(platform.persistent_remaining(&voucher).await, 4, "one decrement only");
}

#[tokio::test]
async fn every_service_reports_health_and_metrics() {
    let platform = Platform::start().await;
    let voucher = platform.create_voucher(1, 1).await;
    let (_, body) = platform.order(&voucher, "m1").await;
    platform.wait_final(body["order_id"].as_str().expect("order_id")).await;

    for base in [
        platform.base.clone(),
        format!("http://{}", platform.processor_addr),
        format!("http://{}", platform.projector_addr),
    ] {
        let (status, health) = platform.get(&format!("{base}/healthz")).await;
        assert_eq!((status, health["status"].as_str()), (StatusCode::OK, Some("ok")), "{base}");
    }
    let text = |url: String| {
        let http = platform.http.clone();
        async move { http.get(url).send().await.expect("metrics").text().await.expect("text") }
    };
    let ingress = text(format!("{}/metrics", platform.base)).await;
    assert!(ingress.contains(r#"seckill_admissions_total{outcome="admitted",service="ingress"} 1"#), "{ingress}");
    assert!(ingress.contains("seckill_http_requests_total"), "{ingress}");
    let processor = text(format!("http://{}/metrics", platform.processor_addr)).await;
    assert!(
        processor.contains(r#"seckill_events_total{result="applied",service="processor",type="OrderAccepted"} 1"#),
        "{processor}"
    );
    // The ingress and the processor measure their clocks against Redis's
    // at every Redis probe (every 2 s): on one machine, within a second.
    for base in [platform.base.clone(), format!("http://{}", platform.processor_addr)] {
        let offset = eventually(|| async {
            let metrics = text(format!("{base}/metrics")).await;
            let line = metrics.lines().find(|line| line.starts_with("seckill_clock_offset_seconds"))?.to_owned();
            line.rsplit(' ').next()?.parse::<f64>().ok().filter(|offset| *offset != 0.0)
        })
        .await;
        assert!(offset.abs() < 1.0, "{base}: the clock is {offset} s off Redis's");
    }
    // The ingress learns outcomes from the log itself, so the order can be
    // final there a moment before the projector has applied it.
    eventually(|| async {
        let projector = text(format!("http://{}/metrics", platform.projector_addr)).await;
        projector.contains(r#"service="projector",type="OrderCreated"} 1"#).then_some(())
    })
    .await;
}
