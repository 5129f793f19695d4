//! Every metric the platform exports, defined once.
//!
//! Names follow Prometheus conventions (`_total` counters, `_seconds`
//! histograms in base units). Labels are bounded: routes are templates,
//! statuses are classes, outcomes and event types are closed enums; user,
//! order and voucher ids never become labels. Each service's metrics carry a
//! constant `service` label, so one registry can hold all three in the
//! all-in-one local run.

mod live;
mod payments;
mod queue;
mod watch;

pub use live::{LiveMetrics, ReadSource};
pub use payments::{PaymentMetrics, PROVIDER_CALLS, REFUND_RESULTS, WEBHOOK_OUTCOMES, WEBHOOK_REJECTIONS};
pub use queue::{QueueMetrics, ENTRY_OUTCOMES, JOIN_OUTCOMES};
pub use watch::{clock_offset, dependency_up, PipelineWatchMetrics, DEPENDENCIES};

use prometheus::{
    Encoder, Gauge, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts,
    Registry, TextEncoder,
};

/// Buckets for request-path latencies: 100 µs to 2.5 s.
const FAST_BUCKETS: &[f64] =
    &[0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5];
/// Buckets for pipeline latencies (accept to decision, accept to visible).
const PIPELINE_BUCKETS: &[f64] =
    &[0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0];
/// Buckets for consumer batch sizes.
const BATCH_BUCKETS: &[f64] = &[1.0, 2.0, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0];

/// Renders a registry in the Prometheus text format.
pub fn render(registry: &Registry) -> String {
    let mut buffer = Vec::new();
    TextEncoder::new().encode(&registry.gather(), &mut buffer).expect("the text encoder writes into a Vec");
    String::from_utf8(buffer).expect("the text format is UTF-8")
}

fn opts(service: &str, name: &str, help: &str) -> Opts {
    Opts::new(name, help).const_label("service", service)
}

fn histogram_opts(service: &str, name: &str, help: &str, buckets: &[f64]) -> HistogramOpts {
    HistogramOpts::from(opts(service, name, help)).buckets(buckets.to_vec())
}

fn register<C: prometheus::core::Collector + Clone + 'static>(registry: &Registry, collector: C) -> C {
    registry.register(Box::new(collector.clone())).expect("each metric is registered once per service and registry");
    collector
}

/// `seckill_kafka_produce_errors_total`, for every service that produces.
/// `seckill_process_start_time_seconds`: when this service started (Unix
/// seconds); a restart shows as a change. Register once per service.
pub fn register_start_time(registry: &Registry, service: &str) {
    let started = register(
        registry,
        Gauge::with_opts(opts(
            service,
            "seckill_process_start_time_seconds",
            "When the service started, Unix seconds.",
        ))
        .expect("valid metric"),
    );
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    started.set(now.as_secs_f64());
}

fn produce_in_flight(registry: &Registry, service: &str) -> IntGauge {
    register(
        registry,
        IntGauge::with_opts(opts(
            service,
            "seckill_kafka_produce_in_flight",
            "Events sent to the broker and not yet acknowledged.",
        ))
        .expect("valid metric"),
    )
}

fn produce_errors(registry: &Registry, service: &str) -> IntCounter {
    register(
        registry,
        IntCounter::with_opts(opts(
            service,
            "seckill_kafka_produce_errors_total",
            "Events the broker did not acknowledge in time.",
        ))
        .expect("valid metric"),
    )
}

/// HTTP metrics, one set per service.
#[derive(Clone, Debug)]
pub struct HttpMetrics {
    /// `seckill_http_requests_total{route, status}`: status is `2xx`..`5xx`.
    pub requests: IntCounterVec,
    /// `seckill_http_request_duration_seconds{route}`.
    pub duration: HistogramVec,
    /// `seckill_http_connections`: connections open now.
    pub connections: IntGauge,
    /// `seckill_http_connections_refused_total{reason}`: connections closed
    /// at once by a bound (`full`, `address_full`).
    pub connections_refused: IntCounterVec,
}

impl HttpMetrics {
    pub fn register(registry: &Registry, service: &str) -> Self {
        Self {
            requests: register(
                registry,
                IntCounterVec::new(
                    opts(
                        service,
                        "seckill_http_requests_total",
                        "HTTP requests answered, by route template and status class.",
                    ),
                    &["route", "status"],
                )
                .expect("valid metric"),
            ),
            duration: register(
                registry,
                HistogramVec::new(
                    histogram_opts(
                        service,
                        "seckill_http_request_duration_seconds",
                        "Time to answer an HTTP request, by route template.",
                        FAST_BUCKETS,
                    ),
                    &["route"],
                )
                .expect("valid metric"),
            ),
            connections: register(
                registry,
                IntGauge::with_opts(opts(service, "seckill_http_connections", "HTTP connections open now."))
                    .expect("valid metric"),
            ),
            connections_refused: register(
                registry,
                IntCounterVec::new(
                    opts(
                        service,
                        "seckill_http_connections_refused_total",
                        "HTTP connections closed at once by a bound: full (http.max_connections) or address_full \
                         (http.max_connections_per_address).",
                    ),
                    &["reason"],
                )
                .expect("valid metric"),
            ),
        }
    }
}

