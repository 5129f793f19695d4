//! `seckill stats` from the log agrees with a sale the test scripted and
//! with the times the status view reports, despite duplicate records.

use chrono::{DateTime, TimeDelta, Utc};
use reqwest::StatusCode;
use seckill_analytics::stats::{stats_from_log, VoucherStats};
use seckill_core::{Envelope, Event};
use seckill_kafka::Message;
use serde_json::{json, Value};

use crate::helpers::{eventually, Platform};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stats_from_the_log_match_the_scripted_sale_and_the_view() {
    let platform = Platform::start().await;
    let begins_at = DateTime::from_timestamp(Utc::now().timestamp() - 2, 0).expect("now is in range");
    let ends_at = begins_at + TimeDelta::hours(1);
    let a = platform
        .create_voucher_from(json!({"stock": 5, "per_user_limit": 1, "begins_at": begins_at, "ends_at": ends_at}))
        .await;
    let b = platform
        .create_voucher_from(json!({"stock": 10, "per_user_limit": 2, "begins_at": begins_at, "ends_at": ends_at}))
        .await;

    // A: eight buyers for five units; the gate refuses the last three, so
    // they are never accepted.
    let mut a_orders = Vec::new();
    for buyer in 0..8 {
        let (status, body) = platform.order(&a, &format!("a{buyer}")).await;
        if buyer < 5 {
            assert_eq!(status, StatusCode::ACCEPTED, "{body}");
            a_orders.push(order_id(&body));
        } else {
            assert_eq!((status, body["error"].as_str()), (StatusCode::CONFLICT, Some("sold_out")), "{body}");
        }
    }
    for order in &a_orders {
        assert_eq!(platform.wait_final(order).await["status"], "CREATED");
    }

    // One buyer claims (paid), one cancels; someone else buys the unit given back.
    let (status, body) = platform.post(&format!("/api/v1/orders/{}/confirm", a_orders[0]), Some("a0"), None).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let (status, body) = platform.post(&format!("/api/v1/orders/{}/cancel", a_orders[1]), Some("a1"), None).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    platform.wait_order(&a_orders[0], |o| o["status"] == "PAID").await;
    platform.wait_order(&a_orders[1], |o| o["status"] == "CANCELLED").await;
    let resold = order_id(&accepted_eventually(&platform, &a, "a8").await);
    assert_eq!(platform.wait_final(&resold).await["status"], "CREATED");
    a_orders.push(resold.clone());

    // A unit Redis has and the persistent stock has not: accepted, then
    // refused by the processor.
    platform.add_redis_units(&a, 1).await;
    let refused = order_id(&accepted_eventually(&platform, &a, "a9").await);
    assert_eq!(platform.wait_final(&refused).await["status"], "FAILED");
    a_orders.push(refused);

    // B: more stock added, three buyers (one takes two units); not sold out.
    let (status, body) = platform.update_voucher(&b, json!({"add_stock": 5})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let mut b_orders = Vec::new();
    for (buyer, units) in [("b0", 2), ("b1", 1), ("b2", 1)] {
        let (status, body) = platform.order_units(&b, buyer, units).await;
        assert_eq!(status, StatusCode::ACCEPTED, "{body}");
        b_orders.push(order_id(&body));
    }
    for order in &b_orders {
        assert_eq!(platform.wait_final(order).await["status"], "CREATED");
    }

    // Duplicates on both topics: every acceptance, decision and stock update
    // published a second time, byte for byte.
    let republished = republish(&platform).await;
    assert!(republished >= a_orders.len() + b_orders.len(), "{republished} records republished");

    let stats = stats_from_log(&platform.kafka).await.expect("the log is read");
    println!("{}", serde_json::to_string_pretty(&stats).expect("json"));
    assert_eq!(stats.len(), 2, "{stats:?}");
    let find = |voucher: &str| stats.iter().find(|s| s.voucher_id.to_string() == voucher).expect("voucher listed");
    let (a_stats, b_stats) = (find(&a), find(&b));

    // A, as the view tells it.
    let a_view = views(&platform, &a_orders).await;
    let resale = &a_view[5];
    let first_accepted = a_view.iter().map(|o| o.accepted_at).min().expect("orders");
    assert_eq!(
        counts(a_stats),
        Counts { accepted: 7, created: 6, failed: 1, cancelled: 1, paid: 1, units_sold: 5, stock: 5 }
    );
    assert!(a_stats.sold_out, "{a_stats:?}");
    assert_eq!(a_stats.sold_out_order_id.map(|o| o.to_string()), Some(resold.clone()));
    assert_eq!(a_stats.first_accepted_at, Some(first_accepted));
    assert_eq!(a_stats.sold_out_at, Some(resale.accepted_at));
    assert_close(a_stats.sell_out_ms, Some(ms(resale.accepted_at - first_accepted)));
    assert_close(a_stats.sell_out_since_start_ms, Some(ms(resale.accepted_at - begins_at)));
    let a_latencies = a_view.iter().map(|o| o.decided_at - o.accepted_at).collect();
    assert_latencies(a_stats, a_latencies);

    // B: nothing sold out.
    let b_view = views(&platform, &b_orders).await;
    assert_eq!(
        counts(b_stats),
        Counts { accepted: 3, created: 3, failed: 0, cancelled: 0, paid: 0, units_sold: 4, stock: 15 }
    );
    assert!(!b_stats.sold_out, "{b_stats:?}");
    assert_eq!((b_stats.sold_out_at, b_stats.sell_out_ms, b_stats.sell_out_since_start_ms), (None, None, None));
    assert_eq!(b_stats.begins_at, Some(begins_at));
    let b_latencies = b_view.iter().map(|o| o.decided_at - o.accepted_at).collect();
    assert_latencies(b_stats, b_latencies);
}

fn order_id(body: &Value) -> String {
    body["order_id"].as_str().expect("order_id").to_owned()
}

/// Orders as `user` until the gate admits it (the sold-out memo may refuse
/// for a moment after units come back).
async fn accepted_eventually(platform: &Platform, voucher: &str, user: &str) -> Value {
    eventually(|| async {
        let (status, body) = platform.order(voucher, user).await;
        (status == StatusCode::ACCEPTED).then_some(body)
    })
    .await
}

/// One order's times as `GET /api/v1/orders/{id}` reports them.
struct OrderTimes {
    accepted_at: DateTime<Utc>,
    decided_at: DateTime<Utc>,
}

async fn views(platform: &Platform, orders: &[String]) -> Vec<OrderTimes> {
    let mut times = Vec::new();
    for order in orders {
        let view = platform.wait_final(order).await;
        let time = |field: &str| {
            serde_json::from_value::<DateTime<Utc>>(view[field].clone()).unwrap_or_else(|_| panic!("{field}: {view}"))
        };
        times.push(OrderTimes { accepted_at: time("accepted_at"), decided_at: time("decided_at") });
    }
    times
}

#[derive(Debug, PartialEq)]
struct Counts {
    accepted: u64,
    created: u64,
    failed: u64,
    cancelled: u64,
    paid: u64,
    units_sold: u64,
    stock: u64,
}

fn counts(stats: &VoucherStats) -> Counts {
    Counts {
        accepted: stats.accepted,
        created: stats.created,
        failed: stats.failed,
        cancelled: stats.cancelled,
        paid: stats.paid,
        units_sold: stats.units_sold,
        stock: stats.stock,
    }
}

fn ms(delta: TimeDelta) -> f64 {
    delta.num_microseconds().expect("short") as f64 / 1000.0
}

/// Equal within a microsecond (the stats are computed in floating point).
fn assert_close(actual: Option<f64>, expected: Option<f64>) {
    match (actual, expected) {
        (Some(actual), Some(expected)) => assert!((actual - expected).abs() < 0.001, "{actual} ms != {expected} ms"),
        _ => assert_eq!(actual, expected),
    }
}

/// The p50 and p99 the test computes itself: nearest rank, the smallest
/// latency with at least that share of latencies at or below it.
fn assert_latencies(stats: &VoucherStats, mut latencies: Vec<TimeDelta>) {
    latencies.sort();
    let nearest_rank = |percent: f64| {
        let rank = (percent / 100.0 * latencies.len() as f64).ceil() as usize;
        ms(latencies[rank.max(1) - 1])
    };
    assert_close(stats.latency_p50_ms, Some(nearest_rank(50.0)));
    assert_close(stats.latency_p99_ms, Some(nearest_rank(99.0)));
}

/// Produces every acceptance, decision and stock update on the sales and
/// orders topics once more, with the same key and bytes. Returns how many.
async fn republish(platform: &Platform) -> usize {
    let topics = platform.kafka.topics();
    let brokers = platform.kafka.brokers.clone();
    let (sales, orders) = (topics.sales.clone(), topics.orders.clone());
    let records = tokio::task::spawn_blocking(move || {
        let mut records = Vec::new();
        seckill_kafka::read_to_end(&brokers, &[&sales, &orders], |message| {
            let payload = message.payload().unwrap_or_default();
            let envelope = Envelope::decode(payload).expect("the platform writes valid events");
            let again = matches!(
                envelope.event,
                Event::OrderAccepted(_) | Event::OrderCreated(_) | Event::OrderFailed(_) | Event::VoucherUpdated(_)
            );
            if again {
                let key = String::from_utf8_lossy(message.key().expect("keyed by voucher")).into_owned();
                records.push((message.topic().to_owned(), key, envelope.kind(), payload.to_vec()));
            }
        })
        .expect("the topics are read");
        records
    })
    .await
    .expect("reader task");
    let producer = platform.producer();
    for (topic, key, kind, payload) in &records {
        producer.send_encoded(topic, key, kind, payload).await.expect("republished");
    }
    records.len()
}
