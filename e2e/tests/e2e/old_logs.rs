//! A log written before payments: `hold_seconds` vouchers, `ConfirmRequested`
//! and `OrderConfirmed` records with `confirmed_at`, as earlier versions
//! wrote them, byte for byte. The processor decides them, the projector
//! shows the confirmed orders as `PAID`, and a view rebuilt from the log
//! equals the live one.

use std::sync::Arc;

use chrono::{Duration, Utc};
use seckill_analytics::rebuild;
use seckill_devstack::TempDir;
use seckill_kafka::OwnedHeaders;
use seckill_store::embedded::EmbeddedViewStore;
use seckill_store::ViewStore;
use seckill_web::RemoteView;
use serde_json::json;
use uuid::Uuid;

use crate::helpers::Platform;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_written_before_payments_is_decided_projected_and_rebuilt() {
    let platform = Platform::start().await;
    let topics = platform.kafka.topics();
    let producer = platform.producer();
    let (voucher, decided, recorded) = (Uuid::now_v7(), Uuid::now_v7(), Uuid::now_v7());
    let now = Utc::now();
    let at = |ms: i64| (now + Duration::milliseconds(ms)).to_rfc3339();
    let record = |fields: serde_json::Value| {
        let mut envelope = json!({ "schema": 1, "event_id": Uuid::now_v7(), "emitted_at": at(0) });
        envelope.as_object_mut().expect("an object").extend(fields.as_object().expect("fields").clone());
        envelope.to_string()
    };
    let order = |id: Uuid, user: &str| json!({ "order_id": id, "voucher_id": voucher, "user_id": user, "quantity": 1, "accepted_at": at(0) });
    let with = |mut base: serde_json::Value, more: serde_json::Value| {
        base.as_object_mut().expect("an object").extend(more.as_object().expect("fields").clone());
        base
    };
    let sales = [
        record(json!({ "type": "VoucherCreated", "voucher_id": voucher, "stock": 5, "per_user_limit": 1,
            "begins_at": at(-1_000), "ends_at": at(3_600_000), "hold_seconds": 60 })),
        // Decided by this processor: accepted, then confirmed by its owner.
        record(with(json!({ "type": "OrderAccepted" }), order(decided, "old-1"))),
        record(json!({ "type": "ConfirmRequested", "order_id": decided, "voucher_id": voucher,
            "requested_at": at(10) })),
    ];
    for payload in &sales {
        producer
            .send_raw(&topics.sales, Some(voucher.to_string().as_bytes()), payload.as_bytes(), OwnedHeaders::new())
            .await
            .expect("an old sales record produced");
    }
    // Decided by an earlier version: its outcomes are in the orders topic.
    let outcomes = [
        record(with(json!({ "type": "OrderCreated", "decided_at": at(5), "remaining": 4 }), order(recorded, "old-2"))),
        record(with(json!({ "type": "OrderConfirmed", "confirmed_at": at(20) }), order(recorded, "old-2"))),
    ];
    for payload in &outcomes {
        producer
            .send_raw(&topics.orders, Some(voucher.to_string().as_bytes()), payload.as_bytes(), OwnedHeaders::new())
            .await
            .expect("an old outcome produced");
    }

    let decided_row = platform.wait_order(&decided.to_string(), |o| o["status"] == "PAID").await;
    assert!(decided_row["paid_at"].is_string() && decided_row.get("payment_id").is_none(), "{decided_row}");
    let recorded_row = platform.wait_order(&recorded.to_string(), |o| o["status"] == "PAID").await;
    let paid_at: chrono::DateTime<Utc> = recorded_row["paid_at"].as_str().expect("paid_at").parse().expect("a time");
    assert_eq!(paid_at.timestamp_millis(), (now + Duration::milliseconds(20)).timestamp_millis(), "{recorded_row}");
    let view = platform.wait_voucher(&voucher.to_string(), |v| v["paid"] == 2).await;
    assert_eq!((view["payment_seconds"].as_u64(), view["hold_seconds"].as_u64()), (Some(60), Some(60)), "{view}");
    assert_eq!(
        (view["price"].as_u64(), view.get("currency")),
        (Some(0), None),
        "a voucher from before prices is free: {view}"
    );

    let live = RemoteView::new(&format!("http://{}", platform.projector_addr)).expect("live view");
    let dir = TempDir::new().expect("dir");
    let rebuilt: Arc<dyn ViewStore> =
        Arc::new(EmbeddedViewStore::open(&dir.path().join("rebuilt.redb")).expect("opens"));
    let report = rebuild::rebuild_view(&platform.kafka, Arc::clone(&rebuilt)).await.expect("rebuilds");
    let differences = rebuild::verify(&report, rebuilt.as_ref(), &live).await.expect("compares");
    assert!(differences.is_empty(), "{differences:#?}");
}