/// The ingress's admission metrics.
#[derive(Clone, Debug)]
pub struct AdmissionMetrics {
    /// `seckill_admissions_total{outcome}`: `admitted`, `replayed`,
    /// `unavailable`, `unacknowledged` (admitted, but no replica
    /// acknowledged it in time: answered `503`) or a rejection code.
    pub outcomes: IntCounterVec,
    /// `seckill_redis_script_duration_seconds{script}` (`admit` and
    /// `settle` include the replica wait when it is on).
    pub script_duration: HistogramVec,
    /// `seckill_kafka_produce_duration_seconds`: send to acknowledgement.
    pub produce_duration: Histogram,
    /// `seckill_kafka_produce_errors_total`.
    pub produce_errors: IntCounter,
    /// `seckill_kafka_produce_in_flight`.
    pub produce_in_flight: IntGauge,
    /// `seckill_outbox_entries`: admitted orders not yet published, as this
    /// ingress's relay last saw the outbox.
    pub outbox_entries: IntGauge,
    /// `seckill_outbox_published_total`: outbox entries published and removed.
    pub outbox_published: IntCounter,
    /// `seckill_outbox_streams`: outbox streams this ingress's relay drains
    /// (one on a single Redis; one per voucher bucket in use on a cluster).
    pub outbox_streams: IntGauge,
    /// `seckill_gate_transfers_total{outcome}`: transfers of units between a
    /// hot voucher's buckets, by [`TransferOutcome`].
    pub transfers: IntCounterVec,
    /// `seckill_requests_refused_total{reason}`: requests turned away before
    /// any work, by [`RefusalReason`].
    pub refused: IntCounterVec,
    /// `seckill_admission_settlements_total{result}`: admission calls that
    /// failed without an answer and were settled by the order id:
    /// `admitted`, `not_admitted`, or `unknown` (the gate could not be
    /// asked), or `unacknowledged` (answered, but no replica acknowledged
    /// the answer in time).
    pub settlements: IntCounterVec,
    /// `seckill_replica_ack_timeouts_total`: waits for a replica's
    /// acknowledgement (`WAIT 1`, one behind each pipeline of admission
    /// calls) that ended without one; every admission the wait covered was
    /// answered `503` naming its order.
    pub replica_ack_timeouts: IntCounter,
    /// `seckill_replica_acks_on`: 1 while admissions wait for a replica's
    /// acknowledgement before they are answered, 0 otherwise.
    pub replica_acks_on: IntGauge,
}

/// Why a request was turned away at the door (the `reason` label).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RefusalReason {
    /// No credentials, or credentials that do not check out (`401`).
    Unauthorized,
    /// Known caller, not allowed (`403`).
    Forbidden,
    /// Over the per-user rate (`429`).
    RateLimitedUser,
    /// Over the per-address rate (`429`).
    RateLimitedIp,
}

impl RefusalReason {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unauthorized => "unauthorized",
            Self::Forbidden => "forbidden",
            Self::RateLimitedUser => "rate_limited_user",
            Self::RateLimitedIp => "rate_limited_ip",
        }
    }
}

/// What became of a transfer between buckets (the `outcome` label).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransferOutcome {
    /// Units moved to a bucket that ran dry, by the request that needed them.
    Moved,
    /// A transfer its starter did not finish (it died, or its call failed),
    /// completed by another.
    Recovered,
    /// Units given back to the bucket they came from: the receiving bucket
    /// was not in Redis.
    Returned,
}

impl TransferOutcome {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Moved => "moved",
            Self::Recovered => "recovered",
            Self::Returned => "returned",
        }
    }
}

