//! Payments against the platform and the payment sandbox (its own server,
//! speaking Stripe's API and sending Stripe's events): the checkout an
//! order opens is closed at the provider whenever the order closes, a
//! payment that can never be paid is refused when the voucher is created,
//! a refunded payment does not hold its order open, a refund counts only
//! once the provider says it succeeded, and callbacks the platform has no
//! use for are acknowledged and change nothing.

use std::net::SocketAddr;
use std::time::Duration;

use chrono::Utc;
use reqwest::StatusCode;
use seckill_core::event::{CheckoutOpened, Event};
use seckill_core::Envelope;
use seckill_devstack::free_port;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;
use tokio_util::task::AbortOnDropHandle;

use crate::helpers::{eventually, Platform};

/// The sandbox's published keys (`PaymentsConfig::sandbox`).
const KEY: &str = seckill_core::config::SANDBOX_API_KEY;
const SECRET: &str = seckill_core::config::SANDBOX_WEBHOOK_SECRET;
const PRICE: u64 = 1_500;

/// A platform with payments, and the sandbox delivering its events to it.
struct Paying {
    platform: Platform,
    sandbox: String,
    sandbox_addr: SocketAddr,
    webhook_url: String,
    running: Option<AbortOnDropHandle<Result<(), seckill_sandbox::SandboxError>>>,
}

impl Paying {
    async fn start() -> Self {
        let ingress_port = free_port();
        let sandbox_addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
        let base = format!("http://127.0.0.1:{ingress_port}");
        let platform = Platform::start_configured(None, |config| {
            config.http = seckill_core::config::HttpConfig::local(ingress_port);
            config.payments = seckill_core::config::PaymentsConfig {
                return_url: format!("{base}/sale/{{voucher_id}}"),
                ..seckill_core::config::PaymentsConfig::sandbox(&format!("http://{sandbox_addr}"))
            };
        })
        .await;
        let mut paying = Self {
            platform,
            sandbox: format!("http://{sandbox_addr}"),
            sandbox_addr,
            webhook_url: format!("{base}/api/v1/payments/webhook"),
            running: None,
        };
        paying.start_sandbox().await;
        paying
    }

    /// Starts the sandbox (afresh: a sandbox keeps nothing across starts).
    async fn start_sandbox(&mut self) {
        let sandbox = seckill_sandbox::Sandbox::build(seckill_sandbox::SandboxConfig {
            listen: self.sandbox_addr,
            webhook_url: Some(self.webhook_url.clone()),
            ..seckill_sandbox::SandboxConfig::default()
        })
        .await
        .expect("the sandbox starts");
        self.running = Some(AbortOnDropHandle::new(tokio::spawn(sandbox.run(CancellationToken::new()))));
    }

    /// The provider becomes unreachable.
    fn stop_sandbox(&mut self) {
        self.running = None;
    }

    /// A priced voucher whose orders have `payment_seconds` to be paid.
    async fn voucher(&self, payment_seconds: u32) -> String {
        let now = Utc::now();
        self.platform
            .create_voucher_from(json!({
                "stock": 10, "per_user_limit": 1, "begins_at": now - chrono::Duration::seconds(1),
                "ends_at": now + chrono::Duration::hours(1), "payment_seconds": payment_seconds,
                "title": "Half-price lamp", "price": PRICE, "currency": "EUR",
            }))
            .await
    }

    /// `user`'s created order of `voucher`.
    async fn created(&self, voucher: &str, user: &str) -> String {
        let (status, body) = self.platform.order(voucher, user).await;
        assert_eq!(status, StatusCode::ACCEPTED, "{body}");
        let order = body["order_id"].as_str().expect("order_id").to_owned();
        assert_eq!(self.platform.wait_final(&order).await["status"], "CREATED");
        order
    }

