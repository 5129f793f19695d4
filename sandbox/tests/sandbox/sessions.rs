//! Checkout Sessions over HTTP, created through the platform's adapter:
//! paid on the hosted page, expired by a call or by their time, paid by a
//! bank debit that settles or fails later, and Stripe's refusals.

use seckill_payments::{ChargeRef, IntentRef, IntentStatus, SessionPaymentStatus, SessionStatus};

use crate::helpers::{eventually, Receiver, TestSandbox};

#[tokio::test]
async fn a_session_paid_on_its_page_is_announced_with_its_intent_as_an_id() {
    let receiver = Receiver::start(0).await;
    let sandbox = TestSandbox::start(Some(receiver.url.clone()), |_| {}).await;
    let before = chrono::Utc::now().timestamp();
    let session = sandbox.checkout("paid-1", 3_600).await;
    assert!(session.id.starts_with("cs_test_"), "{}", session.id);
    assert_eq!((session.status, session.payment_status), (SessionStatus::Open, SessionPaymentStatus::Unpaid));
    assert_eq!(session.payment_intent, None, "Stripe makes the intent when the buyer pays");
    assert_eq!((session.amount_total, session.currency.as_deref()), (Some(2_500), Some("eur")));
    assert_eq!((session.order_id(), session.voucher_id()), (Some("paid-1"), Some("7")));
    assert!((before + 3_600..=before + 3_601).contains(&session.expires_at), "{}", session.expires_at);
    let url = session.url.clone().expect("a page while open");
    assert_eq!(url, format!("{}/checkout/{}", sandbox.base_url, session.id));

    let html = sandbox.http.get(&url).send().await.expect("answers").text().await.expect("html");
    for expected in ["id=\"pay\"", "id=\"decline\"", "paid-1", "25.00", "EUR", "Flash sale voucher"] {
        assert!(html.contains(expected), "{expected} in {html}");
    }
    assert!(html.contains(&format!("action=\"{}/pay\"", session.id)), "relative actions: {html}");
    let declined = sandbox.http.post(format!("{url}/decline")).form(&[("x", "")]).send().await.expect("answers");
    assert_eq!(declined.status(), reqwest::StatusCode::SEE_OTHER);
    assert_eq!(declined.headers()["location"], "http://shop.test/sale");
    let still = sandbox.provider.retrieve_checkout(&session.id).await.expect("read");
    assert_eq!(still.status, SessionStatus::Open, "a decline leaves the session open");

    let paid = sandbox.http.post(format!("{url}/pay")).form(&[("x", "")]).send().await.expect("answers");
    assert_eq!(paid.status(), reqwest::StatusCode::SEE_OTHER);
    let location = paid.headers()["location"].to_str().expect("ascii").to_owned();
    assert_eq!(location, format!("http://shop.test/orders/paid-1?session={}", session.id));

    let completed = receiver.event_of("checkout.session.completed").await;
    assert_eq!(completed.json()["api_version"], "2024-06-20");
    assert_eq!(completed.json()["livemode"], false);
    let announced = completed.event().checkout_session().expect("a session");
    assert_eq!((announced.status, announced.payment_status), (SessionStatus::Complete, SessionPaymentStatus::Paid));
    let Some(IntentRef::Id(intent_id)) = announced.payment_intent.clone() else {
        panic!("events carry the intent as an id: {:?}", announced.payment_intent);
    };
    let intent = sandbox.provider.retrieve(&intent_id).await.expect("the intent");
    assert_eq!((intent.status, intent.amount, intent.amount_received), (IntentStatus::Succeeded, 2_500, 2_500));
    assert_eq!((intent.order_id(), intent.voucher_id()), (Some("paid-1"), Some("7")), "payment_intent_data[metadata]");
    let paid_at = intent.paid_at().expect("a charge");
    assert!(paid_at >= before && paid_at <= chrono::Utc::now().timestamp());
    let succeeded = receiver.event_of("payment_intent.succeeded").await.event().payment_intent().expect("an intent");
    assert_eq!(succeeded.id, intent_id);

    let read = sandbox.provider.retrieve_checkout(&session.id).await.expect("read");
    assert_eq!((read.status, read.url.as_deref()), (SessionStatus::Complete, None));
    let expanded = read.expanded_intent().expect("asked expanded");
    assert!(matches!(expanded.latest_charge, Some(ChargeRef::Expanded(_))), "with its charge");
    let plain = sandbox.get(&format!("checkout/sessions/{}", session.id), &[]).await;
    assert_eq!(plain.body["payment_intent"], intent_id.as_str(), "an id unless expanded");

    let again = sandbox.http.post(format!("{url}/pay")).form(&[("x", "")]).send().await.expect("answers");
    assert_eq!(again.status(), reqwest::StatusCode::CONFLICT);
    assert!(again.text().await.expect("html").contains("no longer be paid"));
    let after = sandbox.http.get(&url).send().await.expect("answers").text().await.expect("html");
    assert!(!after.contains("id=\"pay\"") && after.contains("complete"), "{after}");
    let ledger = sandbox.ledger().await;
    assert_eq!(ledger["payment_intents"].as_array().map(Vec::len), Some(1), "charged once");
    let line = &ledger["checkout_sessions"][0];
    assert_eq!((line["status"].as_str(), line["payment_status"].as_str()), (Some("complete"), Some("paid")));
    assert_eq!(
        (line["order_id"].as_str(), line["payment_intent"].as_str()),
        (Some("paid-1"), Some(intent_id.as_str()))
    );
}