impl AdmissionMetrics {
    pub fn register(registry: &Registry) -> Self {
        let service = "ingress";
        Self {
            outcomes: register(
                registry,
                IntCounterVec::new(
                    opts(
                        service,
                        "seckill_admissions_total",
                        "Order requests by admission outcome (admitted or the rejection code).",
                    ),
                    &["outcome"],
                )
                .expect("valid metric"),
            ),
            script_duration: register(
                registry,
                HistogramVec::new(
                    histogram_opts(
                        service,
                        "seckill_redis_script_duration_seconds",
                        "Round trip of one Redis Lua script call (admit and settle, with the replica wait on: \
                         until a replica acknowledged it).",
                        FAST_BUCKETS,
                    ),
                    &["script"],
                )
                .expect("valid metric"),
            ),
            produce_duration: register(
                registry,
                Histogram::with_opts(histogram_opts(
                    service,
                    "seckill_kafka_produce_duration_seconds",
                    "Time from producing an event to the broker's acknowledgement.",
                    FAST_BUCKETS,
                ))
                .expect("valid metric"),
            ),
            produce_errors: produce_errors(registry, service),
            produce_in_flight: produce_in_flight(registry, service),
            outbox_entries: register(
                registry,
                IntGauge::with_opts(opts(
                    service,
                    "seckill_outbox_entries",
                    "Admitted orders in the Redis outbox, not yet published to the log.",
                ))
                .expect("valid metric"),
            ),
            outbox_published: register(
                registry,
                IntCounter::with_opts(opts(
                    service,
                    "seckill_outbox_published_total",
                    "Outbox entries published to the log and removed.",
                ))
                .expect("valid metric"),
            ),
            outbox_streams: register(
                registry,
                IntGauge::with_opts(opts(
                    service,
                    "seckill_outbox_streams",
                    "Outbox streams the relay drains: one on a single Redis, one per voucher bucket on a cluster.",
                ))
                .expect("valid metric"),
            ),
            transfers: register(
                registry,
                IntCounterVec::new(
                    opts(
                        service,
                        "seckill_gate_transfers_total",
                        "Transfers of units between the buckets of a voucher split across shards, by outcome.",
                    ),
                    &["outcome"],
                )
                .expect("valid metric"),
            ),
            refused: register(
                registry,
                IntCounterVec::new(
                    opts(
                        service,
                        "seckill_requests_refused_total",
                        "Requests refused before any work: unauthorized, forbidden or rate limited (per user or per address).",
                    ),
                    &["reason"],
                )
                .expect("valid metric"),
            ),
            settlements: register(
                registry,
                IntCounterVec::new(
                    opts(
                        service,
                        "seckill_admission_settlements_total",
                        "Admission calls that failed without an answer, settled by the order id: admitted, \
                         not_admitted, unknown (the gate could not be asked) or unacknowledged (no replica \
                         acknowledged the answer in time).",
                    ),
                    &["result"],
                )
                .expect("valid metric"),
            ),
            replica_ack_timeouts: register(
                registry,
                IntCounter::with_opts(opts(
                    service,
                    "seckill_replica_ack_timeouts_total",
                    "Waits for a Redis replica's acknowledgement of admissions (WAIT 1) that ended without one; \
                     the admissions they covered were answered 503 naming the order.",
                ))
                .expect("valid metric"),
            ),
            replica_acks_on: register(
                registry,
                IntGauge::with_opts(opts(
                    service,
                    "seckill_replica_acks_on",
                    "1 while admissions wait for a Redis replica's acknowledgement before they are answered.",
                ))
                .expect("valid metric"),
            ),
        }
    }
}

/// Metrics of a consuming service (processor, projector).
#[derive(Clone, Debug)]
pub struct ConsumerMetrics {
    /// `seckill_events_total{type, result}`: result is `applied`,
    /// `duplicate`, `dead_lettered` or (type `queue`, the waiting room's
    /// records on the sales topic) `passed`.
    pub events: IntCounterVec,
    /// `seckill_consumer_batch_size`: records handled per batch.
    pub batch_size: Histogram,
    /// `seckill_dead_letters_total`.
    pub dead_letters: IntCounter,
    /// `seckill_order_latency_seconds{stage}`: from acceptance to `decided`
    /// (processor) or to `visible` in the status view (projector).
    pub order_latency: HistogramVec,
    /// `seckill_kafka_produce_errors_total`.
    pub produce_errors: IntCounter,
    /// `seckill_compensations_total`: failed and cancelled orders whose
    /// units went back to the Redis gate.
    pub compensations: IntCounter,
    /// `seckill_kafka_produce_in_flight`.
    pub produce_in_flight: IntGauge,
    /// `seckill_consumer_lag{topic,partition}`: records behind the high
    /// watermark per assigned partition (bounded by the partition count).
    pub lag: IntGaugeVec,
}