    /// The owner asks to pay: the checkout session's id.
    async fn checkout(&self, order: &str, user: &str) -> String {
        let (status, body) = self.platform.post(&format!("/api/v1/orders/{order}/payment"), Some(user), None).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert!(body["checkout_url"].as_str().is_some_and(|url| url.contains("/checkout/cs_")), "{body}");
        body["payment_id"].as_str().expect("a session id").to_owned()
    }

    /// The session as the provider has it, its intent expanded.
    async fn session(&self, id: &str) -> Value {
        let url = format!("{}/v1/checkout/sessions/{id}", self.sandbox);
        let read = self.platform.http.get(url).query(&[("expand[]", "payment_intent")]).bearer_auth(KEY);
        read.send().await.expect("the sandbox answers").json().await.expect("json")
    }

    /// The buyer pays `session`: the intent it made, None when refused.
    async fn pay(&self, session: &str) -> Option<String> {
        let url = format!("{}/sandbox/checkout/sessions/{session}/pay", self.sandbox);
        let answer = self.platform.http.post(url).send().await.expect("the sandbox answers");
        if answer.status() != StatusCode::OK {
            return None;
        }
        self.session(session).await["payment_intent"]["id"].as_str().map(str::to_owned)
    }

    /// A second session for `order`, opened at the provider for `amount`
    /// (a buyer's other tab, or a session of an older release).
    async fn another_session(&self, voucher: &str, order: &str, amount: u64) -> String {
        let expires = Utc::now().timestamp() + 31 * 60;
        let form = [
            ("mode", "payment".to_owned()),
            ("line_items[0][price_data][currency]", "eur".to_owned()),
            ("line_items[0][price_data][unit_amount]", amount.to_string()),
            ("line_items[0][price_data][product_data][name]", "Half-price lamp".to_owned()),
            ("line_items[0][quantity]", "1".to_owned()),
            ("metadata[order_id]", order.to_owned()),
            ("metadata[voucher_id]", voucher.to_owned()),
            ("payment_intent_data[metadata][order_id]", order.to_owned()),
            ("payment_intent_data[metadata][voucher_id]", voucher.to_owned()),
            ("success_url", "http://127.0.0.1:9/sale".to_owned()),
            ("expires_at", expires.to_string()),
        ];
        let url = format!("{}/v1/checkout/sessions", self.sandbox);
        let answer = self.platform.http.post(url).bearer_auth(KEY).form(&form).send().await.expect("answers");
        assert_eq!(answer.status(), StatusCode::OK);
        let body: Value = answer.json().await.expect("json");
        body["id"].as_str().expect("an id").to_owned()
    }

    async fn switches(&self, settings: Value) {
        let url = format!("{}/sandbox/settings", self.sandbox);
        let answer = self.platform.http.post(url).json(&settings).send().await.expect("answers");
        assert_eq!(answer.status(), StatusCode::OK, "{settings}");
    }

    async fn ledger(&self) -> Value {
        let url = format!("{}/sandbox/ledger", self.sandbox);
        self.platform.http.get(url).send().await.expect("answers").json().await.expect("json")
    }

    /// The refunds the provider holds for `payment`, and the idempotency
    /// keys they were asked for under.
    async fn refunds_of(&self, payment: &str) -> (Vec<Value>, Vec<Value>) {
        let ledger = self.ledger().await;
        let entry = ledger["refunds_by_payment_intent"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|entry| entry["payment_intent"] == payment)
            .cloned()
            .unwrap_or_default();
        let refunds = entry["refunds"].as_array().cloned().unwrap_or_default();
        let keys = entry["attempts"]["idempotency_keys"].as_array().cloned().unwrap_or_default();
        (refunds, keys)
    }

    /// The orders topic's records of `order`, once `enough` accepts them.
    async fn outcomes(&self, order: &str, enough: impl Fn(&[Envelope]) -> bool) -> Vec<Envelope> {
        let orders = self.platform.kafka.topics().orders;
        let of_order = |read: &[seckill_kafka::OwnedMessage]| -> Vec<Envelope> {
            read.iter()
                .filter_map(|m| Envelope::decode(seckill_kafka::Message::payload(m)?).ok())
                .filter(|e| {
                    e.event.order().map(|o| o.order_id.to_string()).as_deref() == Some(order) || names(e, order)
                })
                .collect()
        };
        let read = self.platform.read_topic(&orders, |read| enough(&of_order(read))).await;
        of_order(&read)
    }

