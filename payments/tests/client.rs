//! The client against the sandbox started in-process on a free port: every
//! call the platform makes, and the "already done" answers it resolves.

use std::time::Duration;

use seckill_payments::{IntentStatus, NewIntent, Provider, ProviderError, ProviderSettings};
use seckill_sandbox::{Sandbox, SandboxConfig};
use tokio_util::sync::CancellationToken;

/// A sandbox serving until dropped, and a client of it.
struct TestSandbox {
    base_url: String,
    provider: Provider,
    http: reqwest::Client,
    stop: CancellationToken,
}

impl Drop for TestSandbox {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

async fn start() -> TestSandbox {
    let config = SandboxConfig::local(None);
    let api_key = config.api_key.clone();
    let sandbox = Sandbox::build(config).await.expect("sandbox binds");
    let base_url = format!("http://{}", sandbox.local_addr());
    let stop = CancellationToken::new();
    tokio::spawn(sandbox.run(stop.clone()));
    let provider = Provider::new(settings(&base_url, &api_key)).expect("valid settings");
    TestSandbox { base_url, provider, http: reqwest::Client::new(), stop }
}

fn settings(base_url: &str, api_key: &str) -> ProviderSettings {
    ProviderSettings { base_url: base_url.to_owned(), api_key: api_key.to_owned(), timeout: Duration::from_secs(5) }
}

fn order(order_id: &str) -> NewIntent {
    NewIntent {
        amount: 2_500,
        currency: "EUR".to_owned(),
        order_id: order_id.to_owned(),
        voucher_id: "42".to_owned(),
        return_url: Some("http://127.0.0.1:9/orders/return".to_owned()),
    }
}

impl TestSandbox {
    /// Pays through the sandbox's test route, as the buyer's click would.
    async fn pay(&self, id: &str) -> reqwest::Response {
        self.http
            .post(format!("{}/sandbox/payment_intents/{id}/pay", self.base_url))
            .send()
            .await
            .expect("sandbox answers")
    }

