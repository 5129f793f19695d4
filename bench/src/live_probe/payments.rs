//! Paid orders: every order of a priced sale paid through the payment
//! provider's sandbox, and how soon after each payment its owner sees it
//! PAID.
//!
//! For each order, `concurrency` at a time, its owner asks the ingress for
//! the payment (`POST /api/v1/orders/{id}/payment`), parks a long-poll that
//! the ingress answers as soon as the order's status is no longer CREATED
//! (`GET /api/v1/orders/{id}?wait=30s&status=CREATED`), and pays at the
//! sandbox's test route. The sandbox answers with the paid intent, then
//! delivers the signed `checkout.session.completed` callback to the ingress
//! from its own queue, as a provider does (32 deliveries at once). The
//! figure is the time from the sandbox's answer to the long-poll's: the
//! callback delivered, verified and logged, the processor's `OrderPaid`,
//! and the ingress's follower waking the owner's request. An order still
//! PENDING when its payment is asked for is waited on first.

use std::collections::BTreeMap;
use std::pin::pin;
use std::time::{Duration, Instant};

use futures::stream::{self, StreamExt};
use reqwest::StatusCode;

use super::quantiles;

/// Where the probe sends its requests.
#[derive(Debug)]
pub(crate) struct Target {
    /// The ingress.
    pub(crate) url: String,
    /// The payment provider's sandbox.
    pub(crate) sandbox: String,
    /// Longest one order may take from its payment to visible PAID.
    pub(crate) wait: Duration,
}

/// One long-poll's wait (the ingress allows at most 30 s).
const LONG_POLL: &str = "30s";

/// How the probe learns that an order is PAID, for the report.
const VISIBILITY: &str = "long-poll: GET /api/v1/orders/{id}?wait=30s&status=CREATED, answered as soon as the \
                          order leaves CREATED; parked while the payment is made";

/// How long one paid order's steps took, in milliseconds.
#[derive(Debug)]
struct Timings {
    /// Asking the ingress for the payment (the provider creating it),
    /// including the wait of an order still PENDING.
    ask: f64,
    /// Whether the order was still PENDING when first asked.
    waited_pending: bool,
    /// Paying at the sandbox, to its answer.
    pay: f64,
    /// The sandbox's answer to the owner's long-poll answering PAID
    /// (negative: the long-poll answered first).
    visible: f64,
}

/// What became of one order.
#[derive(Debug)]
enum Outcome {
    /// Paid, and seen PAID by its owner.
    Visible(Timings),
    /// Paid at the sandbox, never seen PAID: why.
    Unseen(String),
    /// Not paid: the step that failed.
    Failed(String),
}

/// Pays every `token order_id` line, `concurrency` orders at a time, and
/// reports (JSON).
pub(crate) async fn run(target: &Target, orders: &[String], concurrency: usize) -> anyhow::Result<serde_json::Value> {
    let concurrency = concurrency.max(1);
    // Each order has two requests out at once: its long-poll and its payment.
    let client =
        reqwest::Client::builder().pool_max_idle_per_host(2 * concurrency).timeout(Duration::from_secs(45)).build()?;
    let started = Instant::now();
    let outcomes: Vec<Outcome> =
        stream::iter(orders).map(|line| pay(&client, target, line)).buffer_unordered(concurrency).collect().await;
    let elapsed = started.elapsed().as_secs_f64();
    let webhooks = settled_webhooks(&client, &target.sandbox).await?;

    let (mut paid, mut waited_pending, mut errors) = (0, 0, BTreeMap::<String, usize>::new());
    let (mut latencies, mut asks, mut pays) = (Vec::new(), Vec::new(), Vec::new());
    for outcome in outcomes {
        match outcome {
            Outcome::Visible(timings) => {
                paid += 1;
                waited_pending += usize::from(timings.waited_pending);
                latencies.push(timings.visible);
                asks.push(timings.ask);
                pays.push(timings.pay);
            }
            Outcome::Unseen(reason) => {
                paid += 1;
                *errors.entry(reason).or_default() += 1;
            }
            Outcome::Failed(reason) => *errors.entry(reason).or_default() += 1,
        }
    }
    let early = latencies.iter().filter(|ms| **ms < 0.0).count();
    let visible = latencies.len();
    Ok(serde_json::json!({
        "orders": orders.len(),
        "concurrency": concurrency,
        "paid": paid,
        "visible": visible,
        "elapsed_s": elapsed,
        "payments_per_s": visible as f64 / elapsed.max(1e-9),
        "visibility": VISIBILITY,
        "pay_to_paid_visible_ms": quantiles(latencies.into_iter().map(|ms| ms.max(0.0)).collect()),
        "visible_before_pay_answer": early,
        "ask_ms": quantiles(asks),
        "asked_while_pending": waited_pending,
        "pay_ms": quantiles(pays),
        "errors": errors,
        "webhooks": webhooks,
    }))
}