#[tokio::test]
async fn an_open_session_is_expired_and_a_complete_one_refused_unchanged() {
    let receiver = Receiver::start(0).await;
    let sandbox = TestSandbox::start(Some(receiver.url.clone()), |_| {}).await;
    let open = sandbox.checkout("expire-1", 3_600).await;
    let expired = sandbox.provider.expire_checkout(&open.id).await.expect("expired");
    assert_eq!((expired.status, expired.url), (SessionStatus::Expired, None));
    let announced = receiver.event_of("checkout.session.expired").await.event().checkout_session().expect("a session");
    assert_eq!((announced.id.as_str(), announced.status), (open.id.as_str(), SessionStatus::Expired));
    let refused = sandbox.post(&format!("checkout/sessions/{}/expire", open.id), &[], None).await;
    assert_eq!(refused.status, 400);
    assert_eq!(refused.body["error"]["type"], "invalid_request_error");
    assert_eq!(refused.body["error"].get("code"), None, "Stripe gives no code");
    let message = refused.body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.starts_with("Only Checkout Sessions with a status in [\"open\"] can be expired."), "{message}");
    let unpayable = sandbox.settle_session(&open.id, "pay").await;
    assert_eq!(unpayable.status, 409);

    let complete = sandbox.checkout("expire-2", 3_600).await;
    let paid = sandbox.settle_session(&complete.id, "pay").await;
    assert_eq!((paid.status, paid.body["status"].as_str()), (200, Some("complete")));
    let refused = sandbox.post(&format!("checkout/sessions/{}/expire", complete.id), &[], None).await;
    assert_eq!(refused.status, 400);
    assert!(refused.body["error"]["message"].as_str().unwrap_or_default().contains("status of `complete`"));
    let kept = sandbox.provider.expire_checkout(&complete.id).await.expect("the adapter reads the final state");
    assert_eq!((kept.status, kept.payment_status), (SessionStatus::Complete, SessionPaymentStatus::Paid));
    assert!(kept.expanded_intent().is_some_and(|intent| intent.amount_received == 2_500));
    sandbox.settled_webhooks().await;
    let expiries = receiver.kinds().iter().filter(|kind| *kind == "checkout.session.expired").count();
    assert_eq!(expiries, 1);
    let missing = sandbox.get("checkout/sessions/cs_test_missing", &[]).await;
    assert_eq!((missing.status, missing.code()), (404, "resource_missing"));
}

