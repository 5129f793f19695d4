//! A sandbox per test, a webhook receiver per test, and polling with a
//! deadline instead of sleeps.

use std::future::Future;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use seckill_payments::{CheckoutSession, NewCheckout, PaymentIntent, Provider, ProviderSettings};
use seckill_sandbox::{Sandbox, SandboxConfig};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use warp::Filter;

/// How long a condition may take to come true.
pub(crate) const DEADLINE: Duration = Duration::from_secs(10);

/// A sandbox serving until dropped.
pub(crate) struct TestSandbox {
    pub(crate) base_url: String,
    pub(crate) provider: Provider,
    pub(crate) http: reqwest::Client,
    pub(crate) config: SandboxConfig,
    stop: CancellationToken,
}

impl Drop for TestSandbox {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// An answer: status, `Idempotent-Replayed`, and the JSON body.
#[derive(Debug)]
pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) replayed: bool,
    pub(crate) body: serde_json::Value,
}

impl Answer {
    /// The Stripe error code, or "" when there is none.
    pub(crate) fn code(&self) -> &str {
        self.body["error"]["code"].as_str().unwrap_or_default()
    }
}

impl TestSandbox {
    /// Delivers to `webhook_url`; `tweak` adjusts the rest.
    pub(crate) async fn start(webhook_url: Option<String>, tweak: impl FnOnce(&mut SandboxConfig)) -> Self {
        let mut config = SandboxConfig::local(webhook_url);
        config.webhook_retry_ms = 10;
        // Every event the sandbox can send, not only the platform's.
        config.enabled_events = vec!["*".to_owned()];
        tweak(&mut config);
        let sandbox = Sandbox::build(config.clone()).await.expect("sandbox binds");
        let base_url = format!("http://{}", sandbox.local_addr());
        let stop = CancellationToken::new();
        tokio::spawn(sandbox.run(stop.clone()));
        let provider = Provider::new(ProviderSettings {
            base_url: base_url.clone(),
            api_key: config.api_key.clone(),
            timeout: Duration::from_secs(5),
        })
        .expect("valid settings");
        let http = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().expect("client");
        Self { base_url, provider, http, config, stop }
    }

    /// POSTs `form` to `/v1/<path>` with the key, under `idempotency_key`.
    pub(crate) async fn post(&self, path: &str, form: &[(&str, String)], idempotency_key: Option<&str>) -> Answer {
        let mut request = self.http.post(format!("{}/v1/{path}", self.base_url)).bearer_auth(&self.config.api_key);
        if let Some(key) = idempotency_key {
            request = request.header("Idempotency-Key", key);
        }
        // An empty form still sends `Content-Length: 0`, as the sandbox wants.
        answer(request.form(form).send().await.expect("the sandbox answers")).await
    }

    /// GETs `/v1/<path>` with `query` and the key.
    pub(crate) async fn get(&self, path: &str, query: &[(&str, &str)]) -> Answer {
        let request = self.http.get(format!("{}/v1/{path}", self.base_url)).bearer_auth(&self.config.api_key);
        answer(request.query(query).send().await.expect("the sandbox answers")).await
    }

    /// A bare intent for `order_id`, created as the platform used to.
    pub(crate) async fn create(&self, order_id: &str) -> PaymentIntent {
        let form = [
            ("amount", "2500".to_owned()),
            ("currency", "eur".to_owned()),
            ("metadata[order_id]", order_id.to_owned()),
            ("metadata[voucher_id]", "7".to_owned()),
            ("return_url", "http://shop.test/return?from=checkout".to_owned()),
        ];
        let answer = self.post("payment_intents", &form, Some(&format!("create-{order_id}"))).await;
        assert_eq!(answer.status, 200, "{:?}", answer.body);
        serde_json::from_value(answer.body).expect("an intent")
    }

    /// A checkout session for `order_id` (2 × 12.50 EUR), through the
    /// platform's adapter, expiring `lifetime` seconds from now.
    pub(crate) async fn checkout(&self, order_id: &str, lifetime: i64) -> CheckoutSession {
        self.provider
            .create_checkout(&new_checkout(order_id, lifetime), &format!("checkout-{order_id}"))
            .await
            .expect("created")
    }

    /// Pays or declines (`action`) an intent through the test route.
    pub(crate) async fn settle(&self, id: &str, action: &str) -> reqwest::Response {
        let url = format!("{}/sandbox/payment_intents/{id}/{action}", self.base_url);
        self.http.post(url).send().await.expect("sandbox answers")
    }

    /// Pays or declines (`action`) a session through the test route.
    pub(crate) async fn settle_session(&self, id: &str, action: &str) -> Answer {
        let url = format!("{}/sandbox/checkout/sessions/{id}/{action}", self.base_url);
        answer(self.http.post(url).send().await.expect("sandbox answers")).await
    }

    /// Changes the test switches.
    pub(crate) async fn switch(&self, settings: serde_json::Value) -> serde_json::Value {
        let url = format!("{}/sandbox/settings", self.base_url);
        let response = self.http.post(url).json(&settings).send().await.expect("sandbox answers");
        assert!(response.status().is_success(), "{}", response.status());
        response.json().await.expect("the settings")
    }

