//! Consumer lag from librdkafka's own statistics.
//!
//! librdkafka already knows, from its fetch responses, each assigned
//! partition's high watermark and the offset this consumer last stored; it
//! reports both every `statistics.interval.ms` on its own thread. Reading
//! the lag from there costs the broker nothing and never blocks the consume
//! loop, where asking the broker for watermarks would (one round trip per
//! partition).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use prometheus::IntGaugeVec;
use rdkafka::client::ClientContext;
use rdkafka::consumer::{BaseConsumer, ConsumerContext, Rebalance};
use rdkafka::statistics::Statistics;

/// How often librdkafka reports its statistics, hence the lag.
pub(crate) const STATISTICS_INTERVAL_MS: &str = "1000";

/// How long librdkafka waits on a request to a broker that says nothing
/// (`socket.timeout.ms`; librdkafka's default is 60 s), for every client
/// the services keep open. A broker cut off without a reset (a partition, a
/// host gone) is noticed only when a request to it times out; until then a
/// consumer waits on its fetch from the old leader and learns of the new
/// one only after (a fetch waits `fetch.wait.max.ms` plus this). With one
/// broker of three isolated, the first decision came 15 s and 61 s after
/// the isolation at the default, 19–20 s at 10 s, 15 s at 5 s (twice
/// each; Kafka itself moves the leaderships after its 9-s broker session):
/// docs/GUARANTEES.md, Proven on test hosts. Still far above a healthy
/// request (a fetch is held 100 ms at most, a produce answers in
/// milliseconds; a produce is bounded by `message.timeout.ms` anyway).
pub(crate) const SOCKET_TIMEOUT_MS: &str = "5000";

/// The consumer's context: sets the lag gauge from each statistics report,
/// and counts the group's rebalances as this member sees them.
#[derive(Debug, Default)]
pub struct LagContext {
    /// `topic`, `partition` → records behind the high watermark; set once.
    gauge: OnceLock<IntGaugeVec>,
    /// Assignments received: a change tells the consumer's handler that it
    /// may now own partitions another member wrote for (see
    /// `BatchHandler::assigned`).
    assignments: AtomicU64,
    /// Revocations (a lost session included): a change while a batch is
    /// filled means some of its records may belong to another member now.
    revocations: AtomicU64,
}

impl LagContext {
    pub(crate) fn report_to(&self, gauge: IntGaugeVec) {
        let _ = self.gauge.set(gauge);
    }

    /// Assignments received so far.
    pub(crate) fn assignments(&self) -> u64 {
        self.assignments.load(Ordering::Acquire)
    }

    /// Revocations so far.
    pub(crate) fn revocations(&self) -> u64 {
        self.revocations.load(Ordering::Acquire)
    }
}

impl ClientContext for LagContext {
    fn stats_raw(&self, statistics: &[u8]) {
        // Nothing to report to: skip decoding the (large) JSON.
        if self.gauge.get().is_none() {
            return;
        }
        match serde_json::from_slice(statistics) {
            Ok(statistics) => self.stats(statistics),
            Err(error) => tracing::debug!(%error, "Unreadable librdkafka statistics."),
        }
    }

    fn stats(&self, statistics: Statistics) {
        let Some(gauge) = self.gauge.get() else { return };
        gauge.reset();
        for (topic, stats) in &statistics.topics {
            for (partition, stats) in &stats.partitions {
                // Partition -1 is librdkafka's placeholder for unassigned
                // messages; a lag of -1 means no offset is known yet.
                if *partition < 0 || stats.fetch_state != "active" || stats.consumer_lag_stored < 0 {
                    continue;
                }
                gauge
                    .with_label_values(&[topic.as_str(), partition.to_string().as_str()])
                    .set(stats.consumer_lag_stored);
            }
        }
    }
}

impl ConsumerContext for LagContext {
    // librdkafka runs these inside a poll (`recv`), so a count read after a
    // `recv` returned includes every rebalance served before that record.
    fn pre_rebalance(&self, _consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Revoke(partitions) = rebalance {
            tracing::info!(partitions = partitions.count(), "Partitions revoked.");
            self.revocations.fetch_add(1, Ordering::AcqRel);
        }
    }

    fn post_rebalance(&self, _consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Assign(partitions) = rebalance {
            tracing::info!(partitions = partitions.count(), "Partitions assigned.");
            self.assignments.fetch_add(1, Ordering::AcqRel);
        }
    }
}
