//! The payment step against the provider's sandbox as a process of its
//! own: payments racing their deadline, callbacks duplicated, reordered,
//! forged, stale and lost, a wrong amount, refunds the provider refuses
//! for a minute, a callback refused while the log is down, and the
//! processor SIGKILLed while payments and refunds are on their way. Each ends with the suite's invariant check (`check`,
//! `paid`): every payment completed at the provider paid exactly one order
//! or was refunded exactly once, and the provider's books agree.

use std::collections::HashMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use reqwest::StatusCode;
use seckill_devstack::{user_token, KafkaSettings};
use serde_json::{json, Value};

use crate::check::Voucher;
use crate::checkout::{another_session, intent_id, pay_session};
use crate::cluster::{Cluster, Service, SANDBOX_SECRET};
use crate::load::{Promised, Tally};
use crate::{create_priced_voucher, place_one, settle_tally, turn};

/// The test vouchers' price, in euro cents.
const PRICE: u64 = 250;

/// A priced voucher of `stock` units, one per user, `payment_seconds` to pay.
async fn priced(cluster: &Cluster, stock: u64, payment_seconds: u32) -> Voucher {
    let id = create_priced_voucher(cluster, stock, 1, payment_seconds, PRICE).await;
    Voucher { id, limit: 1, holds: true, priced: true, queued: false, drawn: false }
}

/// An order of `user`, once created: its id and `pay_by`.
async fn created_order(cluster: &Cluster, voucher: &Voucher, user: &str, tally: &mut Tally) -> (String, DateTime<Utc>) {
    let order = place_one(cluster, &voucher.id, user, "a buyer is admitted", "payments").await;
    tally.promised.push(Promised {
        order: order.clone(),
        voucher: voucher.id.clone(),
        user: user.to_owned(),
        quantity: 1,
    });
    let row = wait_for(cluster, &order, user, |row| row["status"] != "PENDING").await;
    assert_eq!(row["status"], "CREATED", "{row}");
    assert_eq!((row["amount"].as_u64(), row["currency"].as_str()), (Some(PRICE), Some("EUR")), "{row}");
    let pay_by = row["pay_by"].as_str().expect("a priced order has a pay_by").parse().expect("a time");
    (order, pay_by)
}

/// The order as its owner reads it, once `done` says so (30 s at most).
async fn wait_for(cluster: &Cluster, order: &str, user: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    // Read at once first; then long-poll, which answers at the order's
    // next change (or after 2 s).
    let mut wait = "";
    loop {
        let response = cluster
            .http
            .get(format!("{}/api/v1/orders/{order}{wait}", cluster.url(Service::Ingress)))
            .header("authorization", format!("Bearer {}", user_token(user)))
            .send()
            .await
            .expect("the ingress answers");
        let row: Value = response.json().await.expect("json");
        if done(&row) {
            return row;
        }
        assert!(tokio::time::Instant::now() < deadline, "order {order} never got there: {row}");
        wait = "?wait=2s";
    }
}

/// The owner asks for the order's payment: its id.
async fn payment_of(cluster: &Cluster, order: &str, user: &str) -> String {
    payment_unless_closed(cluster, order, user).await.expect("the order's payment window is open")
}

/// The owner asks for the order's payment: its id, or None when the
/// order's window closed first (`409 payment_window_closed`: a window of
/// seconds can close before a loaded machine answers).
async fn payment_unless_closed(cluster: &Cluster, order: &str, user: &str) -> Option<String> {
    let response = cluster
        .http
        .post(format!("{}/api/v1/orders/{order}/payment", cluster.url(Service::Ingress)))
        .header("authorization", format!("Bearer {}", user_token(user)))
        .send()
        .await
        .expect("the ingress answers");
    let status = response.status();
    let body: Value = response.json().await.expect("json");
    if status == StatusCode::CONFLICT && body["error"] == "payment_window_closed" {
        return None;
    }
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(body["checkout_url"].as_str().is_some_and(|url| url.contains("/checkout/")), "{body}");
    Some(body["payment_id"].as_str().expect("a payment id").to_owned())
}

/// Pays the checkout `session` at the sandbox now: the intent it made
/// when the payment succeeded.
async fn pay(cluster: &Cluster, session: &str) -> Option<Value> {
    pay_session(&cluster.http, &cluster.url(Service::Payments), session).await
}