#[tokio::test]
async fn a_session_expires_by_itself_at_expires_at_without_being_read() {
    let receiver = Receiver::start(0).await;
    let sandbox = TestSandbox::start(Some(receiver.url.clone()), |config| config.min_session_seconds = 1).await;
    let session = sandbox.checkout("self-1", 2).await;
    assert_eq!(session.status, SessionStatus::Open);
    let expired = receiver.event_of("checkout.session.expired").await.event();
    let announced = expired.checkout_session().expect("a session");
    assert_eq!((announced.id.as_str(), announced.status), (session.id.as_str(), SessionStatus::Expired));
    assert!(expired.created >= session.expires_at, "{} before {}", expired.created, session.expires_at);
    let read = sandbox.provider.retrieve_checkout(&session.id).await.expect("read");
    assert_eq!(read.status, SessionStatus::Expired);
    let page = sandbox.http.post(format!("{}/checkout/{}/pay", sandbox.base_url, session.id)).form(&[("x", "")]);
    assert_eq!(page.send().await.expect("answers").status(), reqwest::StatusCode::CONFLICT);
    assert_eq!(sandbox.ledger().await["checkout_sessions"][0]["status"], "expired");

    // Stripe's own bound, with the sandbox's default.
    let strict = TestSandbox::start(None, |_| {}).await;
    let error = strict
        .provider
        .create_checkout(&crate::helpers::new_checkout("self-2", 60), "checkout-self-2")
        .await
        .expect_err("too soon");
    assert!(error.to_string().contains("at least 30 minutes"), "{error}");
}

#[tokio::test]
async fn a_bank_debit_completes_the_session_unpaid_then_settles() {
    let receiver = Receiver::start(0).await;
    let sandbox = TestSandbox::start(Some(receiver.url.clone()), |_| {}).await;
    sandbox.switch(serde_json::json!({"async_payments": true, "async_settle_ms": 1_000})).await;
    let session = sandbox.checkout("debit-1", 3_600).await;
    let paid = sandbox.settle_session(&session.id, "pay").await;
    assert_eq!(
        (paid.body["status"].as_str(), paid.body["payment_status"].as_str()),
        (Some("complete"), Some("unpaid"))
    );
    let intent_id = paid.body["payment_intent"].as_str().expect("an intent id").to_owned();
    let processing = sandbox.provider.retrieve(&intent_id).await.expect("the intent");
    assert_eq!((processing.status, processing.amount_received), (IntentStatus::Processing, 0));
    assert_eq!(processing.latest_charge, None);
    let completed = receiver.event_of("checkout.session.completed").await.event().checkout_session().expect("session");
    assert_eq!(completed.payment_status, SessionPaymentStatus::Unpaid);

    let settled = receiver.event_of("checkout.session.async_payment_succeeded").await;
    let announced = settled.event().checkout_session().expect("a session");
    assert_eq!((announced.status, announced.payment_status), (SessionStatus::Complete, SessionPaymentStatus::Paid));
    let read = sandbox.provider.retrieve_checkout(&session.id).await.expect("read");
    let intent = read.expanded_intent().expect("expanded");
    assert_eq!((intent.status, intent.amount_received), (IntentStatus::Succeeded, 2_500));
    assert!(intent.paid_at().is_some_and(|paid_at| paid_at >= processing.created));
}

#[tokio::test]
async fn a_failed_bank_debit_leaves_the_session_unpaid() {
    let receiver = Receiver::start(0).await;
    let sandbox = TestSandbox::start(Some(receiver.url.clone()), |_| {}).await;
    sandbox
        .switch(serde_json::json!({"async_payments": true, "async_payments_fail": true, "async_settle_ms": 100}))
        .await;
    let session = sandbox.checkout("debit-2", 3_600).await;
    let page = sandbox.http.post(format!("{}/checkout/{}/pay", sandbox.base_url, session.id)).form(&[("x", "")]);
    assert_eq!(page.send().await.expect("answers").status(), reqwest::StatusCode::SEE_OTHER);
    let failed = receiver.event_of("checkout.session.async_payment_failed").await;
    let announced = failed.event().checkout_session().expect("a session");
    assert_eq!((announced.status, announced.payment_status), (SessionStatus::Complete, SessionPaymentStatus::Unpaid));
    let intent_failed =
        receiver.event_of("payment_intent.payment_failed").await.event().payment_intent().expect("intent");
    assert_eq!((intent_failed.status, intent_failed.amount_received), (IntentStatus::RequiresPaymentMethod, 0));
    let read = eventually(
        || sandbox.provider.retrieve_checkout(&session.id),
        |read| read.as_ref().is_ok_and(|read| read.expanded_intent().is_some()),
    )
    .await
    .expect("read");
    assert_eq!(read.payment_status, SessionPaymentStatus::Unpaid);
    assert_eq!(read.expanded_intent().map(|intent| intent.status), Some(IntentStatus::RequiresPaymentMethod));
    assert!(!receiver.kinds().iter().any(|kind| kind == "checkout.session.async_payment_succeeded"));
}

