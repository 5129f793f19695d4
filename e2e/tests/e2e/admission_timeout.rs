//! An admission whose answer did not come back in time: the client must be
//! told what Redis did, `202` if the order was admitted and `503` only if
//! it was not. Redis is held with `CLIENT PAUSE WRITE` (every script waits)
//! while the ingress's calls time out after 250 ms.

use std::collections::HashMap;

use reqwest::StatusCode;
use seckill_gate::VoucherKeys;
use serde_json::Value;

use crate::helpers::{eventually, Platform};

/// How long Redis holds every script: longer than the ingress's response
/// timeout, well within the time it spends finding out what happened.
const PAUSE_MS: u64 = 800;

async fn paused_platform() -> (Platform, String) {
    let platform = Platform::start_configured(None, |config| config.redis.response_timeout_ms = 250).await;
    let voucher = platform.create_voucher(5, 2).await;
    (platform, voucher)
}

async fn pause_scripts(platform: &Platform) {
    let _: () = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(PAUSE_MS)
        .arg("WRITE")
        .query_async(&mut platform.redis_connection().await)
        .await
        .expect("CLIENT PAUSE");
}

/// Units `user` holds in the gate, and what is left, once the pause is
/// over (a write waits for it) and whatever Redis held has run.
async fn gate_state(platform: &Platform, voucher: &str, user: &str) -> (Option<u64>, u64) {
    let probe = format!("{}:pause-probe", platform.redis.key_prefix);
    let mut redis = platform.redis_connection().await;
    eventually(|| {
        let (probe, mut redis) = (probe.clone(), redis.clone());
        async move { redis::cmd("SET").arg(probe).arg(1).query_async::<()>(&mut redis).await.ok() }
    })
    .await;
    let keys = VoucherKeys::new(&platform.redis.key_prefix, voucher.parse().expect("voucher id"));
    let bought: HashMap<String, u64> =
        redis::cmd("HGETALL").arg(&keys.bought).query_async(&mut redis).await.expect("HGETALL");
    (bought.get(user).copied(), platform.redis_remaining(voucher).await)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_order_admitted_after_its_call_timed_out_is_answered_202() {
    let (platform, voucher) = paused_platform().await;
    pause_scripts(&platform).await;
    // admit.lua waits in Redis past the ingress's timeout, then runs.
    let (status, body) = platform.order(&voucher, "patient").await;
    let (held, remaining) = gate_state(&platform, &voucher, "patient").await;
    if status == StatusCode::SERVICE_UNAVAILABLE {
        assert_eq!((held, remaining), (None, 5), "a 503 while Redis admitted the order: {body}");
    }
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    assert_eq!((held, remaining), (Some(1), 4), "{body}");
    let order = platform.wait_final(body["order_id"].as_str().expect("order_id")).await;
    assert_eq!(order["status"], "CREATED", "the order the client was told about is the one created: {order}");
    let shown = platform.wait_voucher(&voucher, |v| v["created"] == 1).await;
    assert_eq!(shown["admitted"], 1, "one order reached the log: {shown}");
    // The 202 came from settling the call that timed out, not from a call
    // that simply arrived in time.
    assert_eq!(settlements(&platform, "admitted").await, 1);
}

/// How many admission calls the ingress settled with `result`.
async fn settlements(platform: &Platform, result: &str) -> u64 {
    let metrics = platform.http.get(format!("{}/metrics", platform.base)).send().await.expect("metrics");
    let metrics = metrics.text().await.expect("text");
    let series = format!("result=\"{result}\"");
    metrics
        .lines()
        .filter(|line| line.starts_with("seckill_admission_settlements_total") && line.contains(&series))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .map(|count| count as u64)
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_order_whose_call_never_ran_is_answered_503_and_the_user_may_order_again() {
    let (platform, voucher) = paused_platform().await;
    pause_scripts(&platform).await;
    let order = tokio::spawn({
        let (http, url) = (platform.http.clone(), format!("{}/api/v1/vouchers/{voucher}/orders", platform.base));
        async move {
            let response =
                http.post(url).header("authorization", Platform::as_user("unlucky")).send().await.expect("answers");
            let status = response.status();
            (status, response.json::<Value>().await.unwrap_or(Value::Null))
        }
    });
    // The paused admission is dropped with its connection: it never runs.
    let mut redis = platform.redis_connection().await;
    let waiting: Vec<String> = eventually(|| {
        let mut redis = redis.clone();
        async move {
            let clients: String = redis::cmd("CLIENT").arg("LIST").query_async(&mut redis).await.expect("CLIENT LIST");
            let ids: Vec<String> = clients
                .lines()
                .filter(|line| line.contains(" cmd=evalsha "))
                .filter_map(|line| line.split(' ').find_map(|field| field.strip_prefix("id=")).map(str::to_owned))
                .collect();
            (!ids.is_empty()).then_some(ids)
        }
    })
    .await;
    for id in waiting {
        let _: i64 = redis::cmd("CLIENT").arg("KILL").arg("ID").arg(&id).query_async(&mut redis).await.expect("kill");
    }
    let (status, body) = order.await.expect("request task");
    assert_eq!((status, body["error"].as_str()), (StatusCode::SERVICE_UNAVAILABLE, Some("unavailable")), "{body}");
    assert_eq!(gate_state(&platform, &voucher, "unlucky").await, (None, 5), "nothing was admitted: {body}");
    assert_eq!(settlements(&platform, "not_admitted").await, 1, "the 503 came from settling the call");
    // The same user orders again and gets exactly one order.
    let (status, body) = platform.order(&voucher, "unlucky").await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    assert_eq!(gate_state(&platform, &voucher, "unlucky").await, (Some(1), 4));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_unreachable_through_every_retry_gets_a_503_naming_the_order() {
    let (platform, voucher) = paused_platform().await;
    // Redis stops answering at all: the admission call and every attempt to
    // settle it time out.
    let redis = platform.infra.redis.pid().expect("Redis runs");
    let signal = |signal: &str| {
        let status = std::process::Command::new("kill").arg(signal).arg(redis.to_string()).status().expect("kill");
        assert!(status.success());
    };
    signal("-STOP");
    let (status, body) = platform.order(&voucher, "in-the-dark").await;
    signal("-CONT");
    assert_eq!((status, body["error"].as_str()), (StatusCode::SERVICE_UNAVAILABLE, Some("unavailable")), "{body}");
    let order = body["order_id"].as_str().expect("the 503 names the order that may have been admitted");
    assert!(body["message"].as_str().is_some_and(|m| m.contains(order)), "and says how to look it up: {body}");
    assert_eq!(settlements(&platform, "unknown").await, 1, "the gate could not be asked");
    // The order named is the one to look up: once Redis is back, it is
    // either the user's order or unknown, never someone else's.
    let (status, found) = platform.get(&format!("{}/api/v1/orders/{order}", platform.base)).await;
    match status {
        StatusCode::OK => assert_eq!(found["user_id"], "in-the-dark", "{found}"),
        StatusCode::NOT_FOUND => {}
        other => panic!("{other}: {found}"),
    }
}
