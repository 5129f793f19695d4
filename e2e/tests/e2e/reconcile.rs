//! `reconcile` while the platform runs: what lands in Redis between its
//! reads and its writes (a release, an update, an admission) survives it, an
//! outbox entry relayed between its two reads is counted, and "unchanged"
//! means every field it restores is the same (and "corrected" says what
//! differed).

use std::collections::HashMap;

use chrono::Utc;
use reqwest::StatusCode;
use seckill_analytics::reconcile::{reconcile, Mode, ReconcileReport, Step};
use seckill_core::config::DrawConfig;
use seckill_core::event::OrderAccepted;
use seckill_core::{OrderId, UserId};
use seckill_gate::{Admission, Gate, VoucherKeys};

use crate::helpers::{eventually, Platform};

impl Platform {
    async fn gate(&self) -> Gate {
        Gate::connect(&self.redis).await.expect("Redis")
    }

    pub(crate) fn keys(&self, voucher: &str) -> VoucherKeys {
        VoucherKeys::new(&self.redis.key_prefix, voucher.parse().expect("voucher id"))
    }

    async fn bought(&self, voucher: &str) -> HashMap<String, u64> {
        redis::cmd("HGETALL")
            .arg(self.keys(voucher).bought)
            .query_async(&mut self.redis_connection().await)
            .await
            .expect("HGETALL")
    }

    async fn stock_in_redis(&self, voucher: &str) -> u64 {
        redis::cmd("HGET")
            .arg(self.keys(voucher).voucher)
            .arg("stock")
            .query_async(&mut self.redis_connection().await)
            .await
            .expect("HGET")
    }

    /// The voucher hash, without bookkeeping (an absent `paused` is `"0"`;
    /// the expiry admit.lua last set is a cache).
    async fn voucher_fields(&self, voucher: &str) -> HashMap<String, String> {
        let mut fields: HashMap<String, String> = redis::cmd("HGETALL")
            .arg(self.keys(voucher).voucher)
            .query_async(&mut self.redis_connection().await)
            .await
            .expect("HGETALL");
        fields.entry("paused".to_owned()).or_insert_with(|| "0".to_owned());
        fields.remove("keys_expire_ms");
        fields
    }

