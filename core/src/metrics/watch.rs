//! What the alert rules watch beyond each service's own work: whether a
//! service reaches its dependencies, where the consumer groups stand as the
//! broker sees them (measured by the ingress, so a dead processor still
//! shows), and how far the live follower is behind.

use prometheus::{Gauge, IntGauge, IntGaugeVec, Registry};

use super::{opts, register};

/// Dependencies a service probes: closed, so the label stays bounded.
pub const DEPENDENCIES: &[&str] = &["redis", "kafka"];

/// `seckill_dependency_up{dependency}`: 1 when the service's last probe of
/// `dependency` (one of [`DEPENDENCIES`]) was answered, 0 when it was not.
pub fn dependency_up(registry: &Registry, service: &str) -> IntGaugeVec {
    register(
        registry,
        IntGaugeVec::new(
            opts(
                service,
                "seckill_dependency_up",
                "Whether the last probe of a dependency was answered (1) or not (0).",
            ),
            &["dependency"],
        )
        .expect("valid metric"),
    )
}

/// `seckill_clock_offset_seconds`: Redis's clock minus this service's, as
/// the last Redis probe measured it (against the middle of its round trip,
/// so within half of it): the host's own clock. The service stamps by its
/// clock set to Redis's (`crate::clock`), so the offset moves no deadline;
/// it says the host's time source is wrong.
pub fn clock_offset(registry: &Registry, service: &str) -> Gauge {
    register(
        registry,
        Gauge::with_opts(opts(
            service,
            "seckill_clock_offset_seconds",
            "Redis's clock (the admission clock) minus this service's, in seconds, at the last Redis probe.",
        ))
        .expect("valid metric"),
    )
}

/// Metrics of the ingress's watch over the pipeline.
#[derive(Clone, Debug)]
pub struct PipelineWatchMetrics {
    /// `seckill_consumer_group_lag{group, topic}`: records on the topic the
    /// group has not committed past, summed over partitions. The groups are
    /// the configured ones (`watch.groups`), so the label is bounded.
    pub group_lag: IntGaugeVec,
    /// `seckill_consumer_group_committed{group, topic}`: the sum of the
    /// group's committed offsets; unchanged while the lag is above zero
    /// means the group stopped.
    pub group_committed: IntGaugeVec,
    /// `seckill_live_follower_lag`: records behind the high watermark the
    /// ingress's live follower has not read (-1 before its first report).
    pub follower_lag: IntGauge,
}

impl PipelineWatchMetrics {
    pub fn register(registry: &Registry, service: &str) -> Self {
        let by_group = |name: &str, help: &str| {
            register(registry, IntGaugeVec::new(opts(service, name, help), &["group", "topic"]).expect("valid metric"))
        };
        Self {
            group_lag: by_group(
                "seckill_consumer_group_lag",
                "Records a consumer group has not committed past, as the broker sees it, per topic.",
            ),
            group_committed: by_group(
                "seckill_consumer_group_committed",
                "Sum of a consumer group's committed offsets per topic; moves only with progress.",
            ),
            follower_lag: register(
                registry,
                IntGauge::with_opts(opts(
                    service,
                    "seckill_live_follower_lag",
                    "Records behind the high watermark the live follower has not read.",
                ))
                .expect("valid metric"),
            ),
        }
    }
}
