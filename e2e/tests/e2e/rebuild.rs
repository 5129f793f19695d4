//! Rebuilding the view from the log gives the live view, row for row; a
//! corrupted live row is reported, and only that row.

use std::sync::Arc;

use reqwest::StatusCode;
use seckill_analytics::rebuild;
use seckill_core::event::{Event, VoucherUpdated};
use seckill_core::{Envelope, VoucherId};
use seckill_devstack::TempDir;
use seckill_store::embedded::EmbeddedViewStore;
use seckill_store::ViewStore;
use seckill_web::RemoteView;
use serde_json::json;

use crate::helpers::{eventually, Platform};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_view_rebuilt_from_the_log_equals_the_live_one_until_a_row_is_corrupted() {
    let mut platform = Platform::start().await;
    let voucher = platform.create_voucher(3, 1).await;
    let mut created = Vec::new();
    for user in ["r1", "r2", "r3", "r4"] {
        let (status, body) = platform.order(&voucher, user).await;
        if status == StatusCode::ACCEPTED {
            created.push((user, body["order_id"].as_str().expect("order_id").to_owned()));
        }
    }
    assert_eq!(created.len(), 3);
    let (user, order) = &created[0];
    platform.wait_final(order).await;
    let (status, _) = platform.post(&format!("/api/v1/orders/{order}/cancel"), Some(user), None).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let (status, _) = platform.update_voucher(&voucher, json!({"add_stock": 2, "paused": false})).await;
    assert_eq!(status, StatusCode::OK);
    let second = platform.create_voucher(10, 2).await;
    assert_eq!(platform.order_units(&second, "r5", 2).await.0, StatusCode::ACCEPTED);
    platform.wait_voucher(&voucher, |v| v["cancelled"] == 1 && v["created"] == 3 && v["stock"] == 5).await;
    platform.wait_voucher(&second, |v| v["created"] == 1).await;

    let live = RemoteView::new(&format!("http://{}", platform.projector_addr)).expect("live view");
    let dir = TempDir::new().expect("dir");
    let rebuilt: Arc<dyn ViewStore> =
        Arc::new(EmbeddedViewStore::open(&dir.path().join("rebuilt.redb")).expect("opens"));
    let report = rebuild::rebuild_view(&platform.kafka, Arc::clone(&rebuilt)).await.expect("rebuilds");
    assert_eq!((report.orders.len(), report.vouchers.len()), (4, 2), "{report:?}");
    let differences = rebuild::verify(&report, rebuilt.as_ref(), &live).await.expect("compares");
    assert!(differences.is_empty(), "{differences:#?}");

    // Corrupt one row of the live view behind the projector's back.
    platform.projector.take().expect("running").stop().await;
    let live_file = platform.infra.dir.path().join("view.redb");
    {
        let store = eventually(|| async { EmbeddedViewStore::open(&live_file).ok() }).await;
        let voucher_id: VoucherId = voucher.parse().expect("id");
        let stray = VoucherUpdated { voucher_id, paused: Some(true), ends_at: None, add_stock: 0 };
        store.apply(vec![Envelope::new(Event::VoucherUpdated(stray))]).await.expect("applies");
    }
    platform.start_projector().await;
    let differences = eventually(|| async {
        let differences = rebuild::verify(&report, rebuilt.as_ref(), &live).await.ok()?;
        Some(differences)
    })
    .await;
    println!(
        "rebuild: {} records, {} orders, {} vouchers; after corruption: {differences:?}",
        report.records,
        report.orders.len(),
        report.vouchers.len()
    );
    assert_eq!(differences.len(), 1, "{differences:#?}");
    assert_eq!((differences[0].row, differences[0].id.as_str()), ("voucher", voucher.as_str()));
    assert_eq!(differences[0].live.as_ref().map(|v| v["paused"].clone()), Some(json!(true)));
    assert_eq!(differences[0].rebuilt.as_ref().map(|v| v["paused"].clone()), Some(json!(false)));
}
