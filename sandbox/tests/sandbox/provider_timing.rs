//! Stripe's timing that decides money: search that lags behind changes,
//! answers saved under idempotency keys (failures too) for a while, and
//! refunds that stay pending and then succeed or fail.

use std::time::Duration;

use seckill_payments::{IntentStatus, ProviderError};
use tokio::time::Instant;

use crate::helpers::{eventually, Receiver, TestSandbox};

#[tokio::test]
async fn search_finds_a_change_only_after_its_lag() {
    let sandbox = TestSandbox::start(None, |_| {}).await;
    assert_eq!(sandbox.switch(serde_json::json!({})).await["search_lag_ms"], 2_000, "Stripe's few seconds");
    sandbox.switch(serde_json::json!({"search_lag_ms": 1_000})).await;
    let created = Instant::now();
    let intent = sandbox.create("lag-1").await;
    assert!(sandbox.provider.intents_for_order("lag-1").await.expect("searched").is_empty(), "too new");
    let found =
        eventually(|| sandbox.provider.intents_for_order("lag-1"), |found| found.as_ref().is_ok_and(|f| !f.is_empty()))
            .await
            .expect("searched");
    assert!(created.elapsed() >= Duration::from_millis(1_000), "found after {:?}", created.elapsed());
    assert_eq!((found[0].id.as_str(), found[0].status), (intent.id.as_str(), IntentStatus::RequiresPaymentMethod));

    sandbox.settle(&intent.id, "pay").await;
    let stale = sandbox.provider.intents_for_order("lag-1").await.expect("searched");
    assert_eq!(stale[0].status, IntentStatus::RequiresPaymentMethod, "the payment not yet indexed");
    let fresh = sandbox.provider.retrieve(&intent.id).await.expect("retrieved");
    assert_eq!(fresh.status, IntentStatus::Succeeded, "retrieval is never stale");
    eventually(
        || sandbox.provider.intents_for_order("lag-1"),
        |found| found.as_ref().is_ok_and(|found| found[0].status == IntentStatus::Succeeded),
    )
    .await
    .expect("searched");
}

#[tokio::test]
async fn a_failure_saved_under_a_key_is_replayed_after_the_outage_and_a_fresh_key_refunds() {
    let sandbox = TestSandbox::start(None, |_| {}).await;
    let intent = sandbox.create("saved-1").await;
    sandbox.settle(&intent.id, "pay").await;
    sandbox.switch(serde_json::json!({"fail_refunds_for_ms": 1_000})).await;
    let form = [("payment_intent", intent.id.clone())];
    let first = sandbox.post("refunds", &form, Some("refund-saved-1")).await;
    assert_eq!((first.status, first.replayed, first.body["error"]["type"].as_str()), (500, false, Some("api_error")));
    eventually(|| sandbox.switch(serde_json::json!({})), |settings| settings["fail_refunds_for_ms"] == 0).await;

    let retried = sandbox.post("refunds", &form, Some("refund-saved-1")).await;
    assert_eq!((retried.status, retried.replayed), (500, true), "Stripe replays the saved 500");
    assert_eq!(retried.body, first.body);
    let error = sandbox.provider.refund(&intent.id, "refund-saved-1").await.expect_err("still the saved 500");
    assert!(matches!(error, ProviderError::Api { status: 500, .. }), "{error}");
    let refund = sandbox.provider.refund(&intent.id, "refund-saved-2").await.expect("a fresh key refunds");
    assert_eq!(
        (refund.payment_intent.as_deref().unwrap_or_default(), refund.status.as_str()),
        (intent.id.as_str(), "succeeded")
    );

    let ledger = sandbox.ledger().await;
    let refunds = &ledger["refunds_by_payment_intent"][0];
    assert_eq!(refunds["payment_intent"], intent.id.as_str());
    assert_eq!(refunds["attempts"]["idempotency_keys"], serde_json::json!(["refund-saved-1", "refund-saved-2"]));
    assert_eq!(refunds["attempts"]["total"], 4);
    let statuses: Vec<u64> = refunds["attempts"]["calls"]
        .as_array()
        .expect("calls")
        .iter()
        .filter_map(|call| call["status"].as_u64())
        .collect();
    assert_eq!(statuses, [500, 500, 500, 200]);
    assert_eq!(refunds["refunds"], serde_json::json!([{"id": refund.id, "status": "succeeded"}]));
}

