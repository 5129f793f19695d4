//! Events reach the receiver signed, and each switch does what it says.

use std::time::Duration;

use seckill_payments::signature::{verify, DEFAULT_TOLERANCE_SECONDS};
use seckill_payments::IntentStatus;

use crate::helpers::{Receiver, TestSandbox};

#[tokio::test]
async fn a_payment_is_announced_signed_and_dated_as_its_charge() {
    let receiver = Receiver::start(0).await;
    let sandbox = TestSandbox::start(Some(receiver.url.clone()), |_| {}).await;
    let intent = sandbox.create("hook-1").await;
    let paid: seckill_payments::PaymentIntent = sandbox.settle(&intent.id, "pay").await.json().await.expect("intent");
    assert_eq!(paid.status, IntentStatus::Succeeded);

    let received = receiver.wait_for(1).await;
    let header = received[0].signature.as_deref().expect("signed");
    let secrets = vec!["whsec_other".to_owned(), sandbox.config.webhook_secret.clone()];
    let now = chrono::Utc::now().timestamp();
    verify(header, &received[0].body, &secrets, now, DEFAULT_TOLERANCE_SECONDS).expect("the signature verifies");
    assert!(verify(header, b"{}", &secrets, now, DEFAULT_TOLERANCE_SECONDS).is_err(), "bound to the body");

    let event = received[0].event();
    assert_eq!(event.kind, "payment_intent.succeeded");
    assert_eq!(received[0].json()["api_version"], "2024-06-20");
    let announced = event.payment_intent().expect("an intent");
    assert_eq!(announced.id, intent.id);
    assert_eq!(announced.order_id(), Some("hook-1"));
    // As in Stripe's events nothing is expanded: the charge is an id, and
    // its time is the retrieved intent's.
    assert!(matches!(announced.latest_charge, Some(seckill_payments::ChargeRef::Id(_))));
    let retrieved = sandbox.provider.retrieve(&intent.id).await.expect("retrieved");
    assert_eq!(Some(event.created), retrieved.paid_at());
    assert_eq!(announced.amount_received, 2_500);
    assert_eq!(sandbox.settled_webhooks().await["delivered"], 1);
}

#[tokio::test]
async fn a_decline_and_a_refund_are_announced_too() {
    let receiver = Receiver::start(0).await;
    let sandbox = TestSandbox::start(Some(receiver.url.clone()), |_| {}).await;
    let intent = sandbox.create("hook-2").await;
    let declined: seckill_payments::PaymentIntent =
        sandbox.settle(&intent.id, "decline").await.json().await.expect("intent");
    assert_eq!(declined.status, IntentStatus::RequiresPaymentMethod);
    receiver.wait_for(1).await;
    sandbox.settle(&intent.id, "pay").await;
    receiver.wait_for(2).await;
    sandbox.provider.refund(&intent.id, "refund-hook-2").await.expect("refunded");
    let kinds: Vec<String> = receiver.wait_for(3).await.iter().map(|r| r.event().kind).collect();
    assert_eq!(kinds, ["payment_intent.payment_failed", "payment_intent.succeeded", "charge.refunded"]);
    let refunded = receiver.received()[2].event();
    assert_eq!(refunded.data.object["payment_intent"], intent.id.as_str());
    assert_eq!(refunded.data.object["refunded"], true);
}

#[tokio::test]
async fn the_duplicate_switch_delivers_each_event_twice() {
    let receiver = Receiver::start(0).await;
    let sandbox = TestSandbox::start(Some(receiver.url.clone()), |_| {}).await;
    let settings = sandbox.switch(serde_json::json!({"duplicate_webhooks": true})).await;
    assert_eq!(settings["duplicate_webhooks"], true);
    let intent = sandbox.create("dup-1").await;
    sandbox.settle(&intent.id, "pay").await;
    let received = receiver.wait_for(2).await;
    assert_eq!(received[0].event().id, received[1].event().id);
    assert_eq!(sandbox.settled_webhooks().await["delivered"], 2);
    assert_eq!(receiver.received().len(), 2);
}

#[tokio::test]
async fn the_drop_switch_loses_the_next_events() {
    let receiver = Receiver::start(0).await;
    let sandbox = TestSandbox::start(Some(receiver.url.clone()), |_| {}).await;
    sandbox.switch(serde_json::json!({"drop_webhooks": 2})).await;
    let mut ids = Vec::new();
    for order in ["drop-1", "drop-2", "drop-3"] {
        let intent = sandbox.create(order).await;
        sandbox.settle(&intent.id, "pay").await;
        ids.push(intent.id);
    }
    let counts = sandbox.settled_webhooks().await;
    assert_eq!((counts["dropped"].as_u64(), counts["delivered"].as_u64()), (Some(2), Some(1)));
    let received = receiver.received();
    assert_eq!(received.len(), 1);
    assert_eq!(received[0].event().payment_intent().expect("intent").id, ids[2]);
    let ledger = sandbox.ledger().await;
    let succeeded =
        ledger["payment_intents"].as_array().expect("intents").iter().filter(|i| i["status"] == "succeeded");
    assert_eq!(succeeded.count(), 3, "a lost callback still leaves the payment made");
}

