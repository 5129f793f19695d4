//! The payment step's metrics: callbacks received and refused, payments
//! decided, refunds, reconciliation and the provider's latency.
//!
//! Every label is a closed set: outcomes, refusal reasons and provider
//! calls, never a payment, order or event id.

use prometheus::{HistogramVec, IntCounterVec, Registry};

use super::{histogram_opts, opts, register};

/// Buckets for provider calls: a remote API over the internet, 5 ms to 30 s.
const PROVIDER_BUCKETS: &[f64] = &[0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0];

/// Every outcome of `seckill_webhooks_total`.
pub const WEBHOOK_OUTCOMES: [&str; 4] = ["accepted", "duplicate", "ignored", "rejected"];
/// Every call of `seckill_payment_provider_seconds`.
pub const PROVIDER_CALLS: [&str; 5] = ["create", "retrieve", "expire", "refund", "refunds"];
/// Every result of `seckill_refunds_total`: done, asked again after no
/// answer, refused for good, followed while pending, failed by the provider
/// (then made again).
pub const REFUND_RESULTS: [&str; 5] = ["completed", "retried", "rejected", "pending", "failed"];
/// Every reason of `seckill_webhook_rejections_total`.
pub const WEBHOOK_REJECTIONS: [&str; 6] = ["missing", "malformed", "stale", "future", "no_match", "body"];

/// The payment step's metrics, registered by the ingress (callbacks,
/// payment creation) and the processor (decisions, refunds,
/// reconciliation); each registers them all, so dashboards find every
/// series at zero.
#[derive(Clone, Debug)]
pub struct PaymentMetrics {
    /// `seckill_webhooks_total{outcome}`: provider callbacks by what became
    /// of them (`WEBHOOK_OUTCOMES`).
    pub webhooks: IntCounterVec,
    /// `seckill_webhook_rejections_total{reason}`: callbacks refused
    /// (`WEBHOOK_REJECTIONS`): a missing, malformed, stale or future
    /// signature, none matching a secret, or an unreadable body.
    pub webhook_rejections: IntCounterVec,
    /// `seckill_payments_created_total`: payments created at the provider
    /// for an order (repeats of the same order's included).
    pub payments_created: IntCounterVec,
    /// `seckill_payments_decided_total{outcome}`: `paid`, or `refund_<reason>`
    /// for a payment that did not pay its order.
    pub decided: IntCounterVec,
    /// `seckill_refunds_total{result}`: `completed` (the provider
    /// acknowledged), `retried` (an attempt failed and is repeated),
    /// `rejected` (refused for good; dead-lettered for an operator).
    pub refunds: IntCounterVec,
    /// `seckill_payment_reconciliations_total{result}`: orders due to
    /// expire asked about at the provider: `paid` (a payment was found),
    /// `unpaid` (closed), `error` (asked again next sweep).
    pub reconciliations: IntCounterVec,
    /// `seckill_payment_provider_seconds{call}`: provider call latency.
    pub provider_seconds: HistogramVec,
}

impl PaymentMetrics {
    pub fn register(registry: &Registry, service: &str) -> Self {
        let counter = |name: &str, help: &str, label: &str| {
            register(registry, IntCounterVec::new(opts(service, name, help), &[label]).expect("valid metric"))
        };
        let metrics = Self {
            webhooks: counter("seckill_webhooks_total", "Payment provider callbacks by outcome.", "outcome"),
            webhook_rejections: counter(
                "seckill_webhook_rejections_total",
                "Payment provider callbacks refused, by reason.",
                "reason",
            ),
            payments_created: counter(
                "seckill_payments_created_total",
                "Payments created at the provider, by result.",
                "result",
            ),
            decided: counter("seckill_payments_decided_total", "Reported payments by what they did.", "outcome"),
            refunds: counter("seckill_refunds_total", "Refund attempts by result.", "result"),
            reconciliations: counter(
                "seckill_payment_reconciliations_total",
                "Orders due to expire asked about at the provider, by result.",
                "result",
            ),
            provider_seconds: register(
                registry,
                HistogramVec::new(
                    histogram_opts(
                        service,
                        "seckill_payment_provider_seconds",
                        "Payment provider call latency.",
                        PROVIDER_BUCKETS,
                    ),
                    &["call"],
                )
                .expect("valid metric"),
            ),
        };
        for outcome in WEBHOOK_OUTCOMES {
            metrics.webhooks.with_label_values(&[outcome]);
        }
        for reason in WEBHOOK_REJECTIONS {
            metrics.webhook_rejections.with_label_values(&[reason]);
        }
        for result in REFUND_RESULTS {
            metrics.refunds.with_label_values(&[result]);
        }
        for call in PROVIDER_CALLS {
            metrics.provider_seconds.with_label_values(&[call]);
        }
        metrics
    }
}