    pub(crate) async fn ledger(&self) -> serde_json::Value {
        let response = self.http.get(format!("{}/sandbox/ledger", self.base_url)).send().await.expect("answers");
        response.json().await.expect("a ledger")
    }

    /// Waits until no event is queued or being delivered.
    pub(crate) async fn settled_webhooks(&self) -> serde_json::Value {
        let ledger = eventually(|| self.ledger(), |ledger| ledger["webhooks"]["pending"] == 0).await;
        ledger["webhooks"].clone()
    }
}

/// What the platform's adapter sends for `order_id`.
pub(crate) fn new_checkout(order_id: &str, lifetime: i64) -> NewCheckout {
    NewCheckout {
        unit_amount: 1_250,
        quantity: 2,
        currency: "EUR".to_owned(),
        title: "Flash sale voucher".to_owned(),
        order_id: order_id.to_owned(),
        voucher_id: "7".to_owned(),
        success_url: format!("http://shop.test/orders/{order_id}?session={{CHECKOUT_SESSION_ID}}"),
        cancel_url: "http://shop.test/sale".to_owned(),
        expires_at: chrono::Utc::now().timestamp() + lifetime,
    }
}

async fn answer(response: reqwest::Response) -> Answer {
    let status = response.status().as_u16();
    let replayed = response.headers().get("idempotent-replayed").is_some_and(|value| value == "true");
    let body = response.json().await.expect("a JSON answer");
    Answer { status, replayed, body }
}

/// Reads `read` until `done` holds of what it gives, within [`DEADLINE`].
pub(crate) async fn eventually<T: std::fmt::Debug, F: Future<Output = T>>(
    mut read: impl FnMut() -> F,
    done: impl Fn(&T) -> bool,
) -> T {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let value = read().await;
        if done(&value) {
            return value;
        }
        assert!(Instant::now() < deadline, "still not so after {DEADLINE:?}: {value:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// One request the receiver got.
#[derive(Debug, Clone)]
pub(crate) struct Received {
    pub(crate) signature: Option<String>,
    pub(crate) body: Vec<u8>,
    pub(crate) at: Instant,
}

impl Received {
    pub(crate) fn event(&self) -> seckill_payments::Event {
        serde_json::from_slice(&self.body).expect("an event")
    }

    /// The body as JSON, for what the shared type does not read.
    pub(crate) fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).expect("JSON")
    }
}

/// A webhook endpoint on a free port that records every request and
/// answers `500` to the first `failures` of them.
pub(crate) struct Receiver {
    pub(crate) url: String,
    received: Arc<Mutex<Vec<Received>>>,
    failures: Arc<AtomicU32>,
    stop: CancellationToken,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl Receiver {
    pub(crate) async fn start(failures: u32) -> Self {
        let received = Arc::new(Mutex::new(Vec::new()));
        let failures = Arc::new(AtomicU32::new(failures));
        let (record, fail) = (Arc::clone(&received), Arc::clone(&failures));
        let route = warp::path!("hook")
            .and(warp::post())
            .and(warp::header::optional::<String>("stripe-signature"))
            .and(warp::body::bytes())
            .map(move |signature: Option<String>, body: bytes::Bytes| {
                let request = Received { signature, body: body.to_vec(), at: Instant::now() };
                record.lock().expect("not poisoned").push(request);
                let failing = fail.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |left| left.checked_sub(1)).is_ok();
                let status =
                    if failing { warp::http::StatusCode::INTERNAL_SERVER_ERROR } else { warp::http::StatusCode::OK };
                warp::reply::with_status("", status)
            });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("binds");
        let url = format!("http://{}/hook", listener.local_addr().expect("bound"));
        let stop = CancellationToken::new();
        tokio::spawn(warp::serve(route).incoming(listener).graceful(stop.clone().cancelled_owned()).run());
        Self { url, received, failures, stop }
    }

    pub(crate) fn received(&self) -> Vec<Received> {
        self.received.lock().expect("not poisoned").clone()
    }

    /// The types of the events received so far, in order.
    pub(crate) fn kinds(&self) -> Vec<String> {
        self.received().iter().map(|received| received.event().kind).collect()
    }

    /// Waits until at least `count` requests arrived; returns them all.
    pub(crate) async fn wait_for(&self, count: usize) -> Vec<Received> {
        let deadline = Instant::now() + DEADLINE;
        loop {
            let received = self.received();
            if received.len() >= count {
                return received;
            }
            assert!(Instant::now() < deadline, "{} of {count} webhooks arrived", received.len());
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Waits for the first event of `kind`.
    pub(crate) async fn event_of(&self, kind: &str) -> Received {
        let deadline = Instant::now() + DEADLINE;
        loop {
            if let Some(found) = self.received().into_iter().find(|received| received.event().kind == kind) {
                return found;
            }
            assert!(Instant::now() < deadline, "no {kind} among {:?}", self.kinds());
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    pub(crate) fn failures_left(&self) -> u32 {
        self.failures.load(Ordering::SeqCst)
    }
}
