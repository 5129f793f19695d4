//! The client against the sandbox started in-process on a free port: every
//! call the platform makes, and the "already done" answers it resolves.

use std::time::Duration;

use seckill_payments::{
    CheckoutSession, IntentStatus, NewCheckout, Provider, ProviderError, ProviderSettings, SessionPaymentStatus,
    SessionStatus,
};
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

fn order(order_id: &str) -> NewCheckout {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
    NewCheckout {
        unit_amount: 1_250,
        quantity: 2,
        currency: "EUR".to_owned(),
        title: "Voucher 42".to_owned(),
        order_id: order_id.to_owned(),
        voucher_id: "42".to_owned(),
        success_url: "http://127.0.0.1:9/sale/42?session={CHECKOUT_SESSION_ID}".to_owned(),
        cancel_url: "http://127.0.0.1:9/sale/42".to_owned(),
        expires_at: now + 31 * 60,
    }
}

impl TestSandbox {
    /// Pays through the sandbox's test route, as the buyer's click would.
    async fn pay(&self, id: &str) -> reqwest::Response {
        self.http
            .post(format!("{}/sandbox/checkout/sessions/{id}/pay", self.base_url))
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
async fn opening_twice_with_one_key_makes_one_session() {
    let sandbox = start().await;
    let first = sandbox.provider.create_checkout(&order("create-1"), "key-create-1").await.expect("created");
    let again = sandbox.provider.create_checkout(&order("create-1"), "key-create-1").await.expect("replayed");
    assert_eq!(first.id, again.id);
    assert_eq!((first.status, first.payment_status), (SessionStatus::Open, SessionPaymentStatus::Unpaid));
    assert_eq!((first.amount_total, first.currency.as_deref()), (Some(2_500), Some("eur")));
    assert_eq!((first.order_id(), first.voucher_id()), (Some("create-1"), Some("42")));
    assert_eq!(first.url.as_deref(), Some(format!("{}/checkout/{}", sandbox.base_url, first.id).as_str()));
    assert!(first.payment_intent.is_none(), "Stripe creates the intent only when the buyer pays");

    let refused = sandbox.provider.create_checkout(&order("create-2"), "key-create-1").await.expect_err("other params");
    assert!(matches!(refused, ProviderError::Api { status: 400, .. }), "{refused}");
    assert_eq!(refused.code(), Some("idempotency_key_in_use"));
}

/// Pays `order`'s new session and reads it back as the platform does.
async fn paid_session(sandbox: &TestSandbox, order_id: &str) -> CheckoutSession {
    let session =
        sandbox.provider.create_checkout(&order(order_id), &format!("key-{order_id}")).await.expect("created");
    assert!(sandbox.pay(&session.id).await.status().is_success());
    sandbox.provider.retrieve_checkout(&session.id).await.expect("read back")
}

#[tokio::test]
async fn a_paid_session_is_read_with_its_intent_and_charge() {
    let sandbox = start().await;
    let session = paid_session(&sandbox, "paid-1").await;
    assert_eq!((session.status, session.payment_status), (SessionStatus::Complete, SessionPaymentStatus::Paid));
    let intent = session.expanded_intent().expect("the intent, expanded");
    assert_eq!((intent.status, intent.amount_received), (IntentStatus::Succeeded, 2_500));
    assert_eq!(intent.order_id(), Some("paid-1"), "the intent carries the order too");
    assert!(intent.paid_at().is_some_and(|paid| paid >= session.created), "the charge's time");

    // Expiring a paid session returns it as it stays: complete.
    let after = sandbox.provider.expire_checkout(&session.id).await.expect("its final state");
    assert_eq!(after.status, SessionStatus::Complete);
}

#[tokio::test]
async fn an_expired_session_stays_expired_and_cannot_be_paid() {
    let sandbox = start().await;
    let session = sandbox.provider.create_checkout(&order("expire-1"), "key-expire-1").await.expect("created");
    let expired = sandbox.provider.expire_checkout(&session.id).await.expect("expired");
    assert_eq!(expired.status, SessionStatus::Expired);
    assert!(!sandbox.pay(&session.id).await.status().is_success(), "an expired session takes no money");
    let again = sandbox.provider.expire_checkout(&session.id).await.expect("still expired");
    assert_eq!(again.status, SessionStatus::Expired);
    let read = sandbox.provider.retrieve_checkout(&session.id).await.expect("read");
    assert!(read.payment_intent.is_none());
}

#[tokio::test]
async fn a_refund_is_made_once_whatever_the_key() {
    let sandbox = start().await;
    let session = paid_session(&sandbox, "refund-1").await;
    let intent = session.payment_intent_id().expect("paid").to_owned();

    let refund = sandbox.provider.refund(&intent, "refund-key-1").await.expect("refunded");
    assert_eq!((refund.amount, refund.status.as_str()), (2_500, "succeeded"));
    let replayed = sandbox.provider.refund(&intent, "refund-key-1").await.expect("replayed");
    assert_eq!(replayed.id, refund.id);
    let existing = sandbox.provider.refund(&intent, "refund-key-2").await.expect("the existing refund");
    assert_eq!(existing.id, refund.id);
    let live = sandbox.provider.live_refund(&intent).await.expect("listed");
    assert_eq!(live.map(|r| r.id), Some(refund.id.clone()));
    assert_eq!(sandbox.provider.retrieve_refund(&refund.id).await.expect("read").status, "succeeded");

    let ledger = sandbox.ledger().await;
    assert_eq!(ledger["refunds"].as_array().map(Vec::len), Some(1));
    let charge = &sandbox.provider.retrieve(&intent).await.expect("retrieved").latest_charge;
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