impl ConsumerMetrics {
    pub fn register(registry: &Registry, service: &str) -> Self {
        Self {
            events: register(
                registry,
                IntCounterVec::new(
                    opts(service, "seckill_events_total", "Events consumed, by event type and result."),
                    &["type", "result"],
                )
                .expect("valid metric"),
            ),
            batch_size: register(
                registry,
                Histogram::with_opts(histogram_opts(
                    service,
                    "seckill_consumer_batch_size",
                    "Records handled per consumer batch.",
                    BATCH_BUCKETS,
                ))
                .expect("valid metric"),
            ),
            dead_letters: register(
                registry,
                IntCounter::with_opts(opts(
                    service,
                    "seckill_dead_letters_total",
                    "Records sent to the dead-letter topic.",
                ))
                .expect("valid metric"),
            ),
            order_latency: register(
                registry,
                HistogramVec::new(
                    histogram_opts(
                        service,
                        "seckill_order_latency_seconds",
                        "Time from an order's acceptance to a pipeline stage.",
                        PIPELINE_BUCKETS,
                    ),
                    &["stage"],
                )
                .expect("valid metric"),
            ),
            produce_errors: produce_errors(registry, service),
            produce_in_flight: produce_in_flight(registry, service),
            lag: register(
                registry,
                IntGaugeVec::new(
                    opts(service, "seckill_consumer_lag", "Records behind the high watermark, per assigned partition."),
                    &["topic", "partition"],
                )
                .expect("valid metric"),
            ),
            compensations: register(
                registry,
                IntCounter::with_opts(opts(
                    service,
                    "seckill_compensations_total",
                    "Failed and cancelled orders whose units were given back to the Redis gate.",
                ))
                .expect("valid metric"),
            ),
        }
    }
}

/// Metrics only the processor has.
#[derive(Clone, Debug)]
pub struct ProcessorMetrics {
    /// `seckill_expiry_requests_total`: cancellations requested for orders
    /// not confirmed within their voucher's `hold_seconds`.
    pub expiry_requests: IntCounter,
    /// `seckill_stock_remaining{voucher}`: persistent stock left, for the
    /// most recently active vouchers only (see `MAX_STOCK_SERIES`).
    pub stock_remaining: IntGaugeVec,
    /// `seckill_gate_stock_remaining{voucher}`: what the Redis gate says is
    /// left of the same vouchers, read every few seconds. Equal to the
    /// persistent stock once every admitted order is decided; apart for
    /// long, the gate is wrong (the oversell early warning).
    pub gate_stock_remaining: IntGaugeVec,
    /// `seckill_gate_follower_lag{topic,partition}`: records the gate
    /// follower (group `<group>-gate`) has not yet applied to Redis, per
    /// assigned partition of the sales and orders topics (bounded by their
    /// partition counts). It stores an offset only once Redis acknowledged,
    /// so a Redis that is down or slow shows here as a growing backlog:
    /// units of failed and cancelled orders not yet back at the gate,
    /// voucher updates not yet applied there.
    pub gate_follower_lag: IntGaugeVec,
}

/// Most vouchers `seckill_stock_remaining` has a series for at once.
pub const MAX_STOCK_SERIES: usize = 50;

impl ProcessorMetrics {
    pub fn register(registry: &Registry, service: &str) -> Self {
        Self {
            stock_remaining: register(
                registry,
                IntGaugeVec::new(
                    opts(service, "seckill_stock_remaining", "Persistent stock left of recently active vouchers."),
                    &["voucher"],
                )
                .expect("valid metric"),
            ),
            gate_stock_remaining: register(
                registry,
                IntGaugeVec::new(
                    opts(
                        service,
                        "seckill_gate_stock_remaining",
                        "Units the Redis gate says are left of recently active vouchers.",
                    ),
                    &["voucher"],
                )
                .expect("valid metric"),
            ),
            gate_follower_lag: register(
                registry,
                IntGaugeVec::new(
                    opts(
                        service,
                        "seckill_gate_follower_lag",
                        "Records the gate follower has not yet applied to Redis, per assigned partition.",
                    ),
                    &["topic", "partition"],
                )
                .expect("valid metric"),
            ),
            expiry_requests: register(
                registry,
                IntCounter::with_opts(opts(
                    service,
                    "seckill_expiry_requests_total",
                    "Cancellations requested for orders whose hold expired unconfirmed.",
                ))
                .expect("valid metric"),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn services_share_one_registry() {
        let registry = Registry::new();
        let ingress = HttpMetrics::register(&registry, "ingress");
        let projector = HttpMetrics::register(&registry, "projector");
        ConsumerMetrics::register(&registry, "processor");
        ConsumerMetrics::register(&registry, "projector");
        AdmissionMetrics::register(&registry);
        ingress.requests.with_label_values(&["/healthz", "2xx"]).inc();
        projector.requests.with_label_values(&["/healthz", "5xx"]).inc();
        let text = render(&registry);
        assert!(
            text.contains(r#"seckill_http_requests_total{route="/healthz",service="ingress",status="2xx"} 1"#),
            "{text}"
        );
        assert!(text.contains(r#"service="projector",status="5xx"} 1"#), "{text}");
    }
}