/// A second checkout of `order` opened at the provider, for `amount`.
async fn another_payment(cluster: &Cluster, voucher: &str, order: &str, amount: u64) -> String {
    another_session(&cluster.http, &cluster.url(Service::Payments), voucher, order, amount)
        .await
        .expect("the sandbox opens a second checkout")
}

async fn sandbox_settings(cluster: &Cluster, settings: Value) {
    let response = cluster
        .http
        .post(format!("{}/sandbox/settings", cluster.url(Service::Payments)))
        .json(&settings)
        .send()
        .await
        .expect("the sandbox answers");
    assert_eq!(response.status(), StatusCode::OK, "{settings}");
}

fn record_paid(tally: &mut Tally, order: &str, payment: &str) {
    tally.paid.entry(order.to_owned()).or_default().push(payment.to_owned());
}

/// A counter of the ingress's or processor's metrics, summed over series
/// whose labels contain `labels`.
async fn metric(cluster: &Cluster, service: Service, name: &str, labels: &str) -> f64 {
    let text = cluster
        .http
        .get(format!("{}/metrics", cluster.url(service)))
        .send()
        .await
        .expect("metrics answer")
        .text()
        .await
        .expect("text");
    text.lines()
        .filter(|line| line.starts_with(name) && line.contains(labels))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn payments_racing_their_deadline_either_pay_or_are_refunded_never_both() {
    let _turn = turn().await;
    let mut cluster = tokio::task::block_in_place(Cluster::start);
    let voucher = priced(&cluster, 1_000, 2).await;
    let mut tally = Tally::default();
    // Orders created one after another, so their deadlines spread over the
    // second boundaries the provider stamps payments with; each paid at its
    // deadline −50 ms … +50 ms (by this host's clock, the processor's and
    // the sandbox's).
    let mut racing = tokio::task::JoinSet::new();
    for n in 0..200 {
        let user = format!("racer-{n}");
        let (order, pay_by) = created_order(&cluster, &voucher, &user, &mut tally).await;
        let Some(payment) = payment_unless_closed(&cluster, &order, &user).await else {
            // Closed before its checkout opened: no money can move.
            racing.spawn(async move { (order, pay_by, None) });
            continue;
        };
        let offset = chrono::Duration::milliseconds((n * 37) % 101 - 50);
        let sandbox = cluster.url(Service::Payments);
        let http = cluster.http.clone();
        racing.spawn(async move {
            let wait = (pay_by + offset - Utc::now()).to_std().unwrap_or_default();
            tokio::time::sleep(wait).await;
            (order, pay_by, pay_session(&http, &sandbox, &payment).await)
        });
    }
    let (mut on_time, mut late, mut closed_first) = (0, 0, 0);
    let mut verdicts = Vec::new();
    while let Some(raced) = racing.join_next().await {
        let (order, pay_by, intent) = raced.expect("a racer");
        let Some(intent) = intent else {
            // The sweeper cancelled the payment first: no money moved.
            closed_first += 1;
            verdicts.push((order, None));
            continue;
        };
        let paid_at = intent["latest_charge"]["created"].as_i64().expect("a charge time");
        let in_time = paid_at < pay_by.timestamp();
        if in_time {
            on_time += 1;
        } else {
            late += 1;
        }
        record_paid(&mut tally, &order, intent_id(&intent));
        verdicts.push((order, Some(in_time)));
    }
    // By the provider's time, not by who reached the log first.
    let users: HashMap<&str, &str> = tally.promised.iter().map(|p| (p.order.as_str(), p.user.as_str())).collect();
    for (order, in_time) in &verdicts {
        let row = wait_for(&cluster, order, users[order.as_str()], |row| {
            matches!(row["status"].as_str(), Some("PAID" | "CANCELLED"))
        })
        .await;
        let expected = if *in_time == Some(true) { "PAID" } else { "CANCELLED" };
        assert_eq!(row["status"], expected, "order {order}, paid in time: {in_time:?}: {row}");
    }
    println!("[deadline race] 200 orders paid at pay_by -50..+50 ms: {on_time} in time (PAID), {late} late (refunded), {closed_first} closed before the payment");
    assert!(on_time > 0 && late + closed_first > 0, "both sides of the deadline were exercised");
    settle_tally(&mut cluster, &[voucher], tally, "deadline race").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duplicated_reordered_and_lost_callbacks_pay_each_order_once() {
    let _turn = turn().await;
    let mut cluster = tokio::task::block_in_place(Cluster::start);
    let voucher = priced(&cluster, 1_000, 6).await;
    let mut tally = Tally::default();
    sandbox_settings(&cluster, json!({ "duplicate_webhooks": true, "reorder_webhooks": true })).await;
    let mut twice = Vec::new();
    for n in 0..20 {
        let user = format!("twice-{n}");
        let (order, _) = created_order(&cluster, &voucher, &user, &mut tally).await;
        let payment = payment_of(&cluster, &order, &user).await;
        assert_eq!(payment_of(&cluster, &order, &user).await, payment, "one payment per order");
        let paid_payment = pay(&cluster, &payment).await.expect("paid");
        record_paid(&mut tally, &order, intent_id(&paid_payment));
        twice.push((order, user));
    }
    // Every one of them paid (by its callbacks: the reconciliation at
    // pay_by, which would pay them all anyway, is counted below).
    for (order, user) in &twice {
        let row = wait_for(&cluster, order, user, |row| row["status"] != "CREATED").await;
        assert_eq!(row["status"], "PAID", "{row}");
    }
    let ledger = crate::paid::ledger(&cluster).await;
    assert!(
        ledger["webhooks"]["reordered"].as_u64() > Some(0),
        "callbacks really arrived out of order: {}",
        ledger["webhooks"]
    );
    let duplicates = metric(&cluster, Service::Ingress, "seckill_webhooks_total", "outcome=\"duplicate\"").await;
    assert!(duplicates >= 20.0, "every callback came twice, the second answered as a duplicate: {duplicates}");
    // A lost callback: the provider completed the payment, the platform
    // never heard; before closing the order it asks, and finds it paid.
    sandbox_settings(&cluster, json!({ "duplicate_webhooks": false, "reorder_webhooks": false, "drop_webhooks": 1 }))
        .await;
    let (lost, _) = created_order(&cluster, &voucher, "lost", &mut tally).await;
    let payment = payment_of(&cluster, &lost, "lost").await;
    let paid_payment = pay(&cluster, &payment).await.expect("paid");
    record_paid(&mut tally, &lost, intent_id(&paid_payment));
    let row = wait_for(&cluster, &lost, "lost", |row| row["status"] != "CREATED").await;
    assert_eq!(
        (row["status"].as_str(), row["payment_id"].as_str()),
        (Some("PAID"), Some(intent_id(&paid_payment))),
        "{row}"
    );
    let found = metric(&cluster, Service::Processor, "seckill_payment_reconciliations_total", "result=\"paid\"").await;
    assert_eq!(found, 1.0, "the lost payment, and only it, was found by asking the provider");
    println!("[callbacks] 20 orders paid with every callback twice and reordered: {duplicates} duplicates answered at once; a dropped callback found by reconciliation");
    settle_tally(&mut cluster, &[voucher], tally, "duplicated, reordered, lost callbacks").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_stale_and_mismatched_payments_change_nothing_or_are_refunded() {
    let _turn = turn().await;
    let mut cluster = tokio::task::block_in_place(Cluster::start);
    let voucher = priced(&cluster, 1_000, 30).await;
    let mut tally = Tally::default();
    let (order, _) = created_order(&cluster, &voucher, "victim", &mut tally).await;

    // A callback claiming the order was paid, signed with the wrong
    // secret, signed too long ago, unsigned, or too big: refused, nothing
    // changes.
    let event = json!({
        "id": "evt_forged", "object": "event", "type": "payment_intent.succeeded", "created": Utc::now().timestamp(),
        "livemode": false,
        "data": { "object": { "id": "pi_forged", "object": "payment_intent", "amount": PRICE, "currency": "eur",
            "status": "succeeded", "created": Utc::now().timestamp(),
            "metadata": { "order_id": order, "voucher_id": voucher.id } } }
    });
    let body = serde_json::to_vec(&event).expect("json");
    let now = Utc::now().timestamp();
    let cases = [
        ("no_match", Some(seckill_payments::signature::sign("whsec_guessed", now, &body)), body.clone()),
        ("stale", Some(seckill_payments::signature::sign(SANDBOX_SECRET, now - 301, &body)), body.clone()),
        ("missing", None, body.clone()),
        ("malformed", Some("t=abc,v1=zz".to_owned()), body.clone()),
    ];
    for (reason, signature, body) in cases {
        let mut request = cluster.http.post(format!("{}/api/v1/payments/webhook", cluster.url(Service::Ingress)));
        if let Some(signature) = signature {
            request = request.header("stripe-signature", signature);
        }
        let response = request.body(body).send().await.expect("the ingress answers");
        assert_eq!(response.status(), StatusCode::BAD_REQUEST, "{reason}");
        let answer: Value = response.json().await.expect("json");
        assert_eq!((answer["error"].as_str(), answer["reason"].as_str()), (Some("invalid_signature"), Some(reason)));
    }
    let huge = vec![b' '; 70 * 1024];
    // Refused unread, the body leaves the connection unusable: the server
    // closes it, and a client that pooled it would send the next request
    // into the closing socket.
    let response = cluster
        .http
        .post(format!("{}/api/v1/payments/webhook", cluster.url(Service::Ingress)))
        .header("connection", "close")
        .header("stripe-signature", seckill_payments::signature::sign(SANDBOX_SECRET, now, &huge))
        .body(huge)
        .send()
        .await
        .expect("the ingress answers");
    assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
    let rejected = metric(&cluster, Service::Ingress, "seckill_webhook_rejections_total", "").await;
    assert!(rejected >= 4.0, "every refusal counted: {rejected}");

    // A payment of the wrong amount is refunded; the order can still be paid.
    let short = another_payment(&cluster, &voucher.id, &order, PRICE - 1).await;
    let paid_short = pay(&cluster, &short).await.expect("paid");
    record_paid(&mut tally, &order, intent_id(&paid_short));
    let payment = payment_of(&cluster, &order, "victim").await;
    // The real payment only once the short one is decided, so the order
    // is CREATED when it is.
    let refunded = async {
        loop {
            if metric(&cluster, Service::Processor, "seckill_refunds_total", "result=\"completed\"").await >= 1.0 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(30), refunded).await.expect("the short payment is refunded");
    let row = wait_for(&cluster, &order, "victim", |_| true).await;
    assert_eq!(row["status"], "CREATED", "a short payment pays nothing: {row}");
    let paid_payment = pay(&cluster, &payment).await.expect("paid");
    record_paid(&mut tally, &order, intent_id(&paid_payment));
    let row = wait_for(&cluster, &order, "victim", |row| row["status"] == "PAID").await;
    assert_eq!(row["payment_id"].as_str(), Some(intent_id(&paid_payment)));
    settle_tally(&mut cluster, &[voucher], tally, "forged, stale, short").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refunds_refused_for_a_minute_are_made_once_when_the_provider_is_back() {
    let _turn = turn().await;
    let mut cluster = tokio::task::block_in_place(Cluster::start);
    let voucher = priced(&cluster, 1_000, 60).await;
    let mut tally = Tally::default();
    sandbox_settings(&cluster, json!({ "fail_refunds_for_ms": 60_000 })).await;
    let started = tokio::time::Instant::now();
    for n in 0..10 {
        let user = format!("double-{n}");
        let (order, _) = created_order(&cluster, &voucher, &user, &mut tally).await;
        let payment = payment_of(&cluster, &order, &user).await;
        let paid_payment = pay(&cluster, &payment).await.expect("paid");
        record_paid(&mut tally, &order, intent_id(&paid_payment));
        let second = another_payment(&cluster, &voucher.id, &order, PRICE).await;
        let paid_second = pay(&cluster, &second).await.expect("paid");
        record_paid(&mut tally, &order, intent_id(&paid_second));
    }
    // Half-way through the outage the processor is killed and started
    // again: the refunds are driven from the log, not from its memory.
    tokio::time::sleep(Duration::from_secs(20)).await;
    let retried = metric(&cluster, Service::Processor, "seckill_refunds_total", "result=\"retried\"").await;
    assert!(retried > 0.0, "the refused refunds are asked for again");
    tokio::task::block_in_place(|| {
        cluster.kill(Service::Processor);
        cluster.start_service(Service::Processor);
    });
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    loop {
        let done = metric(&cluster, Service::Processor, "seckill_refunds_total", "result=\"completed\"").await;
        if done >= 10.0 {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "refunds done after the outage: {done} of 10");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    println!("[refund outage] 10 duplicate payments refunded {:.0} s after the first, the provider refusing for 60 s and the processor killed once", started.elapsed().as_secs_f64());
    assert!(started.elapsed() >= Duration::from_secs(55), "nothing was refunded while the provider refused");
    settle_tally(&mut cluster, &[voucher], tally, "refunds refused for a minute").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_processor_killed_among_payments_and_refunds_decides_each_once() {
    let _turn = turn().await;
    let mut cluster = tokio::task::block_in_place(Cluster::start);
    let voucher = priced(&cluster, 1_000, 30).await;
    let mut tally = Tally::default();
    // Every refund stays pending for a while, as a bank's can.
    sandbox_settings(&cluster, json!({ "pending_refunds_ms": 1_500 })).await;
    let mut orders = Vec::new();
    for n in 0..40 {
        let user = format!("killed-{n}");
        let (order, _) = created_order(&cluster, &voucher, &user, &mut tally).await;
        let payment = payment_of(&cluster, &order, &user).await;
        orders.push((order, payment));
    }
    // Payments (and, for every other order, a duplicate to refund) arrive
    // while the processor is SIGKILLed twice: between a PaymentReceived and
    // its outcome, and in the middle of refunds.
    let paying = {
        let (orders, http, sandbox, voucher) =
            (orders.clone(), cluster.http.clone(), cluster.url(Service::Payments), voucher.id.clone());
        tokio::spawn(async move {
            let mut paid = Vec::new();
            for (n, (order, payment)) in orders.into_iter().enumerate() {
                let mut payments = vec![payment];
                if n % 2 == 0 {
                    if let Some(second) = another_session(&http, &sandbox, &voucher, &order, PRICE).await {
                        payments.push(second);
                    }
                }
                for payment in payments {
                    if let Some(intent) = pay_session(&http, &sandbox, &payment).await {
                        paid.push((order.clone(), intent_id(&intent).to_owned()));
                    }
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            paid
        })
    };
    // The first kill lands among payments; the second waits for a refund
    // the provider holds `pending` (the refund worker is following it), so
    // it surely lands in the middle of one.
    tokio::time::sleep(Duration::from_millis(900)).await;
    tokio::task::block_in_place(|| {
        cluster.kill(Service::Processor);
        cluster.start_service(Service::Processor);
    });
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let pending_at_kill = loop {
        let ledger = crate::paid::ledger(&cluster).await;
        let pending = ledger["refunds"].as_array().into_iter().flatten().filter(|r| r["status"] == "pending").count();
        if pending > 0 {
            break pending;
        }
        assert!(tokio::time::Instant::now() < deadline, "no refund was ever pending at the provider");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    tokio::task::block_in_place(|| {
        cluster.kill(Service::Processor);
        cluster.start_service(Service::Processor);
    });
    for (order, payment) in paying.await.expect("the payer") {
        record_paid(&mut tally, &order, &payment);
    }
    println!(
        "[processor SIGKILL among payments and refunds] the second kill landed with {pending_at_kill} refunds pending"
    );
    settle_tally(&mut cluster, &[voucher], tally, "processor SIGKILL among payments and refunds").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refund_worker_killed_after_the_provider_refunded_refunds_once() {
    let _turn = turn().await;
    let mut cluster = tokio::task::block_in_place(Cluster::start);
    let voucher = priced(&cluster, 1_000, 60).await;
    let mut tally = Tally::default();
    // The provider makes each refund, then holds its answer back: the
    // worker is killed before it hears.
    sandbox_settings(&cluster, json!({ "refund_answer_delay_ms": 30_000 })).await;
    let (order, _) = created_order(&cluster, &voucher, "refunded", &mut tally).await;
    let payment = payment_of(&cluster, &order, "refunded").await;
    let paid_payment = pay(&cluster, &payment).await.expect("paid");
    record_paid(&mut tally, &order, intent_id(&paid_payment));
    wait_for(&cluster, &order, "refunded", |row| row["status"] == "PAID").await;
    let second = another_payment(&cluster, &voucher.id, &order, PRICE).await;
    let paid_second = pay(&cluster, &second).await.expect("paid");
    record_paid(&mut tally, &order, intent_id(&paid_second));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let ledger = crate::paid::ledger(&cluster).await;
        if ledger["refunds"].as_array().is_some_and(|refunds| !refunds.is_empty()) {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "the provider made the refund");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::task::block_in_place(|| cluster.kill(Service::Processor));
    sandbox_settings(&cluster, json!({ "refund_answer_delay_ms": 0 })).await;
    tokio::task::block_in_place(|| cluster.start_service(Service::Processor));
    // The restarted worker asks again under the same idempotency key and
    // is told of the refund already made: one refund, logged once.
    settle_tally(&mut cluster, &[voucher], tally, "refund worker killed after the provider refunded").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_payment_made_in_time_while_the_processor_is_down_pays_when_decided_late() {
    let _turn = turn().await;
    let mut cluster = tokio::task::block_in_place(Cluster::start);
    let voucher = priced(&cluster, 1_000, 3).await;
    let mut tally = Tally::default();
    let (order, pay_by) = created_order(&cluster, &voucher, "patient", &mut tally).await;
    let payment = payment_of(&cluster, &order, "patient").await;
    // The processor is gone when the buyer pays, and comes back only after
    // the deadline: the provider's time decides, not the processor's.
    tokio::task::block_in_place(|| cluster.kill(Service::Processor));
    let intent = pay(&cluster, &payment).await.expect("paid");
    let paid_at = intent["latest_charge"]["created"].as_i64().expect("a charge time");
    assert!(paid_at < pay_by.timestamp(), "paid in time");
    record_paid(&mut tally, &order, intent_id(&intent));
    let after_deadline = (pay_by - Utc::now()).to_std().unwrap_or_default() + Duration::from_secs(2);
    tokio::time::sleep(after_deadline).await;
    tokio::task::block_in_place(|| cluster.start_service(Service::Processor));
    let row =
        wait_for(&cluster, &order, "patient", |row| matches!(row["status"].as_str(), Some("PAID" | "CANCELLED"))).await;
    assert_eq!((row["status"].as_str(), row["payment_id"].as_str()), (Some("PAID"), Some(intent_id(&intent))), "{row}");
    let paid_at_in_view: DateTime<Utc> = row["paid_at"].as_str().expect("paid_at").parse().expect("a time");
    assert!(paid_at_in_view < pay_by, "the order shows when it was paid, not when it was decided");
    println!("[processor down at the deadline] paid at {paid_at_in_view} (pay_by {pay_by}), decided after the deadline: PAID");
    settle_tally(&mut cluster, &[voucher], tally, "processor down at the deadline").await;
}

/// A callback that arrives while the log is down is answered `503` (the
/// ingress cannot record it), and the provider's retries pay the order
/// once the log is back: the callback, not the reconciliation at `pay_by`,
/// pays it, exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_callback_refused_while_the_log_is_down_pays_its_order_when_delivered_again() {
    let _turn = turn().await;
    let mut cluster = tokio::task::block_in_place(|| Cluster::start_on_own_kafka(KafkaSettings::SINGLE));
    let voucher = priced(&cluster, 1_000, 120).await;
    let mut tally = Tally::default();
    let (order, _) = created_order(&cluster, &voucher, "unlogged", &mut tally).await;
    let payment = payment_of(&cluster, &order, "unlogged").await;
    let refused_before = metric(&cluster, Service::Ingress, "seckill_webhooks_total", "outcome=\"rejected\"").await;

    tokio::task::block_in_place(|| cluster.own_kafka().kill());
    let intent = pay(&cluster, &payment).await.expect("paid");
    record_paid(&mut tally, &order, intent_id(&intent));
    // The callback reaches the ingress, which cannot log it: refused, to be
    // delivered again.
    // The provider's first attempt waits out the ingress's produce timeout;
    // beside the whole suite that can take a while.
    let paid_at = tokio::time::Instant::now();
    let deadline = paid_at + Duration::from_secs(90);
    while metric(&cluster, Service::Ingress, "seckill_webhooks_total", "outcome=\"rejected\"").await <= refused_before {
        assert!(tokio::time::Instant::now() < deadline, "the callback was never refused while the log was down");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    println!(
        "[callback while the log is down] first refused {:.1} s after the payment",
        paid_at.elapsed().as_secs_f64()
    );
    let row = wait_for(&cluster, &order, "unlogged", |_| true).await;
    assert_eq!(row["status"], "CREATED", "nothing is decided while the log is down: {row}");
    tokio::task::block_in_place(|| cluster.own_kafka().start_again()).expect("the broker restarts on its log");

    let row = wait_for(&cluster, &order, "unlogged", |row| row["status"] != "CREATED").await;
    assert_eq!((row["status"].as_str(), row["payment_id"].as_str()), (Some("PAID"), Some(intent_id(&intent))), "{row}");
    let reconciled =
        metric(&cluster, Service::Processor, "seckill_payment_reconciliations_total", "result=\"paid\"").await;
    assert_eq!(reconciled, 0.0, "the callback delivered again paid it, long before its pay_by");
    let ledger = crate::paid::ledger(&cluster).await;
    assert_eq!(ledger["webhooks"]["failed"], 0, "the provider's retries got through: {}", ledger["webhooks"]);
    println!(
        "[callback while the log is down] refused with 503, delivered again after the broker restarted: PAID once"
    );
    settle_tally(&mut cluster, &[voucher], tally, "callback while the log is down").await;
}
