//! Every decision reaches the log, in order, even when the processor dies
//! after committing a batch and before its outcomes were acknowledged.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use reqwest::StatusCode;
use seckill_core::decision::StockLevel;
use seckill_core::{Envelope, VoucherId};
use seckill_kafka::Message;
use seckill_store::{Decided, DueHold, HoldCursor, PendingRefund, StockInput, StockStore, StoreError};
use tokio::sync::Notify;

use crate::helpers::Platform;

/// The real store, with a crash injected: the first batch holding an
/// order's acceptance and its cancellation is committed, then the call
/// never returns (the processor hangs before emitting, until killed).
#[derive(Debug)]
struct DiesAfterCommit {
    store: Arc<dyn StockStore>,
    armed: AtomicBool,
    committed: Arc<Notify>,
}

fn accepted_and_cancelled(batch: &[StockInput]) -> bool {
    batch.iter().any(|input| match input {
        StockInput::Cancel(request) => {
            batch.iter().any(|other| matches!(other, StockInput::Order(order) if order.order_id == request.order_id))
        }
        _ => false,
    })
}

#[async_trait]
impl StockStore for DiesAfterCommit {
    async fn apply(&self, batch: Vec<StockInput>) -> Result<Vec<Decided>, StoreError> {
        let dies = accepted_and_cancelled(&batch) && self.armed.swap(false, Ordering::SeqCst);
        let decided = self.store.apply(batch).await?;
        if dies {
            self.committed.notify_one();
            std::future::pending::<()>().await;
        }
        Ok(decided)
    }

    async fn stock(&self, voucher: VoucherId) -> Result<Option<StockLevel>, StoreError> {
        self.store.stock(voucher).await
    }

    async fn expired(
        &self,
        now: DateTime<Utc>,
        after: Option<HoldCursor>,
        limit: usize,
    ) -> Result<Vec<DueHold>, StoreError> {
        self.store.expired(now, after, limit).await
    }

    async fn put_pending_refund(&self, refund: &PendingRefund) -> Result<(), StoreError> {
        self.store.put_pending_refund(refund).await
    }

    async fn due_pending_refunds(&self, now: DateTime<Utc>, limit: usize) -> Result<Vec<PendingRefund>, StoreError> {
        self.store.due_pending_refunds(now, limit).await
    }

    async fn delete_pending_refund(&self, refund: &PendingRefund) -> Result<(), StoreError> {
        self.store.delete_pending_refund(refund).await
    }

    async fn order_record(
        &self,
        voucher: VoucherId,
        order: seckill_core::OrderId,
    ) -> Result<Option<seckill_core::decision::OrderRecord>, StoreError> {
        self.store.order_record(voucher, order).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_processor_killed_between_commit_and_emit_still_logs_every_outcome_in_order() {
    let mut platform = Platform::start().await;
    platform.processor.take().expect("running").stop().await;

    // An order and its cancellation, both in the log before the processor
    // reads either: they arrive in one batch.
    let voucher = platform.create_voucher(5, 1).await;
    let (status, placed) = platform.order(&voucher, "buyer").await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let order = placed["order_id"].as_str().expect("order_id").to_owned();
    let (status, body) = platform.post(&format!("/api/v1/orders/{order}/cancel"), Some("buyer"), None).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let sales = platform.kafka.topics().sales;
    platform
        .read_topic(&sales, |read| {
            let kinds: Vec<&str> =
                read.iter().filter_map(|m| Envelope::decode(m.payload()?).ok()).map(|e| e.kind()).collect();
            kinds.contains(&"OrderAccepted") && kinds.contains(&"CancelRequested")
        })
        .await;

    let committed = Arc::new(Notify::new());
    let injected = Arc::clone(&committed);
    platform
        .start_processor_wrapping(move |store| {
            Arc::new(DiesAfterCommit { store, armed: AtomicBool::new(true), committed: injected })
        })
        .await;
    committed.notified().await;
    // Killed: nothing flushed, no offset stored.
    platform.processor.take().expect("running").abort().await;

    platform.start_processor().await;
    platform.wait_order(&order, |o| o["status"] == "CANCELLED").await;
    let orders_topic = platform.kafka.topics().orders;
    let outcomes = platform
        .read_topic(&orders_topic, |read| {
            read.iter().filter_map(|m| Envelope::decode(m.payload()?).ok()).any(|e| e.kind() == "OrderCancelled")
        })
        .await;
    let of_order: Vec<(i64, &'static str, uuid::Uuid)> = outcomes
        .iter()
        .filter_map(|m| Some((m.offset(), Envelope::decode(m.payload()?).ok()?)))
        .filter(|(_, e)| e.event.order().is_some_and(|o| o.order_id.to_string() == order))
        .map(|(offset, e)| (offset, e.kind(), e.event_id))
        .collect();
    let mut in_log_order = of_order.clone();
    in_log_order.sort_by_key(|(offset, _, _)| *offset);
    let kinds: Vec<&str> = in_log_order.iter().map(|(_, kind, _)| *kind).collect();
    assert_eq!(kinds.first(), Some(&"OrderCreated"), "the creation reached the log first: {kinds:?}");
    assert!(kinds.contains(&"OrderCancelled"), "{kinds:?}");
    let created_at = kinds.iter().position(|k| *k == "OrderCreated").expect("created");
    let cancelled_at = kinds.iter().position(|k| *k == "OrderCancelled").expect("cancelled");
    assert!(created_at < cancelled_at, "in the order decided: {kinds:?}");
    // However often they were sent, each outcome is the one first decided.
    let ids: std::collections::HashSet<uuid::Uuid> = in_log_order.iter().map(|(_, _, id)| *id).collect();
    assert_eq!(ids.len(), 2, "one creation and one cancellation: {in_log_order:?}");
    assert_eq!(platform.persistent_remaining(&voucher).await, 5, "the unit came back once");
    let (_, shown) = platform.get(&format!("{}/api/v1/vouchers/{voucher}", platform.base)).await;
    assert_eq!(shown["available"], 5);
}

/// Redis forgets what a user holds (its last writes lost, say): Redis admits
/// the user again, the processor refuses past the limit, and the units go
/// back to Redis once.
#[tokio::test]
async fn the_processor_refuses_orders_past_the_limit_that_redis_forgot() {
    let platform = Platform::start().await;
    let voucher = platform.create_voucher(10, 2).await;
    let (_, first) = platform.order_units(&voucher, "greedy", 2).await;
    let first = first["order_id"].as_str().expect("order_id").to_owned();
    assert_eq!(platform.wait_final(&first).await["status"], "CREATED");

    let keys = seckill_gate::VoucherKeys::new(&platform.redis.key_prefix, voucher.parse().expect("id"));
    let _: () = redis::pipe()
        .cmd("HDEL")
        .arg(&keys.bought)
        .arg("greedy")
        .cmd("HDEL")
        .arg(&keys.orders)
        .arg("greedy")
        .query_async(&mut platform.redis_connection().await)
        .await
        .expect("HDEL");
    let (status, second) = platform.order(&voucher, "greedy").await;
    assert_eq!(status, StatusCode::ACCEPTED, "Redis, having forgotten, admits: {second}");
    let second = second["order_id"].as_str().expect("order_id").to_owned();
    let failed = platform.wait_final(&second).await;
    assert_eq!((failed["status"].as_str(), failed["reason"].as_str()), (Some("FAILED"), Some("limit_exceeded")));
    assert_eq!(platform.persistent_remaining(&voucher).await, 8);
    let settled =
        crate::helpers::eventually(|| async { (platform.redis_remaining(&voucher).await == 8).then_some(()) });
    settled.await;
}
