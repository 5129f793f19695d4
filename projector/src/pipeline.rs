//! The projector's consume → apply → store-offsets loop.

use std::sync::Arc;

use chrono::Utc;
use seckill_core::metrics::ConsumerMetrics;
use seckill_kafka::{decode, retry, BatchHandler, DeadLetter, Interrupted, OwnedMessage};
use seckill_store::{OrderStatus, OrderView, ViewStore};
use tokio_util::sync::CancellationToken;

/// Applies batches to the view.
#[derive(Debug)]
pub(crate) struct Projection {
    pub(crate) view: Arc<dyn ViewStore>,
    pub(crate) dead_letter: DeadLetter,
    pub(crate) metrics: ConsumerMetrics,
}

impl BatchHandler for Projection {
    async fn handle(&self, batch: &[OwnedMessage], shutdown: &CancellationToken) -> Result<(), Interrupted> {
        self.metrics.batch_size.observe(batch.len() as f64);
        let mut events = Vec::with_capacity(batch.len());
        let mut rejects = Vec::new();
        for message in batch {
            match decode(message) {
                Ok(envelope) => events.push(envelope),
                Err(reason) => rejects.push((message, reason)),
            }
        }

        let changed = retry(shutdown, "applying a batch to the view", || self.view.apply(events.clone())).await?;
        let now = Utc::now();
        for (event, changed) in events.iter().zip(changed) {
            let result = if changed { "applied" } else { "duplicate" };
            self.metrics.events.with_label_values(&[event.kind(), result]).inc();
            if let (true, Some(row)) = (changed, OrderView::from_event(&event.event)) {
                if row.status != OrderStatus::Pending {
                    let micros = (now - row.accepted_at).num_microseconds().unwrap_or(0);
                    self.metrics.order_latency.with_label_values(&["visible"]).observe(micros as f64 / 1e6);
                }
            }
        }
        self.dead_letter.park_all(&rejects, shutdown).await?;
        self.metrics.dead_letters.inc_by(rejects.len() as u64);
        self.metrics.events.with_label_values(&["invalid", "dead_lettered"]).inc_by(rejects.len() as u64);
        Ok(())
    }
}
