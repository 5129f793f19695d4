//! The live follower: this ingress's own reader of the sales and orders
//! topics, from their end at start-up on.
//!
//! Every ingress follows both topics in full, outside any consumer group,
//! so each replica learns every acceptance and every decision and wakes its
//! own waiters and streams; no replica needs to know about the others. The
//! cost is one more reader of the topics per ingress. Records it cannot
//! read are skipped: the services that own the topics dead-letter them.

use std::sync::Arc;
use std::time::Duration;

use seckill_core::Event;
use seckill_kafka::{decode, retry_pause, Follower};
use seckill_store::OrderView;
use tokio_util::sync::CancellationToken;

use super::Live;

/// Follows `follower` until `shutdown`, applying what it reads to `live`.
pub(crate) async fn follow(follower: Follower, live: Arc<Live>, shutdown: CancellationToken) {
    live.following(follower.health());
    loop {
        let message = tokio::select! {
            () = shutdown.cancelled() => return,
            message = follower.recv() => message,
        };
        let message = match message {
            Ok(message) => message,
            Err(error) => {
                tracing::warn!(%error, "The live follower could not read; retrying.");
                if retry_pause(&shutdown).await.is_err() {
                    return;
                }
                continue;
            }
        };
        let Ok(envelope) = decode(&message) else { continue };
        live.metrics.followed.inc();
        match &envelope.event {
            Event::VoucherCreated(created) => live.voucher_changed(created.voucher_id),
            Event::VoucherUpdated(updated) => live.voucher_changed(updated.voucher_id),
            event => {
                if let Some(row) = OrderView::from_event(event) {
                    live.order_changed(row);
                }
            }
        }
    }
}

/// How long the broker may hold the follower's fetch when nothing is new.
pub(crate) fn fetch_wait(live: &Live) -> Duration {
    Duration::from_millis(live.config.follow_fetch_wait_ms)
}
