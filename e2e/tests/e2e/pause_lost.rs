//! A pause Redis lost still stops the sale: the processor judges every order
//! by the pauses the log records (`seckill_core::decision::SaleWindow`).
//!
//! The failover's effect, simulated: the admin's pause is acknowledged
//! (applied to Redis and logged), then Redis loses it, as a promoted
//! replica that never got it would. Redis admits again and the buyers get
//! `202`, but every order admitted after the pause fails `paused`, its
//! units go back to Redis, and nothing is sold past the pause.

use reqwest::StatusCode;
use seckill_gate::Layout;
use serde_json::json;

use crate::helpers::{eventually, Platform};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orders_admitted_after_a_pause_redis_lost_fail_paused() {
    let platform = Platform::start().await;
    let voucher = platform.create_voucher(10, 1).await;
    let (status, body) = platform.order(&voucher, "early").await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let early = body["order_id"].as_str().expect("order id").to_owned();

    let (status, body) = platform.update_voucher(&voucher, json!({"paused": true})).await;
    assert_eq!((status, body["paused"].as_bool()), (StatusCode::OK, Some(true)), "{body}");
    let (status, body) = platform.order(&voucher, "refused").await;
    assert_eq!((status, body["error"].as_str()), (StatusCode::CONFLICT, Some("paused")), "{body}");

    // Redis loses the pause: every bucket of the voucher, found by the
    // gate's layout, stands unpaused.
    let mut redis = platform.redis_connection().await;
    for keys in
        Layout::new(voucher.parse().expect("voucher id"), platform.voucher_shards).all_keys(&platform.redis.key_prefix)
    {
        let _: i64 = redis::cmd("HDEL").arg(&keys.voucher).arg("paused").query_async(&mut redis).await.expect("HDEL");
    }

    let mut admitted = Vec::new();
    for user in ["after1", "after2", "after3"] {
        let (status, body) = platform.order(&voucher, user).await;
        assert_eq!(status, StatusCode::ACCEPTED, "Redis no longer knows of the pause: {body}");
        admitted.push(body["order_id"].as_str().expect("order id").to_owned());
    }
    for order in &admitted {
        let decided = platform.wait_final(order).await;
        assert_eq!(
            (decided["status"].as_str(), decided["reason"].as_str()),
            (Some("FAILED"), Some("paused")),
            "admitted after the pause: {decided}"
        );
    }
    let decided = platform.wait_final(&early).await;
    assert_eq!(decided["status"], "CREATED", "admitted before the pause: {decided}");

    // Nothing sold past the pause; the refused orders' units are back in
    // Redis (the gate follower releases every failed order).
    assert_eq!(platform.persistent_remaining(&voucher).await, 9);
    eventually(|| async { (platform.redis_remaining(&voucher).await == 9).then_some(()) }).await;
    let shown = platform.wait_voucher(&voucher, |v| v["created"] == 1 && v["failed"] == 3).await;
    assert_eq!(shown["remaining"], 9, "{shown}");
}
