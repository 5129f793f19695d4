//! The provider API and a bare intent's checkout page over HTTP: Stripe's
//! answers, refusals and bounds, and the refund outage switch.

use std::time::Duration;

use seckill_payments::{IntentStatus, ProviderError};
use tokio::time::Instant;

use crate::helpers::TestSandbox;

#[tokio::test]
async fn without_saved_failures_refunds_fail_during_an_outage_then_succeed_once_under_the_key() {
    let sandbox = TestSandbox::start(None, |_| {}).await;
    let intent = sandbox.create("outage-1").await;
    sandbox.settle(&intent.id, "pay").await;
    // Stripe would replay the outage's 500 to this key (see
    // `provider_timing`); here the key is retried as if it did not.
    let settings = sandbox.switch(serde_json::json!({"fail_refunds_for_ms": 300, "replay_failures": false})).await;
    assert!(settings["fail_refunds_for_ms"].as_u64().is_some_and(|left| left > 0 && left <= 300));

    let started = Instant::now();
    let error = sandbox.provider.refund(&intent.id, "refund-outage-1").await.expect_err("outage");
    assert!(matches!(error, ProviderError::Api { status: 500, .. }), "{error}");
    assert!(error.is_retryable());
    let refund = loop {
        match sandbox.provider.refund(&intent.id, "refund-outage-1").await {
            Ok(refund) => break refund,
            Err(error) => {
                assert!(error.is_retryable() && started.elapsed() < Duration::from_secs(10), "{error}");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    };
    assert!(started.elapsed() >= Duration::from_millis(250), "the outage lasted {:?}", started.elapsed());
    assert_eq!(refund.payment_intent.as_deref(), Some(intent.id.as_str()));
    assert_eq!(sandbox.ledger().await["refunds"].as_array().map(Vec::len), Some(1));
}

#[tokio::test]
async fn the_checkout_page_pays_and_sends_the_buyer_back() {
    let sandbox = TestSandbox::start(None, |_| {}).await;
    let intent = sandbox.create("checkout-1").await;
    let url = intent.checkout_url().expect("a checkout page").to_owned();
    let page = sandbox.http.get(&url).send().await.expect("answers");
    assert_eq!(page.status(), reqwest::StatusCode::OK);
    let html = page.text().await.expect("html");
    for expected in ["id=\"pay\"", "id=\"decline\"", "checkout-1", "25.00", "EUR"] {
        assert!(html.contains(expected), "{expected} in {html}");
    }

    let declined = sandbox.http.post(format!("{url}/decline")).form(&[("ignored", "")]).send().await.expect("answers");
    assert_eq!(declined.status(), reqwest::StatusCode::SEE_OTHER);
    let paid = sandbox.http.post(format!("{url}/pay")).header("content-length", "0").send().await.expect("answers");
    assert_eq!(paid.status(), reqwest::StatusCode::SEE_OTHER);
    let location = paid.headers()["location"].to_str().expect("ascii");
    assert_eq!(
        location,
        format!("http://shop.test/return?from=checkout&payment_intent={}&redirect_status=succeeded", intent.id)
    );
    assert_eq!(sandbox.provider.retrieve(&intent.id).await.expect("retrieved").status, IntentStatus::Succeeded);

    let after = sandbox.http.get(&url).send().await.expect("answers").text().await.expect("html");
    assert!(!after.contains("id=\"pay\"") && after.contains("succeeded"), "{after}");
    let again = sandbox.http.post(format!("{url}/pay")).header("content-length", "0").send().await.expect("answers");
    assert_eq!(again.status(), reqwest::StatusCode::BAD_REQUEST);
    let missing = sandbox.http.get(format!("{}/checkout/pi_missing", sandbox.base_url)).send().await.expect("answers");
    assert_eq!(missing.status(), reqwest::StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn calls_without_the_key_or_out_of_bounds_are_refused_in_stripes_shape() {
    let sandbox = TestSandbox::start(None, |_| {}).await;
    let create = format!("{}/v1/payment_intents", sandbox.base_url);

    let anonymous =
        sandbox.http.post(&create).form(&[("amount", "5"), ("currency", "eur")]).send().await.expect("answers");
    assert_eq!(anonymous.status(), reqwest::StatusCode::UNAUTHORIZED);
    let body: serde_json::Value = anonymous.json().await.expect("json");
    assert_eq!(body["error"]["type"], "invalid_request_error");

    let key = &sandbox.config.api_key;
    let refusal = |pairs: Vec<(&'static str, String)>| {
        let request = sandbox.http.post(&create).bearer_auth(key).form(&pairs);
        async move {
            let response = request.send().await.expect("answers");
            let status = response.status();
            let body: serde_json::Value = response.json().await.expect("json");
            (status.as_u16(), body["error"]["code"].as_str().unwrap_or_default().to_owned())
        }
    };
    let amount = |value: &str| vec![("amount", value.to_owned()), ("currency", "eur".to_owned())];
    assert_eq!(refusal(amount("0")).await, (400, "amount_too_small".to_owned()));
    assert_eq!(refusal(amount("x")).await, (400, "parameter_invalid_integer".to_owned()));
    assert_eq!(refusal(vec![("amount", "5".to_owned())]).await, (400, "parameter_missing".to_owned()));
    let mut typo = amount("5");
    typo.push(("metdata[order_id]", "o".to_owned()));
    assert_eq!(refusal(typo).await, (400, "parameter_unknown".to_owned()));
    let mut huge = amount("5");
    huge.push(("description", "x".repeat(20 * 1024)));
    assert_eq!(refusal(huge).await.0, 413);

    let search = format!("{}/v1/payment_intents/search", sandbox.base_url);
    let response = sandbox.http.get(&search).bearer_auth(key).query(&[("query", "status:'succeeded'")]).send().await;
    assert_eq!(response.expect("answers").status(), reqwest::StatusCode::BAD_REQUEST);
    let unknown = sandbox.http.get(format!("{}/v1/customers", sandbox.base_url)).bearer_auth(key).send().await;
    assert_eq!(unknown.expect("answers").status(), reqwest::StatusCode::NOT_FOUND);
    let health = sandbox.http.get(format!("{}/healthz", sandbox.base_url)).send().await.expect("answers");
    assert_eq!(health.status(), reqwest::StatusCode::OK);
}

#[tokio::test]
async fn past_max_objects_creating_is_rate_limited_sessions_included() {
    let sandbox = TestSandbox::start(None, |config| config.max_objects = 2).await;
    sandbox.create("full-1").await;
    sandbox.checkout("full-2", 3_600).await;
    let form = [("amount", "1".to_owned()), ("currency", "usd".to_owned())];
    let refused = sandbox.post("payment_intents", &form, None).await;
    assert_eq!((refused.status, refused.code()), (429, "rate_limit"));
    let error = sandbox
        .provider
        .create_checkout(&crate::helpers::new_checkout("full-3", 3_600), "checkout-full-3")
        .await
        .expect_err("full");
    assert!(matches!(error, ProviderError::Api { status: 429, .. }), "{error}");
    assert!(error.is_retryable());
}

#[tokio::test]
async fn a_stripe_version_other_than_the_sandboxs_is_refused() {
    let sandbox = TestSandbox::start(None, |_| {}).await;
    let intent = sandbox.create("version-1").await;
    let url = format!("{}/v1/payment_intents/{}", sandbox.base_url, intent.id);
    let request = sandbox.http.get(&url).bearer_auth(&sandbox.config.api_key);
    let response = request.try_clone().expect("clonable").header("Stripe-Version", "2020-08-27").send().await;
    assert_eq!(response.expect("answers").status(), reqwest::StatusCode::BAD_REQUEST);
    let response = request.header("Stripe-Version", "2024-06-20").send().await.expect("answers");
    assert_eq!(response.status(), reqwest::StatusCode::OK);
}
