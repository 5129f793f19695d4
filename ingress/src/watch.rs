//! The ingress's watch over the pipeline, for the alert rules: whether it
//! reaches Redis and the broker (`seckill_dependency_up`), where the
//! processor's and projector's consumer groups stand as the broker sees
//! them (`seckill_consumer_group_lag`, `…_committed`), and how far its own
//! live follower is behind (`seckill_live_follower_lag`). The ingress runs
//! whenever a sale does, so it measures the groups even when their
//! consumers are dead.

use std::sync::Arc;
use std::time::Duration;

use prometheus::{Gauge, IntGaugeVec};
use seckill_core::metrics::PipelineWatchMetrics;
use seckill_core::shutdown::Every;
use seckill_core::topics::Topics;
use seckill_gate::Gate;
use seckill_kafka::{EventProducer, FollowerHealth, GroupLag};
use seckill_web::probes::{probe_dependencies, Probe, PROBE_EVERY};
use tokio_util::sync::CancellationToken;

use crate::config::WatchConfig;

/// Everything the watch reads and reports.
#[derive(Debug)]
pub(crate) struct Watch {
    pub(crate) gate: Gate,
    pub(crate) producer: EventProducer,
    pub(crate) groups: Option<Arc<GroupLag>>,
    pub(crate) follower: Arc<FollowerHealth>,
    pub(crate) metrics: PipelineWatchMetrics,
    pub(crate) dependency_up: IntGaugeVec,
    /// Redis's clock minus ours, measured by the Redis probe.
    pub(crate) clock_offset: Gauge,
    pub(crate) every: Duration,
}

impl Watch {
    /// The configured groups, each on the topics it reads.
    pub(crate) fn groups(config: &WatchConfig, topics: &Topics) -> Vec<(String, Vec<String>)> {
        [
            (&config.processor_group, vec![topics.sales.clone()]),
            (&config.projector_group, vec![topics.sales.clone(), topics.orders.clone()]),
        ]
        .into_iter()
        .filter(|(group, _)| !group.is_empty())
        .map(|(group, topics)| (group.clone(), topics))
        .collect()
    }

    /// Probes and measures until `shutdown`.
    pub(crate) async fn run(self, shutdown: CancellationToken) {
        let probes =
            vec![Probe::redis(self.gate.clone(), self.clock_offset.clone()), Probe::kafka(self.producer.clone())];
        let probing = probe_dependencies(probes, self.dependency_up.clone(), PROBE_EVERY, shutdown.clone());
        let measuring = measure_groups(self.groups, self.follower, self.metrics, self.every, shutdown);
        tokio::join!(probing, measuring);
    }
}

async fn measure_groups(
    groups: Option<Arc<GroupLag>>,
    follower: Arc<FollowerHealth>,
    metrics: PipelineWatchMetrics,
    every: Duration,
    shutdown: CancellationToken,
) {
    let mut ticks = Every::new(every);
    while ticks.tick(&shutdown).await {
        metrics.follower_lag.set(follower.lag());
        let Some(groups) = groups.clone() else { continue };
        match tokio::task::spawn_blocking(move || groups.measure()).await {
            Ok(Ok(positions)) => {
                for position in positions {
                    let labels = [position.group.as_str(), position.topic.as_str()];
                    metrics.group_lag.with_label_values(&labels).set(position.lag);
                    metrics.group_committed.with_label_values(&labels).set(position.committed);
                }
            }
            // The broker unreachable: the last figures stay (their staleness
            // is what `seckill_dependency_up{dependency="kafka"}` reports).
            Ok(Err(error)) => tracing::debug!(%error, "Could not measure the consumer groups."),
            Err(error) => tracing::warn!(%error, "The group measuring thread failed."),
        }
    }
}
