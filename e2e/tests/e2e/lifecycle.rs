//! Orders after admission: cancellation returns stock that sells again,
//! a free claim (`POST .../confirm`, paid), and expiry of unpaid orders
//! across a restart.

use reqwest::StatusCode;
use serde_json::json;

use crate::helpers::{eventually, Platform};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_order_returns_its_stock_and_someone_else_buys_it() {
    let platform = Platform::start().await;
    let voucher = platform.create_voucher(1, 1).await;
    let (_, placed) = platform.order(&voucher, "amy").await;
    let order = placed["order_id"].as_str().expect("order_id").to_owned();
    assert_eq!(platform.wait_final(&order).await["status"], "CREATED");
    let (status, body) = platform.order(&voucher, "bo").await;
    assert_eq!((status, body["error"].as_str()), (StatusCode::CONFLICT, Some("sold_out")), "{body}");

    // Only the owner may cancel; anyone else sees no such order.
    let cancel = format!("/api/v1/orders/{order}/cancel");
    let (status, body) = platform.post(&cancel, Some("bo"), None).await;
    assert_eq!((status, body["error"].as_str()), (StatusCode::NOT_FOUND, Some("not_found")), "{body}");
    let (status, body) = platform.post(&cancel, Some("amy"), None).await;
    assert_eq!((status, body["requested"].as_str()), (StatusCode::ACCEPTED, Some("cancel")), "{body}");
    let cancelled = platform.wait_order(&order, |o| o["status"] == "CANCELLED").await;
    assert_eq!(cancelled["reason"], "requested", "{cancelled}");
    let (status, body) = platform.post(&cancel, Some("amy"), None).await;
    assert_eq!((status, body["status"].as_str()), (StatusCode::OK, Some("CANCELLED")), "twice is a no-op: {body}");
    eventually(|| async { (platform.redis_remaining(&voucher).await == 1).then_some(()) }).await;
    assert_eq!(platform.persistent_remaining(&voucher).await, 1);

    // The unit sells again (after the sold-out memo's short lifetime).
    let resold = eventually(|| async {
        let (status, body) = platform.order(&voucher, "bo").await;
        (status == StatusCode::ACCEPTED).then_some(body)
    })
    .await;
    let resold = platform.wait_final(resold["order_id"].as_str().expect("order_id")).await;
    assert_eq!(resold["status"], "CREATED", "{resold}");
    let shown = platform.wait_voucher(&voucher, |v| v["created"] == 2).await;
    assert_eq!((shown["cancelled"].as_u64(), shown["remaining"].as_u64()), (Some(1), Some(0)), "{shown}");
    assert_eq!(platform.persistent_remaining(&voucher).await, 0);
    assert_eq!(platform.redis_remaining(&voucher).await, 0);

    // A failed order cannot be cancelled; an unknown one does not exist; the
    // persistent stock did not move.
    let (status, placed) = platform.order(&voucher, "cy").await;
    assert_eq!(status, StatusCode::CONFLICT, "{placed}");
    platform.add_redis_units(&voucher, 1).await;
    let failed = eventually(|| async {
        let (status, body) = platform.order(&voucher, "cy").await;
        (status == StatusCode::ACCEPTED).then_some(body)
    })
    .await;
    let failed = failed["order_id"].as_str().expect("order_id").to_owned();
    assert_eq!(platform.wait_final(&failed).await["status"], "FAILED");
    let (status, body) = platform.post(&format!("/api/v1/orders/{failed}/cancel"), Some("cy"), None).await;
    assert_eq!((status, body["error"].as_str()), (StatusCode::CONFLICT, Some("not_cancellable")), "{body}");
    let unknown = uuid::Uuid::now_v7();
    let (status, _) = platform.post(&format!("/api/v1/orders/{unknown}/cancel"), Some("cy"), None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = platform.post("/api/v1/orders/not-an-id/cancel", Some("cy"), None).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(platform.persistent_remaining(&voucher).await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unpaid_orders_expire_after_the_hold_even_across_a_restart_and_a_late_confirmation() {
    let mut platform = Platform::start().await;
    let now = chrono::Utc::now();
    let voucher = platform
        .create_voucher_from(json!({
            "stock": 3, "per_user_limit": 1, "hold_seconds": 2,
            "begins_at": now - chrono::Duration::seconds(1), "ends_at": now + chrono::Duration::hours(1),
        }))
        .await;
    let mut orders = Vec::new();
    for user in ["kim", "lee"] {
        let (status, body) = platform.order(&voucher, user).await;
        assert_eq!(status, StatusCode::ACCEPTED, "{body}");
        let order = body["order_id"].as_str().expect("order_id").to_owned();
        assert_eq!(platform.wait_final(&order).await["status"], "CREATED");
        orders.push(order);
    }
    let (kept, dropped) = (&orders[0], &orders[1]);
    let (status, body) = platform.post(&format!("/api/v1/orders/{kept}/confirm"), Some("kim"), None).await;
    assert_eq!((status, body["requested"].as_str()), (StatusCode::ACCEPTED, Some("confirm")), "{body}");
    platform.wait_order(kept, |o| o["status"] == "PAID").await;

    // The processor is down when the hold ends; the deadline is persisted.
    platform.processor.take().expect("running").stop().await;
    let pay_by: chrono::DateTime<chrono::Utc> = platform.wait_final(dropped).await["pay_by"]
        .as_str()
        .expect("a held order shows its deadline")
        .parse()
        .expect("a time");
    let past_it = (pay_by - chrono::Utc::now()).to_std().unwrap_or_default() + std::time::Duration::from_millis(300);
    tokio::time::sleep(past_it).await;
    let still = platform.wait_final(dropped).await;
    assert_eq!(still["status"], "CREATED", "nobody expired it while the processor was down: {still}");
    // A confirmation after the deadline reaches the log before the expiry
    // does (the sweeper runs in the processor): the deadline still decides.
    let (status, body) = platform.post(&format!("/api/v1/orders/{dropped}/confirm"), Some("lee"), None).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    platform.start_processor().await;

    let expired = platform.wait_order(dropped, |o| o["status"] == "CANCELLED").await;
    assert_eq!(expired["reason"], "expired", "{expired}");
    let (status, body) = platform.post(&format!("/api/v1/orders/{dropped}/confirm"), Some("lee"), None).await;
    assert_eq!((status, body["error"].as_str()), (StatusCode::CONFLICT, Some("not_confirmable")), "{body}");
    let shown = platform.wait_voucher(&voucher, |v| v["cancelled"] == 1).await;
    assert_eq!((shown["paid"].as_u64(), shown["remaining"].as_u64()), (Some(1), Some(2)), "{shown}");
    eventually(|| async { (platform.redis_remaining(&voucher).await == 2).then_some(()) }).await;
    assert_eq!(platform.persistent_remaining(&voucher).await, 2);
    assert_eq!(platform.wait_final(kept).await["status"], "PAID", "a paid order never expires");
}
