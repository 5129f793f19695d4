//! The gate follower: makes the admission gate (Redis) follow the log, off
//! the processor's decision path.
//!
//! Deciding needs no Redis: the processor decides against its own store.
//! Only two things go back to Redis afterwards: the units of every failed
//! or cancelled order (`release.lua`), and the voucher definitions and
//! admin updates of the sales topic (`load_voucher.lua`,
//! `update_voucher.lua`, for an ingress that published one and died before
//! applying it). Done inside the decision batch, a Redis master that cannot
//! be reached held every decision of its partitions until it came back.
//!
//! The follower consumes the sales topic (definitions, updates) and the
//! orders topic (`OrderFailed`, `OrderCancelled`) in a consumer group of
//! its own, so the log is its queue: it is bounded by the topics'
//! retention, not by memory, and nothing is lost in a crash. A batch's
//! offsets are stored only once Redis has acknowledged every call of it; a
//! Redis that fails is asked again (the consumer's retry pause) and the
//! follower fetches nothing more meanwhile, so the backlog waits in Kafka,
//! not in this process. A crash, a rebalance or a rewound batch calls the
//! scripts again, and each acts once (an order is released once, a
//! definition loaded once, an update applied once): exactly once in effect.
//!
//! The two topics are read independently, so a release may reach Redis
//! before the definition of its voucher: it then finds no voucher and
//! gives nothing back, which is right, as nothing could have been admitted
//! there either.

use seckill_core::event::{Event, OrderAccepted};
use seckill_core::metrics::ConsumerMetrics;
use seckill_core::Envelope;
use seckill_gate::Gate;
use seckill_kafka::{decode, record_kind, retry, BatchConsumer, BatchHandler, Interrupted, OwnedMessage};
use tokio_util::sync::CancellationToken;

/// The event types whose effects the follower applies to Redis.
const FOLLOWED: [&str; 4] = ["VoucherCreated", "VoucherUpdated", "OrderFailed", "OrderCancelled"];

/// The follower's parts.
#[derive(Debug)]
pub(crate) struct GateFollower {
    pub(crate) gate: Gate,
    /// The processor's metrics: `seckill_compensations_total` and the
    /// `applied` count of the definitions and updates it follows.
    pub(crate) metrics: ConsumerMetrics,
}

impl GateFollower {
    /// Runs until `shutdown`, then commits the stored offsets.
    pub(crate) async fn run(self, consumer: BatchConsumer, shutdown: CancellationToken) {
        consumer.run(&self, &shutdown).await;
        tracing::info!("Gate follower stopped.");
    }

    /// Applies one record's effect on Redis, if it has one.
    async fn follow(&self, envelope: &Envelope, shutdown: &CancellationToken) -> Result<(), Interrupted> {
        match &envelope.event {
            Event::VoucherCreated(voucher) => {
                retry(shutdown, "loading a voucher into Redis", || self.gate.load_voucher(voucher)).await?;
                self.metrics.events.with_label_values(&["VoucherCreated", "applied"]).inc();
            }
            Event::VoucherUpdated(update) => {
                retry(shutdown, "applying a voucher update to Redis", || {
                    self.gate.update_voucher(envelope.event_id, update)
                })
                .await?;
                self.metrics.events.with_label_values(&["VoucherUpdated", "applied"]).inc();
            }
            Event::OrderFailed(failed) => self.release(&failed.order, shutdown).await?,
            Event::OrderCancelled(cancelled) => self.release(&cancelled.order, shutdown).await?,
            _ => {}
        }
        Ok(())
    }

    /// Gives the gate back the units of a failed or cancelled order, if
    /// this Redis admitted it (`release.lua`).
    async fn release(&self, order: &OrderAccepted, shutdown: &CancellationToken) -> Result<(), Interrupted> {
        let released = retry(shutdown, "returning an order's units to Redis", || {
            self.gate.release(order.voucher_id, &order.user_id, order.quantity, order.order_id, None)
        })
        .await?;
        if released {
            self.metrics.compensations.inc();
        }
        Ok(())
    }
}

impl BatchHandler for GateFollower {
    /// Follows every record of `batch`, in order. A record that cannot be
    /// read is passed by: the processor dead-letters those of the sales
    /// topic, and the orders topic holds only what the processor wrote.
    async fn handle(&self, batch: &[OwnedMessage], shutdown: &CancellationToken) -> Result<(), Interrupted> {
        for message in batch {
            // Most records (every acceptance and creation) mean nothing
            // here: their `type` header says so without decoding them.
            if record_kind(message).is_some_and(|kind| !FOLLOWED.contains(&kind)) {
                continue;
            }
            if let Ok(envelope) = decode(message) {
                self.follow(&envelope, shutdown).await?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use seckill_core::Event;

    use super::FOLLOWED;

    #[test]
    fn every_followed_type_is_an_event_kind() {
        for kind in FOLLOWED {
            assert!(Event::KINDS.contains(&kind), "{kind} is not the type header of any event");
        }
    }
}
