//! Consumer lag from librdkafka's own statistics.
//!
//! librdkafka already knows, from its fetch responses, each assigned
//! partition's high watermark and the offset this consumer last stored; it
//! reports both every `statistics.interval.ms` on its own thread. Reading
//! the lag from there costs the broker nothing and never blocks the consume
//! loop, where asking the broker for watermarks would (one round trip per
//! partition).

use std::sync::OnceLock;

use prometheus::IntGaugeVec;
use rdkafka::client::ClientContext;
use rdkafka::consumer::ConsumerContext;
use rdkafka::statistics::Statistics;

/// How often librdkafka reports its statistics, hence the lag.
pub(crate) const STATISTICS_INTERVAL_MS: &str = "1000";

/// The consumer's context: sets the lag gauge from each statistics report.
#[derive(Debug, Default)]
pub struct LagContext {
    /// `topic`, `partition` → records behind the high watermark; set once.
    gauge: OnceLock<IntGaugeVec>,
}

impl LagContext {
    pub(crate) fn report_to(&self, gauge: IntGaugeVec) {
        let _ = self.gauge.set(gauge);
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

impl ConsumerContext for LagContext {}
