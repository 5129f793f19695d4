//! An `Idempotency-Key` retry that Redis admitted a second time (a failover
//! lost the first admission, so the retry found no record of it) makes no
//! second order: the processor fails it as a duplicate of the first.

use reqwest::StatusCode;
use seckill_core::event::{Event, OrderAccepted};
use seckill_core::topics::Topics;
use seckill_core::{Envelope, UserId};
use seckill_kafka::Message;

use crate::helpers::Platform;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_admitted_twice_makes_one_order() {
    let platform = Platform::start().await;
    let topics = Topics::with_prefix(&platform.infra.namespace);
    let voucher = platform.create_voucher(5, 2).await;
    let response = platform
        .http
        .post(format!("{}/api/v1/vouchers/{voucher}/orders", platform.base))
        .header("authorization", Platform::as_user("carol"))
        .header("idempotency-key", "cart-7")
        .send()
        .await
        .expect("ingress answers");
    assert_eq!(response.status(), StatusCode::ACCEPTED);
    let body: serde_json::Value = response.json().await.expect("json");
    let first = body["order_id"].as_str().expect("order id").to_owned();
    assert_eq!(platform.wait_final(&first).await["status"], "CREATED");

    // The acceptance in the log carries the key.
    let sales = platform
        .read_topic(&topics.sales, |read| {
            read.iter()
                .filter_map(|m| Envelope::decode(m.payload()?).ok())
                .any(|e| matches!(&e.event, Event::OrderAccepted(o) if o.order_id.to_string() == first))
        })
        .await;
    let accepted = sales
        .iter()
        .filter_map(|m| Envelope::decode(m.payload()?).ok())
        .find_map(|e| match e.event {
            Event::OrderAccepted(order) if order.order_id.to_string() == first => Some(order),
            _ => None,
        })
        .expect("the first acceptance");
    assert_eq!(accepted.idempotency_key.as_deref(), Some("cart-7"));

    // The retry, admitted again by a Redis that lost the first admission:
    // a second acceptance under the same key, with an order id of its own.
    let retry = OrderAccepted {
        idempotency_key: Some("cart-7".into()),
        ..OrderAccepted::now(accepted.voucher_id, UserId::parse("carol").expect("valid"), 1)
    };
    platform.producer().send(&topics.sales, &Envelope::new(Event::OrderAccepted(retry.clone()))).await.expect("sent");
    let second = platform.wait_final(&retry.order_id.to_string()).await;
    assert_eq!((second["status"].as_str(), second["reason"].as_str()), (Some("FAILED"), Some("duplicate_request")));
    assert_eq!(platform.wait_final(&first).await["status"], "CREATED", "the first order stands");
    assert_eq!(platform.persistent_remaining(&voucher).await, 4, "one unit sold, not two");
    // Another key is another request.
    let other = OrderAccepted {
        idempotency_key: Some("cart-8".into()),
        ..OrderAccepted::now(accepted.voucher_id, UserId::parse("carol").expect("valid"), 1)
    };
    platform.producer().send(&topics.sales, &Envelope::new(Event::OrderAccepted(other.clone()))).await.expect("sent");
    assert_eq!(platform.wait_final(&other.order_id.to_string()).await["status"], "CREATED");
    assert_eq!(platform.persistent_remaining(&voucher).await, 3);
}
