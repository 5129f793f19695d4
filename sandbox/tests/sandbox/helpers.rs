//! A sandbox per test, a webhook receiver per test, and polling with a
//! deadline instead of sleeps.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use seckill_payments::{NewIntent, PaymentIntent, Provider, ProviderSettings};
use seckill_sandbox::{Sandbox, SandboxConfig};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use warp::Filter;

/// How long a condition may take to come true.
const DEADLINE: Duration = Duration::from_secs(10);

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

impl TestSandbox {
    /// Delivers to `webhook_url`; `tweak` adjusts the rest.
    pub(crate) async fn start(webhook_url: Option<String>, tweak: impl FnOnce(&mut SandboxConfig)) -> Self {
        let mut config = SandboxConfig::local(webhook_url);
        config.webhook_retry_ms = 10;
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

    /// An intent for `order_id`.
    pub(crate) async fn create(&self, order_id: &str) -> PaymentIntent {
        let request = NewIntent {
            amount: 2_500,
            currency: "eur".to_owned(),
            order_id: order_id.to_owned(),
            voucher_id: "7".to_owned(),
            return_url: Some("http://shop.test/return?from=checkout".to_owned()),
        };
        self.provider.create_intent(&request, &format!("create-{order_id}")).await.expect("created")
    }

    /// Pays or declines (`action`) through the test route.
    pub(crate) async fn settle(&self, id: &str, action: &str) -> reqwest::Response {
        let url = format!("{}/sandbox/payment_intents/{id}/{action}", self.base_url);
        self.http.post(url).send().await.expect("sandbox answers")
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
        let deadline = Instant::now() + DEADLINE;
        loop {
            let ledger = self.ledger().await;
            if ledger["webhooks"]["pending"] == 0 {
                return ledger["webhooks"].clone();
            }
            assert!(Instant::now() < deadline, "webhooks still pending: {}", ledger["webhooks"]);
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
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

    pub(crate) fn failures_left(&self) -> u32 {
        self.failures.load(Ordering::SeqCst)
    }
}
