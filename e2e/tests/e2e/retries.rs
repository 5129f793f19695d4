//! Retries: Idempotency-Key replays, and the sold-out fast path noticing
//! returned stock.

use std::collections::HashSet;

use futures::future::join_all;
use reqwest::StatusCode;
use serde_json::Value;

use seckill_core::event::{Event, OrderAccepted};
use seckill_core::{Envelope, UserId};
use seckill_kafka::{Message, OwnedMessage};

use crate::helpers::{eventually, Platform};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_retries_with_one_idempotency_key_make_one_order() {
    let platform = Platform::start().await;
    let voucher = platform.create_voucher(5, 1).await;
    let url = format!("{}/api/v1/vouchers/{voucher}/orders", platform.base);
    let attempts = (0..100).map(|_| {
        let request = platform
            .http
            .post(&url)
            .header("authorization", Platform::as_user("impatient"))
            .header("idempotency-key", "cart-42");
        async move {
            let response = request.send().await.expect("ingress answers");
            let status = response.status();
            (status, response.json::<serde_json::Value>().await.expect("json"))
        }
    });
    let answers = join_all(attempts).await;
    assert!(answers.iter().all(|(status, _)| *status == StatusCode::ACCEPTED), "{answers:?}");
    let orders: HashSet<_> =
        answers.iter().map(|(_, body)| body["order_id"].as_str().expect("id").to_owned()).collect();
    assert_eq!(orders.len(), 1, "every retry answered with the same order");
    let order_id = orders.into_iter().next().expect("one order");

    // Without a key, the same user learns about the order it already has.
    let (status, duplicate) = platform.order(&voucher, "impatient").await;
    assert_eq!((status, duplicate["error"].as_str()), (StatusCode::CONFLICT, Some("duplicate_order")));
    assert_eq!(duplicate["order_id"], order_id.as_str());

    assert_eq!(platform.wait_final(&order_id).await["status"], "CREATED");
    let shown = platform.wait_voucher(&voucher, |v| v["created"] == 1).await;
    assert_eq!(shown["admitted"], 1, "one order reached the log: {shown}");
    assert_eq!(platform.redis_remaining(&voucher).await, 4);

    let bad_key = platform
        .http
        .post(&url)
        .header("authorization", Platform::as_user("impatient"))
        .header("idempotency-key", "has spaces")
        .send()
        .await
        .expect("answers");
    assert_eq!(bad_key.status(), StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn the_sold_out_fast_path_notices_returned_stock_and_redis_stays_the_gate() {
    let platform = Platform::start().await;
    let voucher = platform.create_voucher(1, 1).await;
    let (status, first) = platform.order(&voucher, "first").await;
    assert_eq!(status, StatusCode::ACCEPTED, "{first}");
    let (status, refused) = platform.order(&voucher, "second").await;
    assert_eq!((status, refused["error"].as_str()), (StatusCode::CONFLICT, Some("sold_out")));

    // A unit reappears in Redis only (as after a Redis-side compensation the
    // persistent stock does not know of): the ingress notices within the
    // memo's lifetime, and the processor, the second gate, refuses the sale.
    platform.add_redis_units(&voucher, 1).await;
    let late = eventually(|| async {
        let (status, body) = platform.order(&voucher, &format!("late-{}", uuid::Uuid::now_v7().simple())).await;
        (status == StatusCode::ACCEPTED).then_some(body)
    })
    .await;
    let order = platform.wait_final(late["order_id"].as_str().expect("order_id")).await;
    assert_eq!((order["status"].as_str(), order["reason"].as_str()), (Some("FAILED"), Some("sold_out")), "{order}");
    assert_eq!(platform.persistent_remaining(&voucher).await, 0, "never oversold");
    assert_eq!(platform.wait_final(first["order_id"].as_str().expect("id")).await["status"], "CREATED");

    // The failed order's unit goes back to the gate, once, even when the
    // order is delivered to the processor again.
    eventually(|| async { (platform.redis_remaining(&voucher).await == 1).then_some(()) }).await;
    let accepted = OrderAccepted {
        order_id: order["order_id"].as_str().expect("id").parse().expect("uuid"),
        voucher_id: voucher.parse().expect("uuid"),
        user_id: UserId::parse(order["user_id"].as_str().expect("user")).expect("valid"),
        quantity: 1,
        accepted_at: serde_json::from_value(order["accepted_at"].clone()).expect("time"),
        amount: 0,
        currency: None,
        idempotency_key: None,
    };
    let producer = platform.producer();
    let topics = platform.kafka.topics();
    producer.send(&topics.sales, &Envelope::new(Event::OrderAccepted(accepted.clone()))).await.expect("redelivered");
    let outcomes = |read: &[OwnedMessage]| {
        read.iter()
            .filter_map(|m| Envelope::decode(m.payload()?).ok())
            .filter(|e| matches!(&e.event, Event::OrderFailed(f) if f.order.order_id == accepted.order_id))
            .count()
    };
    platform.read_topic(&topics.orders, |read| outcomes(read) >= 2).await;
    assert_eq!(platform.redis_remaining(&voucher).await, 1, "compensated exactly once");
    let metrics = platform
        .http
        .get(format!("http://{}/metrics", platform.processor_addr))
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
    assert!(metrics.contains(r#"seckill_compensations_total{service="processor"} 1"#), "{metrics}");
}

/// `POST …/orders` as `user`, with an `Idempotency-Key` when given.
async fn order_keyed(platform: &Platform, voucher: &str, user: &str, key: Option<&str>) -> (StatusCode, Value) {
    let mut request = platform
        .http
        .post(format!("{}/api/v1/vouchers/{voucher}/orders", platform.base))
        .header("authorization", Platform::as_user(user));
    if let Some(key) = key {
        request = request.header("idempotency-key", key);
    }
    let response = request.send().await.expect("ingress answers");
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

fn code(body: &Value) -> Option<&str> {
    body["error"].as_str()
}

#[tokio::test]
async fn the_sold_out_memo_tells_holders_their_order_and_a_keyed_retry_goes_to_redis() {
    let platform = Platform::start_configured(None, |config| config.sold_out_memo_ms = 1_000).await;
    // Each attempt judges by what it saw, not by a guess about timing: the
    // memo answered while a key-less newcomer is refused although Redis
    // holds a unit (Redis would admit); the last such refusal comes after
    // every request the attempt checks, so the memo was there for all of
    // them. A machine too slow for one memo lifetime tries a new sale.
    for attempt in 0..5 {
        let voucher = platform.create_voucher(1, 1).await;
        let (status, held) = order_keyed(&platform, &voucher, "holder", Some("cart-1")).await;
        assert_eq!(status, StatusCode::ACCEPTED, "{held}");
        let held = held["order_id"].as_str().expect("order_id").to_owned();
        // Redis answers sold out; the ingress snapshots the holders.
        let (status, refused) = order_keyed(&platform, &voucher, "first-refused", None).await;
        assert_eq!((status, code(&refused)), (StatusCode::CONFLICT, Some("sold_out")), "{refused}");

        // Two units come back in Redis alone: Redis would admit now.
        platform.add_redis_units(&voucher, 2).await;
        let memo_refuses = |user: String| {
            let (platform, voucher) = (&platform, voucher.clone());
            async move { order_keyed(platform, &voucher, &user, None).await }
        };
        let (status, first_probe) = memo_refuses(format!("probe-a-{attempt}")).await;
        let holder_again = order_keyed(&platform, &voucher, "holder", None).await;
        let holder_keyed = order_keyed(&platform, &voucher, "holder", Some("cart-1")).await;
        let newcomer_keyed = order_keyed(&platform, &voucher, "keyed-newcomer", Some("cart-9")).await;
        let (last_status, last_probe) = memo_refuses(format!("probe-b-{attempt}")).await;
        let memo_throughout = status == StatusCode::CONFLICT && last_status == StatusCode::CONFLICT;
        if !memo_throughout {
            println!("attempt {attempt}: the memo expired mid-attempt ({first_probe}, {last_probe}); a new sale");
            continue;
        }
        assert_eq!(code(&first_probe), Some("sold_out"), "{first_probe}");
        assert_eq!(code(&last_probe), Some("sold_out"), "{last_probe}");

        // The holder, key-less: the memo's snapshot names its own order.
        let (status, body) = holder_again;
        assert_eq!((status, code(&body)), (StatusCode::CONFLICT, Some("duplicate_order")), "{body}");
        assert_eq!(body["order_id"].as_str(), Some(held.as_str()), "its own order: {body}");
        // The holder with its key: past the memo, Redis replays the order.
        let (status, body) = holder_keyed;
        assert_eq!(status, StatusCode::ACCEPTED, "{body}");
        assert_eq!(body["order_id"].as_str(), Some(held.as_str()), "the same order: {body}");
        // A newcomer with a key: past the memo, Redis admits a returned unit.
        // (The processor will fail it: the units came back in Redis alone,
        // and the persistent stock has none; what it admits is Redis's call.)
        let (status, body) = newcomer_keyed;
        assert_eq!(status, StatusCode::ACCEPTED, "{body}");
        assert!(body["order_id"].as_str().is_some_and(|order| order != held), "an order of its own: {body}");
        return;
    }
    panic!("the memo expired within every attempt");
}
