//! A small `loadgen` run against the platform: its report adds up and its
//! invariant section passes (the benchmark itself is not run in CI).

use std::time::Duration;

use seckill_auth::JwtKey;
use seckill_core::config::Secret;
use seckill_devstack::{TEST_ADMIN_TOKEN, TEST_JWT_SECRET};
use seckill_loadgen::{Checks, Credentials, Pacing, Plan};

use crate::helpers::Platform;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_load_run_reports_every_answer_and_passing_invariants() {
    let platform = Platform::start().await;
    let checks = Checks {
        processor_url: Some(format!("http://{}", platform.processor_addr)),
        redis_url: Some(platform.redis.url.clone()),
        redis_cluster_nodes: platform.redis.cluster_nodes.clone(),
        redis_prefix: platform.redis.key_prefix.clone(),
    };
    let closed = Plan {
        base_url: platform.base.clone(),
        admin_token: Some(TEST_ADMIN_TOKEN.to_owned()),
        credentials: Credentials::Tokens(JwtKey::new(&Secret::new(TEST_JWT_SECRET))),
        stock: 100,
        per_user_limit: 2,
        shards: 1,
        requests: 3_000,
        users: 1_200,
        quantity: 1,
        idempotency_keys: false,
        pacing: Pacing::Closed { connections: 64 },
        user_prefix: "closed-".to_owned(),
        settle_timeout: Duration::from_secs(60),
        visibility_sample: 10,
    };
    let report = seckill_loadgen::run(&closed, &checks, false).await.expect("the closed-loop run completes");
    assert!(report.invariants.passed, "{report}");
    assert_eq!(report.requests, 3_000, "{report}");
    assert_eq!(report.status_counts.values().sum::<u64>() + report.transport_errors, 3_000, "{report}");
    assert_eq!((report.invariants.created_units, report.admitted_orders), (100, 100), "{report}");
    assert_eq!(report.invariants.remaining_agree, Some(true), "{report}");
    assert_eq!(report.final_statuses.get("CREATED"), Some(&100), "{report}");
    assert!(report.sold_out_after_s.is_some(), "{report}");
    assert_eq!(report.latency.count, 3_000, "{report}");
    assert_eq!(report.visible.count, 10, "one admitted order in ten was watched until final: {report}");

    // Open loop, with retries: a user's repeats replay their first order.
    let open = Plan {
        stock: 1_000,
        requests: 1_000,
        users: 400,
        idempotency_keys: true,
        pacing: Pacing::Open { per_second: 500.0, max_in_flight: 256 },
        user_prefix: "open-".to_owned(),
        ..closed
    };
    let report = seckill_loadgen::run(&open, &checks, false).await.expect("the open-loop run completes");
    assert!(report.invariants.passed, "{report}");
    assert_eq!(report.status_counts.get(&202), Some(&1_000), "{report}");
    assert_eq!(report.admitted_orders, 400, "one order per user, repeats replayed: {report}");
    assert_eq!(report.invariants.persistent_remaining, Some(600), "{report}");
    assert!(report.sold_out_after_s.is_none(), "{report}");
}
