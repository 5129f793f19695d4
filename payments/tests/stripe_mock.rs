//! The adapter against Stripe's own `stripe-mock`: every request the
//! platform sends is one Stripe's OpenAPI specification allows (stripe-mock
//! refuses any other with `invalid_request_error`), and every answer the
//! adapter parses is read from Stripe's own fixtures, not only from the
//! sandbox's objects. stripe-mock is stateless, so flows (paying, expiring
//! a paid session) are the sandbox's tests; shapes are checked here.

use std::time::Duration;

use seckill_devstack::{StripeMock, TempDir};
use seckill_payments::{
    CheckoutSession, Event, IntentRef, NewCheckout, Provider, ProviderError, ProviderSettings, STRIPE_VERSION,
};

/// A test-mode key: stripe-mock takes any `sk_test_` key.
const KEY: &str = "sk_test_123";

struct Mock {
    _dir: TempDir,
    mock: StripeMock,
    provider: Provider,
}

fn start() -> Mock {
    let dir = TempDir::new().expect("a test directory");
    let mock = StripeMock::start(dir.path()).expect("stripe-mock starts (scripts/setup --tests installs it)");
    let settings = ProviderSettings { base_url: mock.url(), api_key: KEY.to_owned(), timeout: Duration::from_secs(10) };
    let provider = Provider::new(settings).expect("valid settings");
    Mock { _dir: dir, mock, provider }
}

fn checkout() -> NewCheckout {
    NewCheckout {
        unit_amount: 1_999,
        quantity: 2,
        currency: "EUR".to_owned(),
        title: "Flash sale: 50% off".to_owned(),
        order_id: "0190c5a8-7b7e-7000-8000-000000000001".to_owned(),
        voucher_id: "42".to_owned(),
        success_url: "https://shop.example/sale/42?order=0190c5a8&session={CHECKOUT_SESSION_ID}".to_owned(),
        cancel_url: "https://shop.example/sale/42".to_owned(),
        expires_at: chrono_now() + 31 * 60,
    }
}

fn chrono_now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0)
}

#[tokio::test]
async fn the_checkout_calls_are_ones_stripe_accepts_and_their_answers_decode() {
    let mock = start();
    let created =
        mock.provider.create_checkout(&checkout(), "checkout-o1-1").await.expect("stripe accepts the session");
    assert_eq!(created.object, "checkout.session");
    assert!(created.id.starts_with("cs_"), "{}", created.id);

    let read = mock.provider.retrieve_checkout("cs_test_1").await.expect("stripe answers the session");
    // Asked expanded, the intent and its charge come as objects: the
    // payment's time and amount are read from them.
    let Some(IntentRef::Expanded(intent)) = &read.payment_intent else {
        panic!("the intent is expanded: {:?}", read.payment_intent);
    };
    assert!(intent.id.starts_with("pi_"));
    assert!(matches!(intent.latest_charge, Some(seckill_payments::ChargeRef::Expanded(_))), "the charge is expanded");

    let expired = mock.provider.expire_checkout("cs_test_1").await.expect("stripe accepts the expiry");
    assert_eq!(expired.object, "checkout.session");
}

#[tokio::test]
async fn the_payment_and_refund_calls_are_ones_stripe_accepts_and_their_answers_decode() {
    let mock = start();
    let intent = mock.provider.retrieve("pi_1").await.expect("an intent");
    assert_eq!(intent.object, "payment_intent");
    assert!(matches!(intent.latest_charge, Some(seckill_payments::ChargeRef::Expanded(_))));

    let found = mock.provider.intents_for_order("0190c5a8").await.expect("a search");
    assert!(found.iter().all(|intent| intent.object == "payment_intent"));

    let refund = mock.provider.refund("pi_1", "refund-pi_1-1").await.expect("a refund");
    assert_eq!(refund.object, "refund");
    let again = mock.provider.retrieve_refund(&refund.id).await.expect("the refund read back");
    assert_eq!(again.object, "refund");
    let refunds = mock.provider.refunds_of("pi_1").await.expect("a payment's refunds");
    assert!(!refunds.is_empty() && refunds.iter().all(|refund| refund.object == "refund"));
}

/// The check above means something only if stripe-mock refuses what
/// Stripe would: a parameter the specification lacks, and a wrong type.
#[tokio::test]
async fn stripe_mock_refuses_what_stripe_refuses() {
    let mock = start();
    let http = reqwest::Client::new();
    let post = |form: Vec<(&'static str, String)>| {
        http.post(format!("{}/v1/checkout/sessions", mock.mock.url()))
            .bearer_auth(KEY)
            .header("Stripe-Version", STRIPE_VERSION)
            .form(&form)
            .send()
    };
    let mut form = vec![
        ("mode", "payment".to_owned()),
        ("success_url", "https://shop.example/ok".to_owned()),
        ("line_items[0][price_data][currency]", "eur".to_owned()),
        ("line_items[0][price_data][unit_amount]", "100".to_owned()),
        ("line_items[0][price_data][product_data][name]", "x".to_owned()),
        ("line_items[0][quantity]", "1".to_owned()),
    ];
    assert!(post(form.clone()).await.expect("answers").status().is_success(), "the base request is valid");
    // A parameter Stripe's specification does not have.
    form.push(("order_reference", "o-1".to_owned()));
    let refused = post(form).await.expect("answers");
    let status = refused.status();
    let body: serde_json::Value = refused.json().await.expect("json");
    assert!(status.is_client_error(), "{status} {body}");
    assert_eq!(body["error"]["type"], "invalid_request_error", "{body}");

    let wrong_type =
        post(vec![("mode", "payment".to_owned()), ("expires_at", "soon".to_owned())]).await.expect("answers");
    assert!(wrong_type.status().is_client_error());

    // Through the adapter, Stripe's refusal of a bad key is an `Api` error.
    let settings = ProviderSettings {
        base_url: mock.mock.url(),
        api_key: "not-a-key".to_owned(),
        timeout: Duration::from_secs(10),
    };
    let unauthorized = Provider::new(settings).expect("valid settings");
    match unauthorized.create_checkout(&checkout(), "checkout-bad").await {
        Err(ProviderError::Api { status, .. }) => assert!((400..500).contains(&status), "{status}"),
        other => panic!("stripe-mock refuses a key that is not one: {other:?}"),
    }
}

#[tokio::test]
async fn stripe_events_decode_as_the_webhook_reads_them() {
    let mock = start();
    let http = reqwest::Client::new();
    let event: Event = http
        .get(format!("{}/v1/events/evt_1", mock.mock.url()))
        .bearer_auth(KEY)
        .header("Stripe-Version", STRIPE_VERSION)
        .send()
        .await
        .expect("answers")
        .json()
        .await
        .expect("Stripe's event fixture decodes as an Event");
    assert_eq!(event.object, "event");
    // A session as Stripe serializes it, inside an event as the webhook
    // reads it.
    let session: serde_json::Value = http
        .get(format!("{}/v1/checkout/sessions/cs_1", mock.mock.url()))
        .bearer_auth(KEY)
        .send()
        .await
        .expect("answers")
        .json()
        .await
        .expect("json");
    let wrapped = serde_json::json!({
        "id": "evt_2", "object": "event", "type": "checkout.session.completed", "created": 1,
        "livemode": false, "data": {"object": session}
    });
    let event: Event = serde_json::from_value(wrapped).expect("decodes");
    let session: CheckoutSession = event.checkout_session().expect("a session");
    assert!(matches!(session.payment_intent, Some(IntentRef::Id(_))), "unexpanded in events, as Stripe sends it");
}
