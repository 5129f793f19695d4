//! A `202` that survives the loss of the Redis master: once Redis has a
//! replica, the ingress answers an order only when the replica has it
//! (`redis.replica_acks = auto`, the default, turns the wait on at its next
//! look), and a replica that does not acknowledge in time gets the buyer a
//! `503` naming the order, which may still stand.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use seckill_devstack::Redis;
use seckill_gate::VoucherKeys;

use crate::helpers::{eventually, Platform};

/// The ingress's wait for the replica: short for the test, long enough
/// for a healthy replica beside the whole suite on two cores.
const ACK_TIMEOUT_MS: u64 = 1_500;

/// The value of the ingress's metric `name` (summed over its series).
async fn metric(platform: &Platform, name: &str) -> f64 {
    let metrics = platform.http.get(format!("{}/metrics", platform.base)).send().await.expect("metrics");
    let metrics = metrics.text().await.expect("text");
    metrics
        .lines()
        .filter(|line| line.split(['{', ' ']).next() == Some(name))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn once_redis_has_a_replica_a_202_is_on_it_and_a_silent_replica_gets_a_503_naming_the_order() {
    let platform =
        Platform::start_configured(None, |config| config.redis.replica_ack_timeout_ms = ACK_TIMEOUT_MS).await;
    let voucher = platform.create_voucher(10, 1).await;
    let keys = VoucherKeys::new(&platform.redis.key_prefix, voucher.parse().expect("voucher id"));

    // Redis alone: nothing to wait for.
    assert_eq!(metric(&platform, "seckill_replica_acks_on").await, 0.0);
    let (status, body) = platform.order(&voucher, "alone").await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");

    // A replica joins; the ingress's next look turns the wait on.
    let replica =
        Redis::start_replica(&platform.infra.dir.path().join("replica"), &platform.infra.redis).expect("replica");
    eventually(|| async { (metric(&platform, "seckill_replica_acks_on").await == 1.0).then_some(()) }).await;
    let mut on_replica =
        redis::Client::open(replica.url()).expect("url").get_multiplexed_async_connection().await.expect("connects");
    for buyer in ["first", "second", "third"] {
        let (status, body) = platform.order(&voucher, buyer).await;
        assert_eq!(status, StatusCode::ACCEPTED, "{body}");
        let order = body["order_id"].as_str().expect("order_id");
        // Read on the replica right after the answer: it is there.
        let recorded: Option<String> =
            redis::cmd("HGET").arg(&keys.admitted).arg(order).query_async(&mut on_replica).await.expect("HGET");
        assert_eq!(recorded.as_deref(), Some(format!("{buyer}|1").as_str()), "{order} on the replica");
    }

    // The replica goes silent (frozen, its connection open).
    replica.pause();
    let started = Instant::now();
    let (status, body) = platform.order(&voucher, "unconfirmed").await;
    let took = started.elapsed();
    replica.resume();
    assert_eq!((status, body["error"].as_str()), (StatusCode::SERVICE_UNAVAILABLE, Some("unavailable")), "{body}");
    let order = body["order_id"].as_str().expect("the 503 names the order that may stand");
    assert!(body["message"].as_str().is_some_and(|m| m.contains(order) && m.contains("replica")), "{body}");
    assert!(took < Duration::from_millis(ACK_TIMEOUT_MS) + Duration::from_secs(2), "answered after {took:?}");
    assert!(metric(&platform, "seckill_replica_ack_timeouts_total").await >= 1.0);
    // It stood on the master: the log has it, and it is the buyer's.
    let decided = platform.wait_final(order).await;
    assert_eq!((decided["status"].as_str(), decided["user_id"].as_str()), (Some("CREATED"), Some("unconfirmed")));
}