#[tokio::test]
async fn a_failing_receiver_is_retried_until_it_accepts() {
    let receiver = Receiver::start(2).await;
    let sandbox = TestSandbox::start(Some(receiver.url.clone()), |_| {}).await;
    let intent = sandbox.create("retry-1").await;
    sandbox.settle(&intent.id, "pay").await;
    let received = receiver.wait_for(3).await;
    assert_eq!(receiver.failures_left(), 0);
    assert!(received.iter().all(|r| r.event().id == received[0].event().id));
    let counts = sandbox.settled_webhooks().await;
    assert_eq!((counts["delivered"].as_u64(), counts["failed"].as_u64()), (Some(1), Some(0)));
}

#[tokio::test]
async fn a_receiver_failing_every_attempt_is_given_up() {
    let receiver = Receiver::start(u32::MAX).await;
    let sandbox = TestSandbox::start(Some(receiver.url.clone()), |config| config.webhook_attempts = 3).await;
    let intent = sandbox.create("retry-2").await;
    sandbox.settle(&intent.id, "pay").await;
    let counts = sandbox.settled_webhooks().await;
    assert_eq!((counts["delivered"].as_u64(), counts["failed"].as_u64()), (Some(0), Some(1)));
    assert_eq!(receiver.received().len(), 3);
}

#[tokio::test]
async fn the_reorder_switch_delivers_a_batch_newest_first() {
    let receiver = Receiver::start(0).await;
    let sandbox = TestSandbox::start(Some(receiver.url.clone()), |_| {}).await;
    sandbox.switch(serde_json::json!({"reorder_webhooks": true})).await;
    let intent = sandbox.create("reorder-1").await;
    sandbox.settle(&intent.id, "decline").await;
    sandbox.settle(&intent.id, "pay").await;
    let kinds: Vec<String> = receiver.wait_for(2).await.iter().map(|r| r.event().kind).collect();
    assert_eq!(kinds, ["payment_intent.succeeded", "payment_intent.payment_failed"]);
}

#[tokio::test]
async fn the_delay_switch_holds_each_delivery() {
    let receiver = Receiver::start(0).await;
    let sandbox = TestSandbox::start(Some(receiver.url.clone()), |_| {}).await;
    sandbox.switch(serde_json::json!({"webhook_delay_ms": 300})).await;
    let intent = sandbox.create("delay-1").await;
    let paid_at = tokio::time::Instant::now();
    sandbox.settle(&intent.id, "pay").await;
    let received = receiver.wait_for(1).await;
    assert!(received[0].at - paid_at >= Duration::from_millis(300), "{:?}", received[0].at - paid_at);
}

#[tokio::test]
async fn without_a_webhook_url_events_are_counted_as_dropped() {
    let sandbox = TestSandbox::start(None, |_| {}).await;
    let intent = sandbox.create("nowhere-1").await;
    sandbox.settle(&intent.id, "pay").await;
    let counts = sandbox.settled_webhooks().await;
    assert_eq!((counts["dropped"].as_u64(), counts["queued"].as_u64()), (Some(1), Some(0)));
}

#[tokio::test]
async fn the_endpoint_receives_only_the_event_types_it_is_subscribed_to() {
    let receiver = Receiver::start(0).await;
    let sandbox = TestSandbox::start(Some(receiver.url.clone()), |config| {
        config.enabled_events = vec!["checkout.session.completed".to_owned()];
    })
    .await;
    let session = sandbox.checkout("enabled-1", 3_600).await;
    sandbox.settle_session(&session.id, "pay").await;
    let counts = sandbox.settled_webhooks().await;
    assert_eq!(receiver.kinds(), ["checkout.session.completed"]);
    assert_eq!((counts["filtered"].as_u64(), counts["delivered"].as_u64()), (Some(1), Some(1)), "the intent's event");

    let settings = sandbox.switch(serde_json::json!({"enabled_events": ["*"]})).await;
    assert_eq!(settings["enabled_events"], serde_json::json!(["*"]));
    let url = format!("{}/sandbox/settings", sandbox.base_url);
    let refused = sandbox.http.post(url).json(&serde_json::json!({"enabled_events": []})).send().await;
    assert_eq!(refused.expect("answers").status(), reqwest::StatusCode::BAD_REQUEST);
}
