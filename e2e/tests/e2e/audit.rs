//! `seckill audit --live` against three clean sales, then against the same
//! sales with one thing corrupted in each: a view row, a Redis counter, a
//! second decision on the orders topic. Each corruption fails exactly the
//! rule that watches it, on its own voucher.

use std::sync::Arc;

use reqwest::StatusCode;
use seckill_analytics::audit::{audit_voucher, Audit, LiveSources};
use seckill_analytics::sale::{read_sales, Selection};
use seckill_core::config::StoreConfig;
use seckill_core::event::{Event, OrderPaid};
use seckill_core::{Envelope, VoucherId};
use seckill_kafka::Message;
use seckill_web::RemoteView;
use serde_json::json;

use crate::helpers::{eventually, Platform};

/// A sale that exercises every rule: a cancellation and a re-sale, a
/// free claim (paid), added stock, a sell-out. Returns the voucher and the
/// order of its last buyer (created, never paid).
async fn clean_sale(platform: &Platform, prefix: &str) -> (String, String) {
    let voucher = platform.create_voucher(2, 1).await;
    let buy = |user: String| {
        let voucher = voucher.clone();
        async move {
            let body = eventually(|| async {
                let (status, body) = platform.order(&voucher, &user).await;
                (status == StatusCode::ACCEPTED).then_some(body)
            })
            .await;
            let order = body["order_id"].as_str().expect("order_id").to_owned();
            assert_eq!(platform.wait_final(&order).await["status"], "CREATED");
            order
        }
    };
    let first = buy(format!("{prefix}1")).await;
    let second = buy(format!("{prefix}2")).await;
    let (status, body) =
        platform.post(&format!("/api/v1/orders/{first}/cancel"), Some(&format!("{prefix}1")), None).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    platform.wait_order(&first, |o| o["status"] == "CANCELLED").await;
    buy(format!("{prefix}3")).await;
    let (status, body) =
        platform.post(&format!("/api/v1/orders/{second}/confirm"), Some(&format!("{prefix}2")), None).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    platform.wait_order(&second, |o| o["status"] == "PAID").await;
    let (status, body) = platform.update_voucher(&voucher, json!({"add_stock": 1})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let last = buy(format!("{prefix}4")).await;
    // Settled everywhere: the view has every outcome, both stocks are out.
    platform.wait_voucher(&voucher, |v| v["created"] == 4 && v["cancelled"] == 1 && v["paid"] == 1).await;
    eventually(|| async { (platform.redis_remaining(&voucher).await == 0).then_some(()) }).await;
    assert_eq!(platform.persistent_remaining(&voucher).await, 0);
    (voucher, last)
}

async fn audit(platform: &Platform, vouchers: &[&str]) -> Audit {
    let ids: Vec<VoucherId> = vouchers.iter().map(|v| v.parse().expect("voucher id")).collect();
    let read = read_sales(&platform.kafka, &Selection::vouchers(ids)).await.expect("the log is read");
    let view = RemoteView::new(&format!("http://{}", platform.projector_addr)).expect("view client");
    let sources = LiveSources::connect(Arc::new(view), &format!("http://{}", platform.processor_addr), &platform.redis)
        .await
        .expect("the live stores answer");
    let mut outbox = sources.outbox().await.expect("the outbox is read");
    let mut audits = Vec::new();
    for sale in &read.sales {
        let pending = outbox.remove(&sale.log.voucher_id).unwrap_or_default();
        let live = sources.figures(sale.log.voucher_id, pending).await.expect("live figures");
        audits.push(audit_voucher(&sale.log, Some(&live)));
    }
    let audit = Audit::new(audits, true);
    println!("{}", audit.text());
    audit
}

/// The rules `voucher` failed.
fn failed<'a>(audit: &'a Audit, voucher: &str) -> Vec<&'a str> {
    let found = audit.vouchers.iter().find(|v| v.voucher_id.to_string() == voucher).expect("audited");
    found.failed().map(|rule| rule.rule).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audit_passes_a_clean_sale_and_names_exactly_the_broken_rule() {
    let mut platform = Platform::start().await;
    let (view_sale, view_order) = clean_sale(&platform, "v").await;
    let (redis_sale, _) = clean_sale(&platform, "r").await;
    let (log_sale, log_order) = clean_sale(&platform, "d").await;
    let vouchers = [view_sale.as_str(), redis_sale.as_str(), log_sale.as_str()];

    let clean = audit(&platform, &vouchers).await;
    assert!(clean.pass, "{}", clean.text());
    for voucher in &clean.vouchers {
        assert_eq!(voucher.rules.len(), 8, "five rules on the log, three against the live stores");
        assert_eq!((voucher.books.offered, voucher.books.units_sold, voucher.books.units_left), (3, 3, Some(0)));
    }

    // A view row: the projector stopped, its store told of a payment
    // the log never had, the projector started again.
    platform.projector.take().expect("a projector").stop().await;
    let store_config = StoreConfig::embedded(platform.infra.dir.path().join("view.redb"));
    let store = eventually(|| async { seckill_store::open_view_store(&store_config).await.ok() }).await;
    let row = store.order(view_order.parse().expect("order id")).await.expect("readable").expect("the order");
    let phantom = OrderPaid {
        order: seckill_core::event::OrderAccepted {
            order_id: row.order_id,
            voucher_id: row.voucher_id,
            user_id: row.user_id.clone(),
            quantity: row.quantity,
            accepted_at: row.accepted_at,
            amount: 0,
            currency: None,
            idempotency_key: None,
        },
        paid_at: chrono::Utc::now(),
        payment_id: None,
    };
    let changed = store.apply(vec![Envelope::new(Event::OrderPaid(phantom))]).await.expect("applied");
    assert_eq!(changed, [true]);
    drop(store);
    platform.start_projector().await;
    platform.wait_voucher(&view_sale, |v| v["paid"] == 2).await;

    // A Redis counter: the gate shows a unit the books do not have.
    let key = seckill_gate::VoucherKeys::new(&platform.redis.key_prefix, redis_sale.parse().expect("id")).voucher;
    let _: () = redis::cmd("HSET")
        .arg(&key)
        .arg("remaining")
        .arg(1)
        .query_async(&mut platform.redis_connection().await)
        .await
        .expect("HSET");

    // A second decision: the creation of one order again, as a new event.
    let orders_topic = platform.kafka.topics().orders;
    let records = platform
        .read_topic(&orders_topic, |read| {
            read.iter().any(|m| {
                Envelope::decode(m.payload().unwrap_or_default()).is_ok_and(
                    |e| matches!(&e.event, Event::OrderCreated(c) if c.order.order_id.to_string() == log_order),
                )
            })
        })
        .await;
    let decision = records
        .iter()
        .filter_map(|m| Envelope::decode(m.payload().unwrap_or_default()).ok())
        .find(|e| matches!(&e.event, Event::OrderCreated(c) if c.order.order_id.to_string() == log_order))
        .expect("the creation");
    let again = Envelope::new(decision.event.clone());
    assert_ne!(again.event_id, decision.event_id);
    platform.producer().send(&orders_topic, &again).await.expect("produced");

    let corrupted = audit(&platform, &vouchers).await;
    assert!(!corrupted.pass);
    assert_eq!(failed(&corrupted, &view_sale), ["view_matches_log"]);
    assert_eq!(failed(&corrupted, &redis_sale), ["gate_matches_log"]);
    assert_eq!(failed(&corrupted, &log_sale), ["one_decision_per_acceptance"]);
    let text = corrupted.text();
    assert_eq!(text.lines().filter(|line| line.trim_start().starts_with("FAIL  ")).count(), 3, "{text}");
    assert!(text.contains("paid: view 2, log 1"), "{text}");
    assert!(text.contains("remaining 1 ≠ 0"), "{text}");
    assert!(text.contains("1 decided more than once"), "{text}");
    let json = serde_json::to_value(&corrupted).expect("json");
    assert_eq!(json["pass"], false);
}