    pub(crate) async fn reconcile(&self, mode: Mode) -> ReconcileReport {
        reconcile(&self.gate().await, &self.kafka, &DrawConfig::default(), mode, async |_| {})
            .await
            .expect("reconciles")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_an_update_and_an_admission_between_reconciles_read_and_write_survive_it() {
    let platform = Platform::start().await;
    let voucher = platform.create_voucher(3, 1).await;
    let (status, body) = platform.order(&voucher, "leaver").await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let order = body["order_id"].as_str().expect("order_id").to_owned();
    platform.wait_order(&order, |o| o["status"] == "CREATED").await;

    let report =
        reconcile(&platform.gate().await, &platform.kafka, &DrawConfig::default(), Mode::Write, async |step| {
            if step != Step::BeforeWrites {
                return;
            }
            // The processor, still running, gives a cancelled order's unit back...
            let (status, body) = platform.post(&format!("/api/v1/orders/{order}/cancel"), Some("leaver"), None).await;
            assert_eq!(status, StatusCode::ACCEPTED, "{body}");
            eventually(|| async { (platform.redis_remaining(&voucher).await == 3).then_some(()) }).await;
            // ...the admin adds stock, and a buyer is admitted.
            let (status, body) = platform.update_voucher(&voucher, serde_json::json!({"add_stock": 2})).await;
            assert_eq!(status, StatusCode::OK, "{body}");
            let (status, body) = platform.order(&voucher, "newcomer").await;
            assert_eq!(status, StatusCode::ACCEPTED, "{body}");
        })
        .await
        .expect("reconciles");
    println!("{report:?}");

    assert_eq!(platform.stock_in_redis(&voucher).await, 5, "the added stock stays");
    assert_eq!(platform.bought(&voucher).await, HashMap::from([("newcomer".to_owned(), 1)]), "who holds units");
    assert_eq!(platform.redis_remaining(&voucher).await, 4, "the released unit stays returned");
    // And the gate agrees with the persistent stock once the log is decided.
    eventually(|| async { (platform.persistent_remaining(&voucher).await == 4).then_some(()) }).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outbox_entry_relayed_between_the_two_reads_is_counted() {
    let mut platform = Platform::start().await;
    let voucher = platform.create_voucher(5, 1).await;
    // No relay runs: an admitted order waits in the outbox.
    platform.ingress.take().expect("running").stop().await;
    let gate = platform.gate().await;
    let order = OrderAccepted {
        order_id: OrderId::generate(),
        voucher_id: voucher.parse().expect("voucher id"),
        user_id: UserId::parse("in-transit").expect("valid"),
        quantity: 1,
        accepted_at: Utc::now(),
        amount: 0,
        currency: None,
        idempotency_key: None,
    };
    assert_eq!(gate.admit_order(&order, None).await.expect("admits"), Admission::Admitted { remaining: 4 });

    let mut restarted = false;
    let platform_ref = &mut platform;
    reconcile(&gate, &platform_ref.kafka.clone(), &DrawConfig::default(), Mode::Write, async |step| {
        if step != Step::BetweenReads || restarted {
            return;
        }
        restarted = true;
        // A relay moves the entry from the outbox to the log, right now.
        platform_ref.start_ingress().await;
        let outbox = seckill_gate::outbox_key(&platform_ref.redis.key_prefix);
        eventually(|| async {
            let len: u64 = redis::cmd("XLEN")
                .arg(&outbox)
                .query_async(&mut platform_ref.redis_connection().await)
                .await
                .expect("XLEN");
            (len == 0).then_some(())
        })
        .await;
        platform_ref.wait_order(&order.order_id.to_string(), |o| o["status"] == "CREATED").await;
    })
    .await
    .expect("reconciles");
    assert!(restarted);

    assert_eq!(platform.bought(&voucher).await, HashMap::from([("in-transit".to_owned(), 1)]), "counted");
    assert_eq!(platform.redis_remaining(&voucher).await, 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unchanged_means_every_field_reconcile_restores_is_the_same() {
    let platform = Platform::start().await;
    let voucher = platform.create_voucher(5, 2).await;
    let (_, kept) = platform.order(&voucher, "keeper").await;
    let (_, given_back) = platform.order(&voucher, "giver").await;
    let given_back = given_back["order_id"].as_str().expect("order_id").to_owned();
    let (status, body) = platform.post(&format!("/api/v1/orders/{given_back}/cancel"), Some("giver"), None).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    platform.wait_order(&given_back, |o| o["status"] == "CANCELLED").await;
    let (status, update) = platform.update_voucher(&voucher, serde_json::json!({"add_stock": 1})).await;
    assert_eq!(status, StatusCode::OK, "{update}");
    let kept = kept["order_id"].as_str().expect("order_id").to_owned();
    platform.wait_order(&kept, |o| o["status"] == "CREATED").await;
    eventually(|| async { (platform.redis_remaining(&voucher).await == 5).then_some(()) }).await;
    // Whatever the first run sets for good (e.g. an expiry older keys lack).
    platform.reconcile(Mode::Write).await;
    let agreed = platform.reconcile(Mode::DryRun).await;
    assert_eq!(agreed.changed(), 0, "Redis agrees with the log");
    assert!(agreed.vouchers.iter().all(|v| v.outcome.differences.is_empty()), "{:?}", agreed.vouchers);

    let keys = platform.keys(&voucher);
    let update_id = update["update_id"].as_str().expect("update_id").to_owned();
    // Each drift, and how a dry run names it.
    let drifts: Vec<(&str, redis::Cmd, &str)> = vec![
        ("paused", redis::cmd("HSET").arg(&keys.voucher).arg("paused").arg("1").clone(), "paused 1 → 0"),
        (
            "ends_ms",
            redis::cmd("HSET").arg(&keys.voucher).arg("ends_ms").arg(Utc::now().timestamp_millis()).clone(),
            "ends_ms ",
        ),
        ("limit", redis::cmd("HSET").arg(&keys.voucher).arg("limit").arg(9).clone(), "limit 9 → 2"),
        (
            "hold_seconds",
            redis::cmd("HSET").arg(&keys.voucher).arg("hold_seconds").arg(60).clone(),
            "hold_seconds 60 → ",
        ),
        (
            "latest order",
            redis::cmd("HSET").arg(&keys.orders).arg("keeper").arg(OrderId::generate().to_string()).clone(),
            "the latest order of 1 user",
        ),
        (
            "released set",
            redis::cmd("SREM").arg(&keys.released).arg(&given_back).clone(),
            "1 order given back but not in the released set",
        ),
        (
            "applied updates",
            redis::cmd("SREM").arg(&keys.updates).arg(&update_id).clone(),
            "1 update of the log not in the applied set",
        ),
        (
            "admitted orders",
            redis::cmd("HDEL").arg(&keys.admitted).arg(&kept).clone(),
            "1 admitted order not recorded as the log has them",
        ),
        ("an expiry", redis::cmd("PERSIST").arg(&keys.bought).clone(), "the expiry of bought (none) → "),
    ];
    for (what, drift, named) in drifts {
        let before = platform.voucher_fields(&voucher).await;
        let _: () = drift.query_async(&mut platform.redis_connection().await).await.expect("drifts");
        let checked = platform.reconcile(Mode::DryRun).await;
        assert_eq!(checked.changed(), 1, "a drifted {what} is not unchanged");
        let differences: Vec<&String> = checked.vouchers.iter().flat_map(|v| &v.outcome.differences).collect();
        assert!(
            differences.len() == 1 && differences[0].starts_with(named),
            "a drifted {what} is named as such ({named}…): {differences:?}"
        );
        assert_eq!(platform.reconcile(Mode::Write).await.changed(), 1, "{what}");
        assert_eq!(platform.reconcile(Mode::DryRun).await.changed(), 0, "{what} restored");
        let after = platform.voucher_fields(&voucher).await;
        assert_eq!(after, before, "{what}: the voucher is as the log has it");
    }
    let latest: Option<String> = redis::cmd("HGET")
        .arg(&keys.orders)
        .arg("keeper")
        .query_async(&mut platform.redis_connection().await)
        .await
        .expect("HGET");
    assert_eq!(latest.as_deref(), Some(kept.as_str()));
}
