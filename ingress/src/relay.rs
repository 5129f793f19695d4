//! The outbox relay: publishes admitted orders from the Redis outbox to the
//! sales topic, and only then removes them.
//!
//! On a single Redis there is one outbox; on a Redis Cluster one per voucher
//! bucket, which the relay reads as its own ingress's admissions write them
//! and finds by walking every master every `discover_every` (see
//! `seckill_gate::Outbox`), so outboxes written by ingresses that died are
//! relayed too.
//!
//! One batch at a time: a batch is retried until every record of it is
//! acknowledged, and no new entries are read meanwhile, so a broker outage
//! makes the backlog grow in Redis (bounded by the gate's outbox limit, past
//! which orders get `503`) rather than in this process's memory. Entries of a
//! relay that died are claimed once idle for `claim_idle`, and its consumer
//! is removed from the group once nothing is pending for it and it has been
//! idle for `retire_consumer_after`.

use std::time::{Duration, Instant};

use futures::future::join_all;
use seckill_core::metrics::AdmissionMetrics;
use seckill_core::topics::Topics;
use seckill_gate::{Outbox, OutboxEntry};
use seckill_kafka::{retry, retry_pause, EventProducer, Interrupted};
use tokio_util::sync::CancellationToken;

/// Most entries published per batch.
const BATCH: usize = 500;
/// How long a read waits for new entries.
const READ_BLOCK: Duration = Duration::from_millis(100);
/// How often pending entries of dead relays are looked for.
const CLAIM_EVERY: Duration = Duration::from_secs(1);
/// How often consumers of dead relays are looked for.
const RETIRE_EVERY: Duration = Duration::from_secs(60);

/// Moves the outbox into the log.
#[derive(Debug)]
pub(crate) struct Relay {
    pub(crate) outbox: Outbox,
    pub(crate) producer: EventProducer,
    pub(crate) topics: Topics,
    pub(crate) metrics: AdmissionMetrics,
    /// How long an entry stays unacknowledged before another relay takes it.
    pub(crate) claim_idle: Duration,
    /// How long a consumer with nothing pending stays idle before it is
    /// taken for a dead relay's and removed.
    pub(crate) retire_consumer_after: Duration,
    /// How often every master of a cluster is walked for outboxes.
    pub(crate) discover_every: Duration,
}

impl Relay {
    /// Relays until `shutdown`. The batch in progress at shutdown is left to
    /// the next relay unless already acknowledged: nothing is lost, and a
    /// record published twice is harmless.
    pub(crate) async fn run(self, shutdown: CancellationToken) {
        let mut last_claim = Instant::now() - CLAIM_EVERY;
        let mut last_retire = Instant::now();
        let mut last_discovery = Instant::now();
        while !shutdown.is_cancelled() {
            if self.outbox.is_cluster() && last_discovery.elapsed() >= self.discover_every {
                last_discovery = Instant::now();
                self.discover().await;
            }
            if last_retire.elapsed() >= RETIRE_EVERY {
                last_retire = Instant::now();
                self.retire_dead_consumers().await;
            }
            let claiming = last_claim.elapsed() >= CLAIM_EVERY;
            let read = if claiming {
                last_claim = Instant::now();
                self.outbox.claim_idle(self.claim_idle, BATCH).await
            } else {
                self.outbox.read_new(BATCH, READ_BLOCK).await
            };
            let batch = match read {
                Ok(batch) => batch,
                Err(error) => {
                    tracing::warn!(%error, "Outbox read failed; retrying.");
                    // A Redis that lost its data lost the group too.
                    let _ = self.outbox.ensure_group().await;
                    if retry_pause(&shutdown).await.is_err() {
                        break;
                    }
                    continue;
                }
            };
            if claiming {
                if let Ok(entries) = self.outbox.len().await {
                    self.metrics.outbox_entries.set(i64::try_from(entries).unwrap_or(i64::MAX));
                }
            }
            if batch.is_empty() {
                continue;
            }
            if self.relay(batch, &shutdown).await.is_err() {
                break;
            }
        }
        self.producer.flush(Duration::from_secs(5));
        tracing::info!("Outbox relay stopped.");
    }

    /// Walks the cluster's masters for outboxes; a failure is only logged
    /// (the outboxes known are still drained) and retried at the next round.
    async fn discover(&self) {
        match self.outbox.discover().await {
            Ok(streams) => self.metrics.outbox_streams.set(i64::try_from(streams).unwrap_or(i64::MAX)),
            Err(error) => tracing::warn!(%error, "Could not walk the Redis Cluster for outboxes; retrying."),
        }
    }

    /// Removes the consumers dead relays left in the group; a failure is
    /// only logged (they harm nothing but the group's size) and retried at
    /// the next round.
    async fn retire_dead_consumers(&self) {
        match self.outbox.retire_idle_consumers(self.retire_consumer_after).await {
            Ok(removed) if removed.is_empty() => {}
            Ok(removed) => tracing::info!(?removed, "Removed the outbox consumers of relays that are gone."),
            Err(error) => tracing::warn!(%error, "Could not remove the outbox consumers of relays that are gone."),
        }
    }

    /// Publishes `batch` until every record is acknowledged, removing each
    /// group of acknowledged entries from the outbox.
    async fn relay(&self, mut pending: Vec<OutboxEntry>, shutdown: &CancellationToken) -> Result<(), Interrupted> {
        while !pending.is_empty() {
            let sends = pending.iter().map(|entry| {
                self.producer.send_encoded(&self.topics.sales, &entry.key, "OrderAccepted", &entry.record)
            });
            let results = join_all(sends).await;
            let mut published = Vec::new();
            let mut failed = Vec::new();
            for (entry, result) in pending.into_iter().zip(results) {
                match result {
                    Ok(took) => {
                        self.metrics.produce_duration.observe(took.as_secs_f64());
                        published.push(entry);
                    }
                    Err(error) => {
                        self.metrics.produce_errors.inc();
                        tracing::warn!(%error, "Outbox entry not acknowledged; retrying.");
                        failed.push(entry);
                    }
                }
            }
            retry(shutdown, "removing published entries from the outbox", || self.outbox.remove(&published)).await?;
            self.metrics.outbox_published.inc_by(published.len() as u64);
            pending = failed;
            if !pending.is_empty() {
                retry_pause(shutdown).await?;
            }
        }
        Ok(())
    }
}
