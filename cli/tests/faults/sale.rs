//! The sales every fault runs under: five vouchers, one of each kind the
//! mixed load (`load`) buys from, created through the admin API.

use reqwest::StatusCode;
use seckill_devstack::TEST_ADMIN_TOKEN;
use serde_json::json;

use crate::check::Voucher;
use crate::cluster::{Cluster, Service};

/// Opens the five sales `under_load` describes; what the checker needs to
/// know of each.
pub async fn open_sales(cluster: &Cluster) -> Vec<Voucher> {
    let mut vouchers = Vec::new();
    for (stock, limit, hold_seconds, price) in [(1_000_000, 3, 2, 0), (40, 2, 0, 0), (1_000, 2, 3, 250)] {
        let id = create_priced_voucher(cluster, stock, limit, hold_seconds, price).await;
        vouchers.push(Voucher { id, limit, holds: hold_seconds > 0, priced: price > 0, queued: false, drawn: false });
    }
    let id = create_queue_voucher(cluster, 300, 2, 2).await;
    vouchers.push(Voucher { id, limit: 2, holds: true, priced: false, queued: true, drawn: false });
    let id = create_draw_voucher(cluster, 10, 2).await;
    vouchers.push(Voucher { id, limit: 1, holds: true, priced: false, queued: false, drawn: true });
    vouchers
}

/// A sale open now for an hour: `stock` units, `limit` per user, held
/// `hold_seconds`; its id.
pub async fn create_voucher(cluster: &Cluster, stock: u64, limit: u32, hold_seconds: u32) -> String {
    create_priced_voucher(cluster, stock, limit, hold_seconds, 0).await
}

/// A voucher selling at `price` euro cents (0: free).
pub async fn create_priced_voucher(
    cluster: &Cluster,
    stock: u64,
    limit: u32,
    payment_seconds: u32,
    price: u64,
) -> String {
    let now = chrono::Utc::now();
    let mut body = json!({
        "stock": stock, "per_user_limit": limit, "payment_seconds": payment_seconds,
        "begins_at": now - chrono::Duration::seconds(1), "ends_at": now + chrono::Duration::hours(1),
    });
    if price > 0 {
        body["price"] = price.into();
        body["currency"] = "EUR".into();
        body["title"] = "A priced voucher".into();
    }
    create_voucher_from(cluster, &body).await
}

/// A queue-mode sale open now for an hour: its room serves 200 places a
/// second while entries open stay under 1.5 × the units left; places idle
/// for 5 s are skipped, entries admit for 5 s.
pub async fn create_queue_voucher(cluster: &Cluster, stock: u64, limit: u32, hold_seconds: u32) -> String {
    let now = chrono::Utc::now();
    let body = json!({
        "stock": stock, "per_user_limit": limit, "payment_seconds": hold_seconds,
        "begins_at": now - chrono::Duration::seconds(1), "ends_at": now + chrono::Duration::hours(1),
        "mode": "queue", "queue_factor": 1.5, "queue_entry_rate": 200, "queue_idle_seconds": 5,
        "queue_token_seconds": 5,
    });
    create_voucher_from(cluster, &body).await
}

/// A draw open now for an hour: entries for the first 4 s, winners have
/// 8 s to order (users come back every second or two; a win left unused,
/// or an order cancelled or expired, promotes the next rank).
pub async fn create_draw_voucher(cluster: &Cluster, stock: u64, hold_seconds: u32) -> String {
    let now = chrono::Utc::now();
    let body = json!({
        "stock": stock, "per_user_limit": 1, "payment_seconds": hold_seconds,
        "begins_at": now - chrono::Duration::seconds(1), "ends_at": now + chrono::Duration::hours(1),
        "mode": "draw", "draw_at": now + chrono::Duration::seconds(4), "purchase_seconds": 8,
    });
    create_voucher_from(cluster, &body).await
}

/// Creates a voucher from a whole request body (admin); its id.
pub async fn create_voucher_from(cluster: &Cluster, body: &serde_json::Value) -> String {
    let response = cluster
        .http
        .post(format!("{}/api/v1/vouchers", cluster.url(Service::Ingress)))
        .header("authorization", format!("Bearer {TEST_ADMIN_TOKEN}"))
        .json(body)
        .send()
        .await
        .expect("ingress answers");
    let status = response.status();
    let created: serde_json::Value = response.json().await.expect("json");
    assert_eq!(status, StatusCode::CREATED, "{created}");
    created["voucher_id"].as_str().expect("id").to_owned()
}
