//! The ingress's read side: caches, waiters, streams.

use prometheus::{IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Registry};

use super::{opts, register};

/// Where a read was answered from (the `source` label).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadSource {
    /// A representation or row in memory.
    Memory,
    /// Memory, rebuilt for this request (it was older than the bound).
    Refreshed,
    /// The status view (the projector).
    View,
    /// An admitted order's pending record in Redis.
    Pending,
    /// `304 Not Modified`: the client's copy is current.
    NotModified,
    /// The last good representation, because rebuilding it failed.
    Stale,
}

impl ReadSource {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Memory => "memory",
            Self::Refreshed => "refreshed",
            Self::View => "view",
            Self::Pending => "pending",
            Self::NotModified => "not_modified",
            Self::Stale => "stale",
        }
    }
}

/// Metrics of the ingress's read side.
#[derive(Clone, Debug)]
pub struct LiveMetrics {
    /// `seckill_read_answers_total{resource, source}`: resource is
    /// `voucher`, `voucher_list` or `order`; source a [`ReadSource`].
    pub answers: IntCounterVec,
    /// `seckill_live_waiters`: long-polls waiting now.
    pub waiters: IntGauge,
    /// `seckill_live_streams{kind}`: open event streams (`user`, `voucher`).
    pub streams: IntGaugeVec,
    /// `seckill_live_wakeups_total`: waiters woken by a change.
    pub wakeups: IntCounter,
    /// `seckill_live_refused_total{reason}`: long-polls and streams turned
    /// away by a bound (`waiters_full`, `user_waiters_full`,
    /// `address_waiters_full`, `streams_full`, `voucher_streams_full`,
    /// `user_streams_full`, `address_streams_full`).
    pub refused: IntCounterVec,
    /// `seckill_live_followed_total`: records the live follower applied.
    pub followed: IntCounter,
}

impl LiveMetrics {
    pub fn register(registry: &Registry) -> Self {
        let service = "ingress";
        Self {
            answers: register(
                registry,
                IntCounterVec::new(
                    opts(
                        service,
                        "seckill_read_answers_total",
                        "Reads answered, by resource and by where the answer came from (memory, refreshed, view, pending, not_modified).",
                    ),
                    &["resource", "source"],
                )
                .expect("valid metric"),
            ),
            waiters: register(
                registry,
                IntGauge::with_opts(opts(service, "seckill_live_waiters", "Long-polls waiting for their order to change."))
                    .expect("valid metric"),
            ),
            streams: register(
                registry,
                IntGaugeVec::new(opts(service, "seckill_live_streams", "Open event streams, by kind (user, voucher)."), &["kind"])
                    .expect("valid metric"),
            ),
            wakeups: register(
                registry,
                IntCounter::with_opts(opts(service, "seckill_live_wakeups_total", "Long-polls woken by a change of their order."))
                    .expect("valid metric"),
            ),
            refused: register(
                registry,
                IntCounterVec::new(
                    opts(service, "seckill_live_refused_total", "Long-polls and streams refused by a bound, by reason."),
                    &["reason"],
                )
                .expect("valid metric"),
            ),
            followed: register(
                registry,
                IntCounter::with_opts(opts(
                    service,
                    "seckill_live_followed_total",
                    "Records of the sales and orders topics the live follower applied.",
                ))
                .expect("valid metric"),
            ),
        }
    }
}