    async fn ledger(&self) -> serde_json::Value {
        let response = self.http.get(format!("{}/sandbox/ledger", self.base_url)).send().await.expect("answers");
        response.json().await.expect("a ledger")
    }
}

#[tokio::test]
async fn creating_twice_with_one_key_makes_one_intent() {
    let sandbox = start().await;
    let first = sandbox.provider.create_intent(&order("create-1"), "key-create-1").await.expect("created");
    let again = sandbox.provider.create_intent(&order("create-1"), "key-create-1").await.expect("replayed");
    assert_eq!(first.id, again.id);
    assert_eq!(first.status, IntentStatus::RequiresPaymentMethod);
    assert_eq!((first.amount, first.currency.as_str()), (2_500, "eur"));
    assert_eq!((first.order_id(), first.voucher_id()), (Some("create-1"), Some("42")));
    let checkout = first.checkout_url().expect("a checkout page");
    assert_eq!(checkout, format!("{}/checkout/{}", sandbox.base_url, first.id));

    let retrieved = sandbox.provider.retrieve(&first.id).await.expect("retrieved");
    assert_eq!(retrieved, first);

    let refused = sandbox.provider.create_intent(&order("create-2"), "key-create-1").await.expect_err("other params");
    assert!(matches!(refused, ProviderError::Api { status: 400, .. }), "{refused}");
    assert_eq!(refused.code(), Some("idempotency_key_in_use"));
    assert_eq!(sandbox.ledger().await["payment_intents"].as_array().map(Vec::len), Some(1));
}

#[tokio::test]
async fn cancelling_a_paid_intent_returns_it_paid() {
    let sandbox = start().await;
    let intent = sandbox.provider.create_intent(&order("paid-1"), "key-paid-1").await.expect("created");
    assert!(sandbox.pay(&intent.id).await.status().is_success());
    let after = sandbox.provider.cancel(&intent.id).await.expect("final state");
    assert_eq!(after.status, IntentStatus::Succeeded);
    assert!(after.paid_at().is_some_and(|paid| paid >= intent.created));
}

#[tokio::test]
async fn a_cancelled_intent_stays_cancelled_and_cannot_be_paid() {
    let sandbox = start().await;
    let intent = sandbox.provider.create_intent(&order("cancel-1"), "key-cancel-1").await.expect("created");
    let canceled = sandbox.provider.cancel(&intent.id).await.expect("canceled");
    assert_eq!(canceled.status, IntentStatus::Canceled);
    assert!(canceled.canceled_at.is_some());

    let refused = sandbox.pay(&intent.id).await;
    assert_eq!(refused.status(), reqwest::StatusCode::BAD_REQUEST);
    let body: serde_json::Value = refused.json().await.expect("an error body");
    assert_eq!(body["error"]["code"], "payment_intent_unexpected_state");

    let again = sandbox.provider.cancel(&intent.id).await.expect("still canceled");
    assert_eq!(again.status, IntentStatus::Canceled);
}

#[tokio::test]
async fn an_orders_intents_are_found_by_its_id() {
    let sandbox = start().await;
    let first = sandbox.provider.create_intent(&order("search-1"), "key-search-1a").await.expect("created");
    let second = sandbox.provider.create_intent(&order("search-1"), "key-search-1b").await.expect("created");
    sandbox.provider.create_intent(&order("search-2"), "key-search-2").await.expect("created");
    let ids: Vec<String> = sandbox
        .provider
        .intents_for_order("search-1")
        .await
        .expect("searched")
        .into_iter()
        .map(|intent| intent.id)
        .collect();
    assert_eq!(ids, vec![first.id, second.id]);
    assert!(sandbox.provider.intents_for_order("it's-absent").await.expect("searched").is_empty());
}

#[tokio::test]
async fn a_refund_is_made_once_whatever_the_key() {
    let sandbox = start().await;
    let intent = sandbox.provider.create_intent(&order("refund-1"), "key-refund-1").await.expect("created");
    let unpaid = sandbox.provider.refund(&intent.id, "refund-key-0").await.expect_err("not paid");
    assert_eq!(unpaid.code(), Some("payment_intent_unexpected_state"));
    assert!(sandbox.pay(&intent.id).await.status().is_success());

    let refund = sandbox.provider.refund(&intent.id, "refund-key-1").await.expect("refunded");
    assert_eq!((refund.amount, refund.status.as_str()), (2_500, "succeeded"));
    let replayed = sandbox.provider.refund(&intent.id, "refund-key-1").await.expect("replayed");
    assert_eq!(replayed.id, refund.id);
    let existing = sandbox.provider.refund(&intent.id, "refund-key-2").await.expect("the existing refund");
    assert_eq!(existing.id, refund.id);

    let ledger = sandbox.ledger().await;
    assert_eq!(ledger["refunds"].as_array().map(Vec::len), Some(1));
    let charge = &sandbox.provider.retrieve(&intent.id).await.expect("retrieved").latest_charge;
    assert!(matches!(charge, Some(seckill_payments::ChargeRef::Expanded(charge)) if charge.refunded));
}

#[tokio::test]
async fn a_wrong_key_or_an_unknown_intent_is_refused_for_good() {
    let sandbox = start().await;
    let intruder = Provider::new(settings(&sandbox.base_url, "sk_test_wrong")).expect("valid settings");
    let refused = intruder.retrieve("pi_any").await.expect_err("unauthorized");
    assert!(matches!(refused, ProviderError::Api { status: 401, .. }), "{refused}");
    assert!(!refused.is_retryable());

    let missing = sandbox.provider.retrieve("pi_missing").await.expect_err("missing");
    assert_eq!(missing.code(), Some("resource_missing"));
    assert!(!missing.is_retryable());
}

#[tokio::test]
async fn an_unreachable_provider_is_a_retryable_transport_error() {
    let provider = Provider::new(settings("http://127.0.0.1:9", "sk_test_sandbox")).expect("valid settings");
    let error = provider.retrieve("pi_1").await.expect_err("nothing listens");
    assert!(matches!(error, ProviderError::Transport(_)), "{error}");
    assert!(error.is_retryable());
}