#[tokio::test]
async fn a_key_is_forgotten_after_its_lifetime() {
    let sandbox = TestSandbox::start(None, |_| {}).await;
    assert_eq!(sandbox.switch(serde_json::json!({})).await["idempotency_ttl_ms"], 86_400_000);
    sandbox.switch(serde_json::json!({"idempotency_ttl_ms": 1_000})).await;
    let form = [("amount", "100".to_owned()), ("currency", "eur".to_owned())];
    let first = sandbox.post("payment_intents", &form, Some("ttl-1")).await;
    let again = sandbox.post("payment_intents", &form, Some("ttl-1")).await;
    assert_eq!((again.replayed, &again.body["id"]), (true, &first.body["id"]));
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    let later = sandbox.post("payment_intents", &form, Some("ttl-1")).await;
    assert_eq!((later.status, later.replayed), (200, false));
    assert_ne!(later.body["id"], first.body["id"], "a forgotten key makes a new object");
}

#[tokio::test]
async fn a_pending_refund_succeeds_later_and_is_announced() {
    let receiver = Receiver::start(0).await;
    let sandbox = TestSandbox::start(Some(receiver.url.clone()), |_| {}).await;
    let intent = sandbox.create("pending-1").await;
    sandbox.settle(&intent.id, "pay").await;
    sandbox.switch(serde_json::json!({"pending_refunds_ms": 300})).await;
    let refund = sandbox.provider.refund(&intent.id, "refund-pending-1").await.expect("made");
    assert_eq!(refund.status, "pending");
    let charge = receiver.event_of("charge.refunded").await;
    assert_eq!(charge.json()["data"]["object"]["amount_refunded"], 2_500, "a pending refund counts, as at Stripe");
    let updated = receiver.event_of("refund.updated").await.event().refund().expect("a refund");
    assert_eq!((updated.id.as_str(), updated.status.as_str()), (refund.id.as_str(), "succeeded"));
    assert_eq!(sandbox.provider.retrieve_refund(&refund.id).await.expect("read").status, "succeeded");
    let ledger = sandbox.ledger().await;
    let refunds = &ledger["refunds_by_payment_intent"][0];
    assert_eq!(refunds["attempts"]["idempotency_keys"], serde_json::json!(["refund-pending-1"]));
    assert_eq!(refunds["refunds"], serde_json::json!([{"id": refund.id, "status": "succeeded"}]));
}

#[tokio::test]
async fn a_failed_pending_refund_frees_the_charge_for_a_new_refund() {
    let receiver = Receiver::start(0).await;
    let sandbox = TestSandbox::start(Some(receiver.url.clone()), |_| {}).await;
    let intent = sandbox.create("pending-2").await;
    sandbox.settle(&intent.id, "pay").await;
    sandbox.switch(serde_json::json!({"pending_refunds_ms": 1_000, "fail_pending_refunds": true})).await;
    let pending = sandbox.provider.refund(&intent.id, "refund-pending-2a").await.expect("made");
    assert_eq!(pending.status, "pending");
    let covered = sandbox.provider.refund(&intent.id, "refund-pending-2b").await.expect("the pending one");
    assert_eq!(covered.id, pending.id, "a pending refund covers the charge");

    let failed = receiver.event_of("refund.failed").await;
    assert_eq!(failed.event().refund().expect("a refund").status, "failed");
    assert_eq!(failed.json()["data"]["object"]["failure_reason"], "unknown");
    let read = sandbox.provider.retrieve(&intent.id).await.expect("read");
    let Some(seckill_payments::ChargeRef::Expanded(charge)) = read.latest_charge else {
        panic!("the charge is expanded");
    };
    assert_eq!((charge.refunded, charge.amount_refunded), (false, 0), "the amount is back on the charge");

    sandbox.switch(serde_json::json!({"pending_refunds_ms": 0})).await;
    let second = sandbox.provider.refund(&intent.id, "refund-pending-2c").await.expect("refunded again");
    assert_ne!(second.id, pending.id);
    assert_eq!(second.status, "succeeded");
    let listed: Vec<(String, String)> = sandbox
        .provider
        .refunds_of(&intent.id)
        .await
        .expect("listed")
        .into_iter()
        .map(|refund| (refund.id, refund.status))
        .collect();
    assert_eq!(listed, [(second.id, "succeeded".to_owned()), (pending.id, "failed".to_owned())], "newest first");
    let ledger = sandbox.ledger().await;
    let keys = &ledger["refunds_by_payment_intent"][0]["attempts"]["idempotency_keys"];
    assert_eq!(keys, &serde_json::json!(["refund-pending-2a", "refund-pending-2b", "refund-pending-2c"]));
}
