//! An owner's order is never `404` from its `202` on: readable, cancellable
//! and confirmable (a free claim, paid) at once, in every layout.

use futures::future::join_all;
use reqwest::StatusCode;

use super::{act, read};
use crate::helpers::{eventually, Platform};

/// Buyers place an order through `place` and at once read it and cancel or
/// confirm it through `act_on`; every order ends as they asked.
async fn buyers_act_right_after_their_202(platform: &Platform, place: &str, act_on: &str, buyers: usize) {
    let voucher = platform.create_voucher(buyers as u64, 1).await;
    let runs = (0..buyers).map(|i| {
        let voucher = voucher.clone();
        async move {
            let user = format!("fast-{i}");
            let (status, placed) = act(platform, place, &format!("/api/v1/vouchers/{voucher}/orders"), &user).await;
            assert_eq!(status, StatusCode::ACCEPTED, "{placed}");
            let order = placed["order_id"].as_str().expect("order_id").to_owned();
            let (status, _, shown) = read(platform, act_on, &format!("/api/v1/orders/{order}"), Some(&user), &[]).await;
            assert_eq!(status, StatusCode::OK, "{user} read {order} right after its 202: {shown}");
            assert_eq!(
                (shown["order_id"].as_str(), shown["user_id"].as_str()),
                (Some(order.as_str()), Some(user.as_str()))
            );
            assert_eq!((shown["voucher_id"].as_str(), shown["quantity"].as_u64()), (Some(voucher.as_str()), Some(1)));
            let action = if i % 2 == 0 { "cancel" } else { "confirm" };
            let (status, body) = act(platform, act_on, &format!("/api/v1/orders/{order}/{action}"), &user).await;
            assert!(
                status == StatusCode::ACCEPTED || status == StatusCode::OK,
                "{action} right after the 202: {status} {body}"
            );
            (order, action)
        }
    });
    for (order, action) in join_all(runs).await {
        let expected = if action == "cancel" { "CANCELLED" } else { "PAID" };
        let shown = platform.wait_order(&order, |o| o["status"] == expected).await;
        assert_eq!(shown["status"], expected);
    }
    // The cancelled units went back: half the stock is left, everywhere.
    let remaining = (buyers / 2) as u64;
    eventually(|| async { (platform.persistent_remaining(&voucher).await == remaining).then_some(()) }).await;
    assert_eq!(platform.redis_remaining(&voucher).await, remaining);
}

#[tokio::test]
async fn an_owner_reads_cancels_and_confirms_right_after_the_202_with_the_view_in_another_process() {
    // The e2e ingress reads the view through the projector's HTTP API, as
    // separate processes do.
    let platform = Platform::start().await;
    let base = platform.base.clone();
    buyers_act_right_after_their_202(&platform, &base, &base, 40).await;
}

#[tokio::test]
async fn an_owner_reads_cancels_and_confirms_right_after_the_202_with_the_view_in_process() {
    let platform = Platform::start().await;
    let (base, _running) = platform.ingress_sharing_the_view().await;
    buyers_act_right_after_their_202(&platform, &base, &base, 20).await;
}

#[tokio::test]
async fn an_order_placed_on_one_replica_is_read_and_changed_at_once_on_another() {
    let platform = Platform::start().await;
    let (other, _running) = platform.another_ingress().await;
    buyers_act_right_after_their_202(&platform, &platform.base, &other, 20).await;
    // A voucher created on one replica is readable on the other at once.
    let voucher = platform.create_voucher(3, 1).await;
    let (status, _, shown) = read(&platform, &other, &format!("/api/v1/vouchers/{voucher}"), None, &[]).await;
    assert_eq!(status, StatusCode::OK, "{shown}");
    assert_eq!(shown["available"], 3);
    // Someone else's order stays invisible, pending or not.
    let (_, placed) = platform.order(&voucher, "owner").await;
    let order = placed["order_id"].as_str().expect("order_id");
    let (status, _, _) = read(&platform, &other, &format!("/api/v1/orders/{order}"), Some("intruder"), &[]).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}
