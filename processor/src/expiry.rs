//! The expiry sweeper: cancels orders not confirmed within their hold.
//!
//! Deadlines live in the stock store (written in the same transaction that
//! created the order), so expiry survives restarts: a processor that was
//! down when a hold ended finds the order on its first sweep. The sweeper
//! does not cancel anything itself; it publishes `CancelRequested` (reason
//! `expired`) on the sales topic, and the pipeline decides it in log order
//! with everything else, so a confirmation that got there first wins.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::Utc;
use seckill_core::event::Event;
use seckill_core::metrics::ProcessorMetrics;
use seckill_core::topics::Topics;
use seckill_core::{Envelope, OrderId};
use seckill_kafka::EventProducer;
use seckill_store::{StockStore, MAX_EXPIRED_PAGE};
use tokio_util::sync::CancellationToken;

/// How long a published request is given to be decided before the order,
/// still held, is requested again (the first request may have been lost
/// with a crashed broker or processor).
const REQUEST_AGAIN_AFTER: Duration = Duration::from_secs(30);

/// Finds expired holds and requests their cancellation.
#[derive(Debug)]
pub(crate) struct ExpirySweeper {
    pub(crate) store: Arc<dyn StockStore>,
    pub(crate) producer: EventProducer,
    pub(crate) topics: Topics,
    pub(crate) interval: Duration,
    pub(crate) metrics: ProcessorMetrics,
}

impl ExpirySweeper {
    /// Sweeps every `interval` until `shutdown`.
    pub(crate) async fn run(self, shutdown: CancellationToken) {
        // Bounded by the page size: entries are dropped once older than
        // REQUEST_AGAIN_AFTER, and at most one page is added per sweep.
        let mut requested: HashMap<OrderId, Instant> = HashMap::new();
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = tokio::time::sleep(self.interval) => {}
            }
            requested.retain(|_, at| at.elapsed() < REQUEST_AGAIN_AFTER);
            if let Err(error) = self.sweep(&mut requested).await {
                tracing::warn!(%error, "Expiry sweep failed; trying again next interval.");
            }
        }
    }

    async fn sweep(&self, requested: &mut HashMap<OrderId, Instant>) -> Result<(), String> {
        let due = self.store.expired(Utc::now(), MAX_EXPIRED_PAGE).await.map_err(|e| e.to_string())?;
        for request in due {
            if requested.contains_key(&request.order_id) {
                continue;
            }
            let order_id = request.order_id;
            let envelope = Envelope::new(Event::CancelRequested(request));
            self.producer.send(&self.topics.sales, &envelope).await.map_err(|e| e.to_string())?;
            requested.insert(order_id, Instant::now());
            self.metrics.expiry_requests.inc();
            tracing::debug!(%order_id, "Hold expired; cancellation requested.");
        }
        Ok(())
    }
}