#[tokio::test]
async fn unknown_parameters_and_amounts_past_stripes_bounds_are_refused() {
    let sandbox = TestSandbox::start(None, |_| {}).await;
    let now = chrono::Utc::now().timestamp();
    let form = |changes: &[(&'static str, Option<String>)]| {
        let mut form: Vec<(&'static str, String)> = vec![
            ("mode", "payment".to_owned()),
            ("line_items[0][price_data][currency]", "eur".to_owned()),
            ("line_items[0][price_data][unit_amount]", "1250".to_owned()),
            ("line_items[0][price_data][product_data][name]", "Voucher".to_owned()),
            ("line_items[0][quantity]", "2".to_owned()),
            ("success_url", "http://shop.test/ok".to_owned()),
            ("expires_at", (now + 3_600).to_string()),
        ];
        for (name, value) in changes {
            form.retain(|(existing, _)| existing != name);
            if let Some(value) = value {
                form.push((name, value.clone()));
            }
        }
        form
    };
    let sandbox = &sandbox;
    let create = |changes: Vec<(&'static str, Option<String>)>| {
        let form = form(&changes);
        async move { sandbox.post("checkout/sessions", &form, None).await }
    };
    assert_eq!(create(vec![]).await.status, 200);
    for unknown in ["line_items[0][price]", "payment_method_types[]", "line_items[1][quantity]", "metdata[order_id]"] {
        let refused = create(vec![(unknown, Some("x".to_owned()))]).await;
        assert_eq!((refused.status, refused.code()), (400, "parameter_unknown"), "{unknown}");
        assert_eq!(refused.body["error"]["param"], unknown);
    }
    let refused = create(vec![("line_items[0][price_data][unit_amount]", Some("50000000".to_owned()))]).await;
    assert_eq!((refused.status, refused.code()), (400, "amount_too_large"));
    let refused = create(vec![("line_items[0][price_data][unit_amount]", Some("0".to_owned()))]).await;
    assert_eq!((refused.status, refused.code()), (400, "amount_too_small"));
    let refused = create(vec![("expires_at", Some((now + 86_400 + 60).to_string()))]).await;
    assert_eq!((refused.status, refused.code()), (400, "parameter_invalid"));
    assert!(refused.body["error"]["message"].as_str().unwrap_or_default().contains("less than 24 hours"));
    let refused = create(vec![("mode", Some("subscription".to_owned()))]).await;
    assert_eq!((refused.status, refused.body["error"]["param"].as_str()), (400, Some("mode")));
    let refused = create(vec![("expand[]", Some("line_items".to_owned()))]).await;
    assert_eq!(refused.status, 400);

    let first = sandbox.post("checkout/sessions", &form(&[]), Some("same-key")).await;
    let again = sandbox.post("checkout/sessions", &form(&[]), Some("same-key")).await;
    assert_eq!((again.status, again.replayed), (200, true));
    assert_eq!(first.body["id"], again.body["id"]);
    let other = sandbox
        .post("checkout/sessions", &form(&[("cancel_url", Some("http://x.test".to_owned()))]), Some("same-key"))
        .await;
    assert_eq!((other.status, other.code()), (400, "idempotency_key_in_use"));
}