/// One order: asks for its payment, pays it with its long-poll parked, and
/// times the long-poll's PAID answer against the payment's.
async fn pay(client: &reqwest::Client, target: &Target, line: &str) -> Outcome {
    let Some((token, order)) = line.split_once(' ') else {
        return Outcome::Failed("orders_file_line".to_owned());
    };
    let asked = Instant::now();
    let deadline = asked + target.wait;
    let (payment, waited_pending) = match ask(client, target, token, order, deadline).await {
        Ok(payment) => payment,
        Err(reason) => return Outcome::Failed(reason),
    };
    let sent = Instant::now();
    let mut seen = pin!(paid_visible(client, target, token, order, deadline));
    let mut settled = pin!(settle(client, &target.sandbox, &payment));
    // The long-poll runs beside the payment; a payment refused ends both.
    let (paid_at, seen) = tokio::select! {
        paid = &mut settled => match paid {
            Ok(at) => (at, seen.await),
            Err(reason) => return Outcome::Failed(reason),
        },
        seen = &mut seen => match settled.await {
            Ok(at) => (at, seen),
            Err(reason) => return Outcome::Failed(reason),
        },
    };
    let millis = |later: Instant, earlier: Instant| match later.checked_duration_since(earlier) {
        Some(after) => after.as_secs_f64() * 1e3,
        None => -(earlier - later).as_secs_f64() * 1e3,
    };
    match seen {
        Ok(seen_at) => Outcome::Visible(Timings {
            ask: millis(sent, asked),
            waited_pending,
            pay: millis(paid_at, sent),
            visible: millis(seen_at, paid_at),
        }),
        Err(reason) => Outcome::Unseen(reason),
    }
}

/// The order's payment id, once it is CREATED (a PENDING one is waited
/// on), and whether it was waited on.
async fn ask(
    client: &reqwest::Client,
    target: &Target,
    token: &str,
    order: &str,
    deadline: Instant,
) -> Result<(String, bool), String> {
    let mut waited = false;
    loop {
        let response = client
            .post(format!("{}/api/v1/orders/{order}/payment", target.url))
            .bearer_auth(token)
            .send()
            .await
            .map_err(|_| "ask_transport".to_owned())?;
        let status = response.status();
        let body: serde_json::Value = response.json().await.unwrap_or_default();
        if status.is_success() {
            let payment = body["payment_id"].as_str().ok_or_else(|| "ask_no_payment_id".to_owned())?;
            return Ok((payment.to_owned(), waited));
        }
        // `409 not_payable` names the order's status beside the code.
        let pending = status == StatusCode::CONFLICT && body["status"] == "PENDING";
        if !pending || Instant::now() >= deadline {
            return Err(format!("ask_{}", body["error"].as_str().unwrap_or(status.as_str())));
        }
        // Not decided yet: wait for it to leave PENDING, then ask again.
        waited = true;
        client
            .get(format!("{}/api/v1/orders/{order}?wait={LONG_POLL}&status=PENDING", target.url))
            .bearer_auth(token)
            .send()
            .await
            .map_err(|_| "ask_transport".to_owned())?;
    }
}

/// Pays at the sandbox; when its answer (the paid session) arrived.
async fn settle(client: &reqwest::Client, sandbox: &str, payment: &str) -> Result<Instant, String> {
    let response = client
        .post(format!("{sandbox}/sandbox/checkout/sessions/{payment}/pay"))
        .send()
        .await
        .map_err(|_| "pay_transport".to_owned())?;
    let at = Instant::now();
    if !response.status().is_success() {
        return Err(format!("pay_{}", response.status().as_u16()));
    }
    let session: serde_json::Value = response.json().await.map_err(|_| "pay_body".to_owned())?;
    match session["payment_status"].as_str() {
        Some("paid") => Ok(at),
        other => Err(format!("pay_{}", other.unwrap_or("unknown"))),
    }
}

/// When the owner's long-poll answered the order PAID.
async fn paid_visible(
    client: &reqwest::Client,
    target: &Target,
    token: &str,
    order: &str,
    deadline: Instant,
) -> Result<Instant, String> {
    loop {
        let response = client
            .get(format!("{}/api/v1/orders/{order}?wait={LONG_POLL}&status=CREATED", target.url))
            .bearer_auth(token)
            .send()
            .await
            .map_err(|_| "unseen_transport".to_owned())?;
        let at = Instant::now();
        if !response.status().is_success() {
            return Err(format!("unseen_{}", response.status().as_u16()));
        }
        let body: serde_json::Value = response.json().await.map_err(|_| "unseen_body".to_owned())?;
        match body["status"].as_str() {
            Some("PAID") => return Ok(at),
            Some("CREATED") if Instant::now() < deadline => {}
            Some("CREATED") => return Err("unseen_still_created".to_owned()),
            other => return Err(format!("unseen_became_{}", other.unwrap_or("unknown"))),
        }
    }
}

/// The sandbox's webhook counts once nothing is left to deliver (or after
/// 30 s): `delivered` counts every `2xx` answer.
async fn settled_webhooks(client: &reqwest::Client, sandbox: &str) -> anyhow::Result<serde_json::Value> {
    let give_up = Instant::now() + Duration::from_secs(30);
    loop {
        let ledger: serde_json::Value =
            client.get(format!("{sandbox}/sandbox/ledger")).send().await?.error_for_status()?.json().await?;
        let counts = ledger["webhooks"].clone();
        if counts["pending"].as_u64() == Some(0) || Instant::now() >= give_up {
            return Ok(counts);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