    /// A counter of the ingress's metrics, summed over matching series.
    async fn ingress_metric(&self, name: &str, labels: &str) -> f64 {
        self.metric(&self.platform.base, name, labels).await
    }

    /// A counter of the processor's metrics, summed over matching series.
    async fn processor_metric(&self, name: &str, labels: &str) -> f64 {
        self.metric(&format!("http://{}", self.platform.processor_addr), name, labels).await
    }

    async fn metric(&self, service: &str, name: &str, labels: &str) -> f64 {
        let text = self.platform.http.get(format!("{service}/metrics")).send().await.expect("answers");
        let text = text.text().await.expect("text");
        text.lines()
            .filter(|line| line.starts_with(name) && line.contains(labels))
            .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    }
}

/// Whether a payment record names `order`.
fn names(envelope: &Envelope, order: &str) -> bool {
    match &envelope.event {
        Event::RefundRequested(r) => r.order_id.to_string() == order,
        Event::PaymentRefunded(r) => r.order_id.to_string() == order,
        _ => false,
    }
}

fn refunded(records: &[Envelope]) -> Vec<&seckill_core::event::PaymentRefunded> {
    records
        .iter()
        .filter_map(|e| match &e.event {
            Event::PaymentRefunded(r) => Some(r),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_voucher_whose_largest_order_the_provider_would_refuse_is_refused() {
    let paying = Paying::start().await;
    let now = Utc::now();
    let request = |per_user_limit: u32| {
        json!({
            "stock": 10, "per_user_limit": per_user_limit, "begins_at": now, "ends_at": now + chrono::Duration::hours(1),
            "payment_seconds": 60, "price": 40_000_000, "currency": "EUR",
        })
    };
    let (status, body) = paying.platform.post("/api/v1/vouchers", None, Some(request(3))).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("amount_too_large")),
        "{body}"
    );
    let (status, list) = paying.platform.get(&format!("{}/api/v1/vouchers", paying.platform.base)).await;
    assert_eq!(status, StatusCode::OK);
    assert!(list["vouchers"].as_array().is_some_and(Vec::is_empty), "nothing was created: {list}");
    // Two units owe 80,000,000 minor units: within one payment.
    let (status, body) = paying.platform.post("/api/v1/vouchers", None, Some(request(2))).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_an_order_closes_its_checkout_at_the_provider() {
    let paying = Paying::start().await;
    let voucher = paying.voucher(120).await;
    let order = paying.created(&voucher, "changed-mind").await;
    let session = paying.checkout(&order, "changed-mind").await;
    assert_eq!(paying.checkout(&order, "changed-mind").await, session, "asking again answers the same checkout");
    let row = paying.platform.wait_order(&order, |row| row["checkout_id"].is_string()).await;
    assert_eq!(row["checkout_id"], session.as_str(), "the view records the order's checkout");

    let (status, body) =
        paying.platform.post(&format!("/api/v1/orders/{order}/cancel"), Some("changed-mind"), None).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    assert_eq!(paying.platform.wait_order(&order, |row| row["status"] != "CREATED").await["status"], "CANCELLED");
    // The tab left open cannot take the money any more.
    eventually(|| async { (paying.session(&session).await["status"] == "expired").then_some(()) }).await;
    assert_eq!(paying.pay(&session).await, None, "an expired checkout takes no money");
    let (status, body) =
        paying.platform.post(&format!("/api/v1/orders/{order}/payment"), Some("changed-mind"), None).await;
    assert_eq!((status, body["error"].as_str()), (StatusCode::CONFLICT, Some("not_payable")), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_checkout_paid_as_its_order_closed_is_refunded_once_without_its_callback() {
    let paying = Paying::start().await;
    let voucher = paying.voucher(120).await;
    let order = paying.created(&voucher, "quick-tab").await;
    let session = paying.checkout(&order, "quick-tab").await;
    paying.platform.wait_order(&order, |row| row["checkout_id"] == session.as_str()).await;
    // The buyer pays; the callback is lost; the order is cancelled before
    // anyone hears of the payment.
    paying.switches(json!({ "drop_webhooks": 100 })).await;
    let payment = paying.pay(&session).await.expect("paid");
    let (status, body) = paying.platform.post(&format!("/api/v1/orders/{order}/cancel"), Some("quick-tab"), None).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    assert_eq!(paying.platform.wait_order(&order, |row| row["status"] != "CREATED").await["status"], "CANCELLED");
    // Closing the order's checkout finds the payment, and it is given back.
    let records = paying.outcomes(&order, |records| !refunded(records).is_empty()).await;
    let refunds = refunded(&records);
    assert_eq!(refunds.len(), 1, "one refund logged");
    assert_eq!(refunds[0].payment_id, payment);
    let (at_provider, keys) = paying.refunds_of(&payment).await;
    assert_eq!((at_provider.len(), keys.len()), (1, 1), "one refund, asked under one key: {at_provider:?} {keys:?}");
    assert_eq!(at_provider[0]["id"], refunds[0].refund_id.as_str());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refunded_payment_does_not_hold_its_order_open_past_pay_by() {
    let paying = Paying::start().await;
    let voucher = paying.voucher(6).await;
    let order = paying.created(&voucher, "short-changed").await;
    // A checkout the platform recorded, paid for less than the order owes
    // (a session opened before a price change, say).
    let short = paying.another_session(&voucher, &order, PRICE - 1).await;
    let opened = CheckoutOpened {
        order_id: order.parse().expect("an order id"),
        voucher_id: voucher.parse().expect("a voucher id"),
        session_id: short.clone(),
        opened_at: Utc::now(),
        expires_at: Utc::now() + chrono::Duration::minutes(31),
    };
    let sales = paying.platform.kafka.topics().sales;
    paying.platform.producer().send(&sales, &Envelope::new(Event::CheckoutOpened(opened))).await.expect("logged");
    let payment = paying.pay(&short).await.expect("paid");
    let records = paying.outcomes(&order, |records| !refunded(records).is_empty()).await;
    assert_eq!(refunded(&records)[0].payment_id, payment, "the short payment is given back");
    // At its pay_by the order closes: the refunded payment pays nothing,
    // and is not reported again and again.
    let row = paying.platform.wait_order(&order, |row| row["status"] != "CREATED").await;
    assert_eq!(row["status"], "CANCELLED", "{row}");
    let pay_by: chrono::DateTime<Utc> = row["pay_by"].as_str().expect("pay_by").parse().expect("a time");
    let cancelled_at: chrono::DateTime<Utc> =
        row["cancelled_at"].as_str().expect("cancelled_at").parse().expect("a time");
    assert!(cancelled_at - pay_by < chrono::Duration::seconds(10), "closed soon after pay_by: {row}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refund_counts_only_once_the_provider_says_it_succeeded() {
    let paying = Paying::start().await;
    let voucher = paying.voucher(120).await;
    let order = paying.created(&voucher, "twice").await;
    let session = paying.checkout(&order, "twice").await;
    paying.pay(&session).await.expect("paid");
    paying.platform.wait_order(&order, |row| row["status"] == "PAID").await;
    // Refunds go pending and then fail, until the provider is fixed.
    paying.switches(json!({ "pending_refunds_ms": 300, "fail_pending_refunds": true })).await;
    let second = paying.another_session(&voucher, &order, PRICE).await;
    let duplicate = paying.pay(&second).await.expect("paid twice");
    let failed = eventually(|| async {
        let (refunds, _) = paying.refunds_of(&duplicate).await;
        (refunds.iter().filter(|r| r["status"] == "failed").count() >= 2).then_some(refunds)
    })
    .await;
    assert!(failed.iter().all(|r| r["status"] != "succeeded"));
    let records = paying.outcomes(&order, |records| records.iter().any(|e| names(e, &order))).await;
    assert!(refunded(&records).is_empty(), "a refund that failed was never logged as made");
    let fixed_at = Utc::now();
    paying.switches(json!({ "fail_pending_refunds": false })).await;
    let records = paying.outcomes(&order, |records| !refunded(records).is_empty()).await;
    let refunds = refunded(&records);
    assert_eq!(refunds.len(), 1);
    assert!(refunds[0].refunded_at > fixed_at, "logged only once the provider said it succeeded");
    let (at_provider, _) = paying.refunds_of(&duplicate).await;
    let succeeded: Vec<&Value> = at_provider.iter().filter(|r| r["status"] == "succeeded").collect();
    assert_eq!(succeeded.len(), 1, "exactly one refund succeeded: {at_provider:?}");
    assert_eq!(succeeded[0]["id"], refunds[0].refund_id.as_str());
    assert!(at_provider.iter().all(|r| matches!(r["status"].as_str(), Some("succeeded" | "failed"))));
}

/// A bank's refund can stay `pending` for days. Followed a few seconds in
/// its batch, it is then kept in the store, so the next refund of its
/// partition (the same voucher) is made and logged while it is still
/// pending; it is logged itself, once, when the provider says it succeeded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refund_pending_for_long_holds_no_other_refund_behind_it() {
    let paying = Paying::start().await;
    let voucher = paying.voucher(300).await;
    let mut paid = Vec::new();
    for user in ["slow", "quick"] {
        let order = paying.created(&voucher, user).await;
        let session = paying.checkout(&order, user).await;
        paying.pay(&session).await.expect("paid");
        paying.platform.wait_order(&order, |row| row["status"] == "PAID").await;
        paid.push(order);
    }
    let (slow, quick) = (&paid[0], &paid[1]);
    // The slow order's duplicate payment is refunded by a bank that keeps
    // the refund pending for 20 s.
    paying.switches(json!({ "pending_refunds_ms": 20_000 })).await;
    let second = paying.another_session(&voucher, slow, PRICE).await;
    let slow_duplicate = paying.pay(&second).await.expect("paid twice");
    eventually(|| async {
        let (refunds, _) = paying.refunds_of(&slow_duplicate).await;
        refunds.iter().any(|r| r["status"] == "pending").then_some(())
    })
    .await;
    paying.switches(json!({ "pending_refunds_ms": 0 })).await;
    let third = paying.another_session(&voucher, quick, PRICE).await;
    let quick_duplicate = paying.pay(&third).await.expect("paid twice");

    let records = paying.outcomes(quick, |records| !refunded(records).is_empty()).await;
    assert_eq!(refunded(&records)[0].payment_id, quick_duplicate);
    let (slow_refunds, _) = paying.refunds_of(&slow_duplicate).await;
    assert!(
        slow_refunds.iter().all(|r| r["status"] == "pending"),
        "the quick refund was logged while the slow one was still pending: {slow_refunds:?}"
    );
    let slow_records = paying.outcomes(slow, |records| records.iter().any(|e| names(e, slow))).await;
    assert!(refunded(&slow_records).is_empty(), "a pending refund is not logged as made");

    let records = paying.outcomes(slow, |records| !refunded(records).is_empty()).await;
    let refunds = refunded(&records);
    let (at_provider, keys) = paying.refunds_of(&slow_duplicate).await;
    assert_eq!(at_provider.len(), 1, "refunded once at the provider: {at_provider:?}");
    assert_eq!(at_provider[0]["status"], "succeeded");
    assert!(refunds.iter().all(|r| r.refund_id == at_provider[0]["id"].as_str().unwrap_or_default()));
    assert_eq!(keys.len(), 1, "asked for under one key: {keys:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callbacks_the_platform_has_no_use_for_are_acknowledged_and_change_nothing() {
    let paying = Paying::start().await;
    let voucher = paying.voucher(120).await;
    let order = paying.created(&voucher, "bystander").await;
    let session = paying.checkout(&order, "bystander").await;
    let deliver = |event: Value| {
        let body = event.to_string();
        let now = Utc::now().timestamp();
        let signature = seckill_payments::signature::sign(SECRET, now, body.as_bytes());
        let url = format!("{}/api/v1/payments/webhook", paying.platform.base);
        paying.platform.http.post(url).header("stripe-signature", signature).body(body).send()
    };
    let completed = |id: &str, session: &str, livemode: bool| {
        json!({
            "id": id, "object": "event", "type": "checkout.session.completed", "created": Utc::now().timestamp(),
            "livemode": livemode, "api_version": seckill_payments::STRIPE_VERSION,
            "data": {"object": {
                "id": session, "object": "checkout.session", "status": "complete", "payment_status": "paid",
                "created": 1, "expires_at": 2, "livemode": livemode, "payment_intent": "pi_made_up",
                "client_reference_id": order, "metadata": {"order_id": order, "voucher_id": voucher},
            }}
        })
    };
    let events = [
        // The other mode than the key's: a live event for a test key.
        completed("evt_live_mode", &session, true),
        // A session the provider never opened.
        completed("evt_unknown_session", "cs_test_never_opened", false),
        // A type the platform does not use.
        json!({"id": "evt_customer", "object": "event", "type": "customer.created", "created": 1, "livemode": false,
               "data": {"object": {"id": "cus_1", "object": "customer"}}}),
    ];
    for event in events {
        let answer = deliver(event).await.expect("the ingress answers");
        assert_eq!(answer.status(), StatusCode::OK, "a provider retries anything else");
        let body: Value = answer.json().await.expect("json");
        assert!(body["ignored"].is_string(), "{body}");
    }
    assert_eq!(paying.ingress_metric("seckill_webhooks_total", "outcome=\"ignored\"").await, 3.0);
    assert_eq!(paying.ingress_metric("seckill_webhooks_total", "outcome=\"accepted\"").await, 0.0);
    // Nothing reached the log: the order is still unpaid and its checkout
    // still open.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (_, row) = paying.platform.get(&format!("{}/api/v1/orders/{order}", paying.platform.base)).await;
    assert_eq!(row["status"], "CREATED", "{row}");
    assert_eq!(paying.session(&session).await["status"], "open");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_unreachable_at_pay_by_keeps_the_order_open_and_is_asked_again() {
    let mut paying = Paying::start().await;
    let voucher = paying.voucher(3).await;
    let order = paying.created(&voucher, "patient").await;
    let session = paying.checkout(&order, "patient").await;
    let row = paying.platform.wait_order(&order, |row| row["checkout_id"] == session.as_str()).await;
    let pay_by: chrono::DateTime<Utc> = row["pay_by"].as_str().expect("pay_by").parse().expect("a time");
    paying.stop_sandbox();
    // Past pay_by the order stays open: nobody can say its checkout was
    // not paid, nor expire it.
    let after = (pay_by - Utc::now()).to_std().unwrap_or_default() + Duration::from_secs(3);
    tokio::time::sleep(after).await;
    let (_, row) = paying.platform.get(&format!("{}/api/v1/orders/{order}", paying.platform.base)).await;
    assert_eq!(row["status"], "CREATED", "kept open while the provider cannot be asked: {row}");
    let errors = paying.processor_metric("seckill_payment_reconciliations_total", "result=\"error\"").await;
    assert!(errors >= 2.0, "asked again and again: {errors}");
    // The provider back (this sandbox forgot the session: it can take no
    // payment), the order closes on the next sweep.
    paying.start_sandbox().await;
    let row = paying.platform.wait_order(&order, |row| row["status"] != "CREATED").await;
    assert_eq!((row["status"].as_str(), row["reason"].as_str()), (Some("CANCELLED"), Some("expired")), "{row}");
}
