//! Probing a service's dependencies on a schedule, for the alert rules:
//! `seckill_dependency_up{dependency}` says whether the last probe was
//! answered. A probe is a cheap round trip (Redis's `TIME`, the broker's
//! metadata), bounded by a timeout so a frozen dependency reads as down
//! within one period instead of hanging the loop.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use prometheus::IntGaugeVec;
use seckill_core::shutdown::Every;
use tokio_util::sync::CancellationToken;

/// How often dependencies are probed.
pub const PROBE_EVERY: Duration = Duration::from_secs(2);

/// One dependency's check: answers whether the dependency was reached.
pub struct Probe {
    /// One of `seckill_core::metrics::DEPENDENCIES`.
    pub dependency: &'static str,
    pub check: Box<dyn Fn() -> Pin<Box<dyn Future<Output = bool> + Send>> + Send + Sync>,
}

impl std::fmt::Debug for Probe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Probe").field("dependency", &self.dependency).finish_non_exhaustive()
    }
}

impl Probe {
    pub fn new<F, Fut>(dependency: &'static str, check: F) -> Self
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = bool> + Send + 'static,
    {
        Self { dependency, check: Box::new(move || Box::pin(check())) }
    }

    /// Redis, through the gate's connection: its clock (`TIME`), whose
    /// offset from this service's clock goes into `clock_offset` (seconds,
    /// Redis's minus ours, against the middle of the round trip) and sets
    /// the platform's clock ([`crate::ServerClock::take`]).
    pub fn redis(gate: seckill_gate::Gate, clock_offset: prometheus::Gauge) -> Self {
        Self::new("redis", move || {
            let (gate, clock_offset) = (gate.clone(), clock_offset.clone());
            async move {
                let Ok((offset, round_trip)) = gate.clock_reading().await else { return false };
                clock_offset.set(offset.as_seconds_f64());
                crate::ServerClock::take(offset, round_trip);
                true
            }
        })
    }

    /// The broker, through a producer's client: a metadata request.
    pub fn kafka(producer: seckill_kafka::EventProducer) -> Self {
        Self::new("kafka", move || {
            let producer = producer.clone();
            async move { producer.reaches_broker(PROBE_EVERY).await }
        })
    }
}

/// Runs every probe each `every` until `shutdown`, recording each answer
/// in `gauge` (1 reached, 0 not, a probe slower than `every` counting as
/// not reached).
pub async fn probe_dependencies(probes: Vec<Probe>, gauge: IntGaugeVec, every: Duration, shutdown: CancellationToken) {
    let mut ticks = Every::new(every);
    while ticks.tick(&shutdown).await {
        for probe in &probes {
            let reached = tokio::time::timeout(every, (probe.check)()).await.unwrap_or(false);
            gauge.with_label_values(&[probe.dependency]).set(i64::from(reached));
            if !reached {
                tracing::debug!(dependency = probe.dependency, "A dependency did not answer its probe.");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn answers_and_silences_are_recorded_per_dependency() {
        let gauge = IntGaugeVec::new(prometheus::Opts::new("up", "up"), &["dependency"]).expect("gauge");
        let redis_up = Arc::new(AtomicBool::new(true));
        let probes = vec![
            Probe::new("redis", {
                let redis_up = Arc::clone(&redis_up);
                move || {
                    let up = redis_up.load(Ordering::Relaxed);
                    async move { up }
                }
            }),
            // A dependency that never answers: its probe times out.
            Probe::new("kafka", std::future::pending::<bool>),
        ];
        let shutdown = CancellationToken::new();
        let loop_task = tokio::spawn(probe_dependencies(probes, gauge.clone(), PROBE_EVERY, shutdown.clone()));
        tokio::time::sleep(PROBE_EVERY * 2).await;
        assert_eq!(gauge.with_label_values(&["redis"]).get(), 1);
        assert_eq!(gauge.with_label_values(&["kafka"]).get(), 0);
        redis_up.store(false, Ordering::Relaxed);
        tokio::time::sleep(PROBE_EVERY * 3).await;
        assert_eq!(gauge.with_label_values(&["redis"]).get(), 0);
        shutdown.cancel();
        loop_task.await.expect("the loop ends at shutdown");
    }
}
