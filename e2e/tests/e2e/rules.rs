//! The flash-sale rules over HTTP, against real Redis and the real broker:
//! limits with quantities, the sale window, pause, and voucher admin.

use chrono::{Duration, Utc};
use reqwest::StatusCode;
use serde_json::json;

use crate::helpers::{eventually, Platform};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_limit_of_three_counts_units_across_orders() {
    a_limit_of_three_counts_units_across_orders_on(Platform::start().await).await;
}

/// The scenario on `platform` (also run on a Redis Cluster: `crate::cluster`).
pub(crate) async fn a_limit_of_three_counts_units_across_orders_on(platform: Platform) {
    let voucher = platform.create_voucher(10, 3).await;

    let (status, first) = platform.order_units(&voucher, "ann", 2).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{first}");
    let (status, body) = platform.order_units(&voucher, "ann", 2).await;
    assert_eq!((status, body["error"].as_str()), (StatusCode::CONFLICT, Some("limit_exceeded")), "{body}");
    let (status, second) = platform.order_units(&voucher, "ann", 1).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{second}");
    let (status, body) = platform.order_units(&voucher, "ann", 1).await;
    assert_eq!((status, body["error"].as_str()), (StatusCode::CONFLICT, Some("duplicate_order")), "{body}");
    assert_eq!(body["order_id"], second["order_id"], "names the user's latest order");

    // Another user may take three units at once, never four; nobody may take
    // more than is left.
    let (status, body) = platform.order_units(&voucher, "ben", 4).await;
    assert_eq!((status, body["error"].as_str()), (StatusCode::CONFLICT, Some("limit_exceeded")), "{body}");
    let (status, _) = platform.order_units(&voucher, "ben", 3).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let (status, _) = platform.order_units(&voucher, "cat", 3).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let (status, body) = platform.order_units(&voucher, "dan", 2).await;
    assert_eq!((status, body["error"].as_str()), (StatusCode::CONFLICT, Some("sold_out")), "{body}");
    let (status, _) = platform.order_units(&voucher, "dan", 1).await;
    assert_eq!(status, StatusCode::ACCEPTED, "the last unit");

    let shown = platform.wait_voucher(&voucher, |v| v["created"] == 5).await;
    assert_eq!((shown["remaining"].as_u64(), shown["failed"].as_u64()), (Some(0), Some(0)), "{shown}");
    assert_eq!(platform.persistent_remaining(&voucher).await, 0);
    assert_eq!(platform.redis_remaining(&voucher).await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_window_pause_and_admin_updates_gate_admission() {
    the_window_pause_and_admin_updates_gate_admission_on(Platform::start().await).await;
}

/// The scenario on `platform` (also run on a Redis Cluster: `crate::cluster`).
pub(crate) async fn the_window_pause_and_admin_updates_gate_admission_on(platform: Platform) {
    let now = Utc::now();
    let future = platform.create_voucher_between(5, 1, now + Duration::hours(1), now + Duration::hours(2)).await;
    let (status, body) = platform.order(&future, "eve").await;
    assert_eq!((status, body["error"].as_str()), (StatusCode::CONFLICT, Some("not_started")), "{body}");

    let past = platform.create_voucher_between(5, 1, now - Duration::hours(2), now - Duration::seconds(1)).await;
    let (status, body) = platform.order(&past, "eve").await;
    assert_eq!((status, body["error"].as_str()), (StatusCode::CONFLICT, Some("ended")), "{body}");

    // Extending the end reopens the sale; an end before the start is refused.
    let (status, body) = platform.update_voucher(&past, json!({"ends_at": now - Duration::hours(3)})).await;
    assert_eq!((status, body["error"].as_str()), (StatusCode::BAD_REQUEST, Some("invalid_request")), "{body}");
    let (status, body) = platform.update_voucher(&past, json!({"ends_at": now + Duration::hours(1)})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = platform.order(&past, "eve").await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");

    // Pause refuses everyone without touching stock; resume admits again.
    let (status, body) = platform.update_voucher(&past, json!({"paused": true})).await;
    assert_eq!((status, body["paused"].as_bool()), (StatusCode::OK, Some(true)), "{body}");
    let (status, body) = platform.order(&past, "fay").await;
    assert_eq!((status, body["error"].as_str()), (StatusCode::CONFLICT, Some("paused")), "{body}");
    assert_eq!(platform.redis_remaining(&past).await, 4);
    let shown = platform.wait_voucher(&past, |v| v["paused"] == true && v["created"] == 1).await;
    assert_eq!(shown["remaining"], 4, "{shown}");
    let (status, _) = platform.update_voucher(&past, json!({"paused": false})).await;
    assert_eq!(status, StatusCode::OK);
    let (status, body) = platform.order(&past, "fay").await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");

    // Bad updates change nothing.
    for bad in [json!({}), json!({"add_stock": 1, "colour": "red"}), json!({"paused": "yes"})] {
        let (status, body) = platform.update_voucher(&past, bad.clone()).await;
        assert_eq!((status, body["error"].as_str()), (StatusCode::BAD_REQUEST, Some("invalid_request")), "{bad}");
    }
    let unknown = uuid::Uuid::now_v7();
    let (status, body) = platform.update_voucher(&unknown.to_string(), json!({"paused": true})).await;
    assert_eq!((status, body["error"].as_str()), (StatusCode::NOT_FOUND, Some("unknown_voucher")), "{body}");

    // The list shows both vouchers, newest first, with their current state.
    let (status, list) = platform.get(&format!("{}/api/v1/vouchers?limit=100", platform.base)).await;
    assert_eq!(status, StatusCode::OK, "{list}");
    let ids: Vec<_> = list["vouchers"].as_array().expect("vouchers").iter().map(|v| v["voucher_id"].clone()).collect();
    assert_eq!(ids, [json!(past), json!(future)]);
    let (status, page) = platform.get(&format!("{}/api/v1/vouchers?limit=1", platform.base)).await;
    assert_eq!((status, page["next"].clone()), (StatusCode::OK, json!(past)), "{page}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn added_stock_reaches_redis_and_the_persistent_stock() {
    added_stock_reaches_redis_and_the_persistent_stock_on(Platform::start().await).await;
}

/// The scenario on `platform` (also run on a Redis Cluster: `crate::cluster`).
pub(crate) async fn added_stock_reaches_redis_and_the_persistent_stock_on(platform: Platform) {
    let voucher = platform.create_voucher(1, 1).await;
    assert_eq!(platform.order(&voucher, "gus").await.0, StatusCode::ACCEPTED);
    assert_eq!(platform.order(&voucher, "hal").await.0, StatusCode::CONFLICT);

    let (status, body) = platform.update_voucher(&voucher, json!({"add_stock": 2})).await;
    assert_eq!((status, body["stock"].as_u64()), (StatusCode::OK, Some(3)), "{body}");
    assert_eq!(platform.redis_remaining(&voucher).await, 2);
    eventually(|| async { (platform.persistent_remaining(&voucher).await == 2).then_some(()) }).await;

    // The sold-out memo may refuse for up to its lifetime; Redis then admits.
    for user in ["hal", "ian"] {
        let order = eventually(|| async {
            let (status, body) = platform.order(&voucher, user).await;
            (status == StatusCode::ACCEPTED).then_some(body)
        })
        .await;
        let order = platform.wait_final(order["order_id"].as_str().expect("order_id")).await;
        assert_eq!(order["status"], "CREATED", "{order}");
    }
    let shown = platform.wait_voucher(&voucher, |v| v["created"] == 3).await;
    assert_eq!((shown["stock"].as_u64(), shown["remaining"].as_u64()), (Some(3), Some(0)), "{shown}");
    assert_eq!(platform.persistent_remaining(&voucher).await, 0);
    assert_eq!(platform.redis_remaining(&voucher).await, 0);
}
