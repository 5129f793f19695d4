//! The waiting rooms' metrics, registered by the ingress (every ingress
//! moves every room on, so the counters count each room's changes once,
//! summed over the ingresses, and the gauges read the same room from each:
//! take their `max` across instances).
//!
//! No label names a voucher or a user: a platform runs any number of sales.

use prometheus::{IntCounter, IntCounterVec, IntGauge, Registry};

use super::{opts, register};

/// Every outcome of `seckill_queue_joins_total`.
pub const JOIN_OUTCOMES: [&str; 4] = ["placed", "held", "unacknowledged", "refused"];
/// Every outcome of `seckill_draw_entries_total`.
pub const ENTRY_OUTCOMES: [&str; 4] = ["entered", "held", "unacknowledged", "refused"];

/// The waiting rooms' metrics.
#[derive(Clone, Debug)]
pub struct QueueMetrics {
    /// `seckill_queue_joins_total{outcome}`: joins by what they did
    /// (`JOIN_OUTCOMES`).
    pub joins: IntCounterVec,
    /// `seckill_queue_entries_issued_total`: places served with an entry.
    pub entries_issued: IntCounter,
    /// `seckill_queue_places_expired_total`: places skipped, their holder gone.
    pub places_expired: IntCounter,
    /// `seckill_queue_waiting`: places not yet reached, in every open room.
    pub waiting: IntGauge,
    /// `seckill_queue_entries_open`: entries issued and not yet used or lapsed.
    pub entries_open: IntGauge,
    /// `seckill_queue_rooms`: rooms this ingress moves on.
    pub rooms: IntGauge,
    /// `seckill_draw_entries_total{outcome}`: draw entries by what they did
    /// (`ENTRY_OUTCOMES`).
    pub entries: IntCounterVec,
    /// `seckill_draw_wins_total`: wins given (at the draw and promoted).
    pub wins: IntCounter,
}

impl QueueMetrics {
    pub fn register(registry: &Registry) -> Self {
        let service = "ingress";
        let counter = |name: &str, help: &str| {
            register(registry, IntCounter::with_opts(opts(service, name, help)).expect("valid metric"))
        };
        let gauge = |name: &str, help: &str| {
            register(registry, IntGauge::with_opts(opts(service, name, help)).expect("valid metric"))
        };
        let metrics = Self {
            joins: register(
                registry,
                IntCounterVec::new(
                    opts(service, "seckill_queue_joins_total", "Waiting room joins by outcome."),
                    &["outcome"],
                )
                .expect("valid metric"),
            ),
            entries_issued: counter("seckill_queue_entries_issued_total", "Waiting room places served with an entry."),
            places_expired: counter(
                "seckill_queue_places_expired_total",
                "Waiting room places skipped, their holder gone.",
            ),
            waiting: gauge("seckill_queue_waiting", "Places not yet reached in the open waiting rooms."),
            entries_open: gauge("seckill_queue_entries_open", "Entries issued and not yet used or lapsed."),
            rooms: gauge("seckill_queue_rooms", "Waiting rooms this ingress moves on."),
            entries: register(
                registry,
                IntCounterVec::new(
                    opts(service, "seckill_draw_entries_total", "Draw entries by outcome."),
                    &["outcome"],
                )
                .expect("valid metric"),
            ),
            wins: counter("seckill_draw_wins_total", "Draw wins given, at the draw and promoted."),
        };
        for outcome in ENTRY_OUTCOMES {
            metrics.entries.with_label_values(&[outcome]);
        }
        for outcome in JOIN_OUTCOMES {
            metrics.joins.with_label_values(&[outcome]);
        }
        metrics
    }
}
