//! A sale over time, in the shapes the report draws: counts per time
//! bucket, step series of units left, latency percentiles and their
//! distribution. Pure functions of a [`VoucherLog`] and its stats.
//!
//! Every time chart of a voucher shares one axis: from its first
//! acceptance to its last outcome, cut into at most [`MAX_BUCKETS`] buckets
//! of a round width (1 s when the sale fits, else 2 s, 5 s, 10 s, ...).

use chrono::{DateTime, TimeDelta, Utc};
use seckill_core::event::CancelReason;

use super::books::{ChangeKind, StockChange};
use super::fold::{FinalStatus, OutcomeKind, VoucherLog};
use crate::stats::{millis, nearest_rank, VoucherStats};

/// Most buckets on a time axis: about 3 px per bar at a laptop's width.
pub const MAX_BUCKETS: usize = 360;
/// Bucket widths tried, in seconds.
const WIDTHS: [i64; 18] =
    [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1_800, 3_600, 7_200, 14_400, 21_600, 43_200, 86_400];
/// Upper edges of the latency distribution's bins, in milliseconds (1-2-5
/// steps); the last bin is open.
const LATENCY_EDGES: [f64; 20] = [
    0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1_000.0, 2_000.0, 5_000.0, 10_000.0, 20_000.0,
    50_000.0, 100_000.0, 200_000.0,
];

/// A time axis cut into equal buckets, aligned to whole multiples of the
/// width since the Unix epoch (so a 1 s bucket is a UTC second).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Buckets {
    pub origin: DateTime<Utc>,
    pub width_s: i64,
    pub count: usize,
}

impl Buckets {
    /// The narrowest round buckets that cover `first..=last` in at most
    /// [`MAX_BUCKETS`].
    pub fn covering(first: DateTime<Utc>, last: DateTime<Utc>) -> Self {
        let last = last.max(first);
        let pick = |width_s: i64| {
            let origin_s = first.timestamp().div_euclid(width_s) * width_s;
            let count = (last.timestamp() - origin_s) / width_s + 1;
            (origin_s, count as usize)
        };
        let width_s =
            WIDTHS.into_iter().find(|&width| pick(width).1 <= MAX_BUCKETS).unwrap_or(WIDTHS[WIDTHS.len() - 1]);
        let (origin_s, count) = pick(width_s);
        let origin = DateTime::from_timestamp(origin_s, 0).unwrap_or(first);
        Self { origin, width_s, count: count.max(1) }
    }

    /// The bucket `at` falls in (times outside go to the nearest end).
    pub fn index(&self, at: DateTime<Utc>) -> usize {
        let seconds = (at - self.origin).num_milliseconds().div_euclid(1_000);
        usize::try_from(seconds / self.width_s).unwrap_or(0).min(self.count - 1)
    }

    /// Where bucket `index` starts.
    pub fn start(&self, index: usize) -> DateTime<Utc> {
        self.origin + TimeDelta::seconds(self.width_s * index as i64)
    }

    /// Where the last bucket ends.
    pub fn end(&self) -> DateTime<Utc> {
        self.start(self.count)
    }
}

/// A value that holds from `at` until the next step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Step {
    pub at: DateTime<Utc>,
    pub value: i64,
}

/// One bin of the latency distribution.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LatencyBin {
    /// Lower edge in milliseconds (inclusive).
    pub from_ms: f64,
    /// Upper edge (exclusive); `None`: open.
    pub to_ms: Option<f64>,
    pub orders: u64,
}

/// Accept → decision latency of the orders accepted in one bucket.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LatencyPoint {
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub orders: u64,
}

/// Everything the report's time charts draw for one voucher.
#[derive(Clone, Debug, PartialEq)]
pub struct Timeline {
    pub buckets: Buckets,
    /// Orders accepted per bucket, by where they ended, in
    /// [`FinalStatus::ALL`] order.
    pub accepted: Vec<[u64; 5]>,
    /// Cancellations per bucket of `cancelled_at`: [requested, expired,
    /// refunded by an admin].
    pub cancellations: Vec<[u64; 3]>,
    /// Payments per bucket: [reported paid (by the provider's `paid_at`),
    /// refunds acknowledged (by `refunded_at`)], each payment and each
    /// provider refund once.
    pub payments: Vec<[u64; 2]>,
    /// Latency of the orders accepted in each bucket (`None`: none decided).
    pub latency: Vec<Option<LatencyPoint>>,
    /// The latency distribution, from the first to the last non-empty bin.
    pub latency_bins: Vec<LatencyBin>,
    /// Units the gate had left: from the acceptances, failures,
    /// cancellations and added stock.
    pub admission_left: Vec<Step>,
    /// Units the persistent stock had left: each creation's and
    /// cancellation's `remaining`, and added stock, in the processor's order.
    pub stock_left: Vec<Step>,
    /// When stock was added, and how much.
    pub added: Vec<(DateTime<Utc>, u64)>,
    /// Units given back by cancellations, cumulative.
    pub returned: Vec<Step>,
    /// Units sold again after being returned, cumulative (see
    /// [`VoucherLog::resale`]).
    pub resold: Vec<Step>,
    /// When the last unit was taken (`stats`' sell-out time).
    pub sold_out_at: Option<DateTime<Utc>>,
}

impl Timeline {
    /// The time series of `log`, whose `stats` figures are `stats`.
    pub fn of(log: &VoucherLog, stats: &VoucherStats) -> Self {
        let buckets = axis(log);
        let changes = log.stock_changes();
        let resale = log.resale(&changes);
        let mut accepted = vec![[0u64; 5]; buckets.count];
        let mut cancellations = vec![[0u64; 3]; buckets.count];
        let mut latencies: Vec<Vec<TimeDelta>> = vec![Vec::new(); buckets.count];
        let mut all_latencies = Vec::new();
        for order in log.orders.values() {
            let status = order.final_status();
            let slot = FinalStatus::ALL.iter().position(|s| *s == status).unwrap_or(0);
            accepted[buckets.index(order.accepted_at)][slot] += 1;
            if let Some(cancellation) = order.cancellation() {
                let slot = match cancellation.kind {
                    OutcomeKind::Cancelled(CancelReason::Expired) => 1,
                    OutcomeKind::Cancelled(CancelReason::Refunded) => 2,
                    _ => 0,
                };
                cancellations[buckets.index(cancellation.at)][slot] += 1;
            }
            if let Some(decision) = order.first_decision() {
                let latency = decision.at - order.accepted_at;
                latencies[buckets.index(order.accepted_at)].push(latency);
                all_latencies.push(latency);
            }
        }
        let latency = latencies
            .into_iter()
            .map(|mut bucket| {
                bucket.sort_unstable();
                Some(LatencyPoint {
                    p50_ms: millis(nearest_rank(&bucket, 50)?),
                    p99_ms: millis(nearest_rank(&bucket, 99)?),
                    orders: bucket.len() as u64,
                })
            })
            .collect();
        let mut payments = vec![[0u64; 2]; buckets.count];
        for payment in log.payments.values() {
            if let Some(paid_at) = payment.paid_at() {
                payments[buckets.index(paid_at)][0] += 1;
            }
            for refund in payment.refunds.values() {
                payments[buckets.index(refund.refunded_at)][1] += 1;
            }
        }
        Self {
            buckets,
            accepted,
            cancellations,
            payments,
            latency,
            latency_bins: latency_bins(&all_latencies),
            admission_left: admission_left(log, buckets.origin),
            stock_left: stock_left(log, &changes, buckets.origin),
            added: added(log),
            returned: returned(log, buckets.origin),
            resold: std::iter::once(Step { at: buckets.origin, value: 0 })
                .chain(resale.steps.iter().map(|&(at, units)| Step { at, value: signed(units) }))
                .collect(),
            sold_out_at: stats.sold_out_at,
        }
    }
}

/// The shared time axis: first acceptance to last outcome, payment or
/// refund.
fn axis(log: &VoucherLog) -> Buckets {
    let orders = log.orders.values().flat_map(|order| {
        let outcomes = order.decisions.iter().chain(&order.cancellations).chain(&order.paid);
        std::iter::once(order.accepted_at).chain(outcomes.map(|outcome| outcome.at))
    });
    let payments = log.payments.values().flat_map(|payment| {
        payment.paid_at().into_iter().chain(payment.refunds.values().map(|refund| refund.refunded_at))
    });
    let times = orders.chain(payments);
    let (first, last) =
        times.fold((None, None), |(first, last): (Option<DateTime<Utc>>, Option<DateTime<Utc>>), at| {
            (Some(first.map_or(at, |f| f.min(at))), Some(last.map_or(at, |l| l.max(at))))
        });
    let fallback = log.definition.as_ref().map_or_else(Utc::now, |definition| definition.begins_at);
    Buckets::covering(first.unwrap_or(fallback), last.unwrap_or(fallback))
}

/// Steps from signed changes at times, starting at `initial` at `origin`;
/// changes before `origin` are folded into the first value.
fn cumulate(origin: DateTime<Utc>, initial: i64, mut changes: Vec<(DateTime<Utc>, i64)>) -> Vec<Step> {
    changes.sort_by_key(|&(at, change)| (at, std::cmp::Reverse(change)));
    let mut value = initial;
    let mut steps = vec![Step { at: origin, value }];
    for (at, change) in changes {
        value += change;
        if at <= origin {
            steps[0].value = value;
        } else if let Some(last) = steps.last_mut().filter(|last| last.at == at) {
            last.value = value;
        } else {
            steps.push(Step { at, value });
        }
    }
    steps
}

fn admission_left(log: &VoucherLog, origin: DateTime<Utc>) -> Vec<Step> {
    let mut changes = Vec::new();
    for order in log.orders.values() {
        let units = i64::from(order.quantity);
        changes.push((order.accepted_at, -units));
        if let Some(failure) = order.first_decision().filter(|d| matches!(d.kind, OutcomeKind::Failed(_))) {
            changes.push((failure.at, units));
        }
        if let Some(cancellation) = order.cancellation() {
            changes.push((cancellation.at, units));
        }
    }
    changes.extend(log.updates.values().map(|update| (update.emitted_at, signed(update.add_stock))));
    cumulate(origin, signed(log.initial_stock()), changes)
}

/// The persistent stock in the processor's order (see
/// [`VoucherLog::stock_changes`]), times made monotonic: an update takes
/// effect when the processor reads it, after it was emitted.
fn stock_left(log: &VoucherLog, changes: &[StockChange], origin: DateTime<Utc>) -> Vec<Step> {
    let mut value = signed(log.initial_stock());
    let mut at = origin;
    let mut steps = vec![Step { at: origin, value }];
    for change in changes {
        value = match (change.kind, change.remaining) {
            (ChangeKind::Add(units), _) => value + signed(units),
            (_, Some(remaining)) => signed(remaining),
            (_, None) => value,
        };
        at = at.max(change.at);
        match steps.last_mut() {
            Some(last) if last.at == at => last.value = value,
            _ => steps.push(Step { at, value }),
        }
    }
    steps
}

fn added(log: &VoucherLog) -> Vec<(DateTime<Utc>, u64)> {
    let mut added: Vec<_> =
        log.updates.values().filter(|u| u.add_stock > 0).map(|u| (u.emitted_at, u.add_stock)).collect();
    added.sort();
    added
}

/// Units given back by cancellation events, cumulative from 0 at `origin`.
fn returned(log: &VoucherLog, origin: DateTime<Utc>) -> Vec<Step> {
    let changes = log
        .orders
        .values()
        .flat_map(|order| order.cancellations.iter().map(|c| (c.at, i64::from(order.quantity))))
        .collect();
    cumulate(origin, 0, changes)
}

fn latency_bins(latencies: &[TimeDelta]) -> Vec<LatencyBin> {
    let mut bins: Vec<LatencyBin> = std::iter::once(0.0)
        .chain(LATENCY_EDGES)
        .zip(LATENCY_EDGES.into_iter().map(Some).chain([None]))
        .map(|(from_ms, to_ms)| LatencyBin { from_ms, to_ms, orders: 0 })
        .collect();
    for latency in latencies {
        let ms = millis(*latency);
        let bin = LATENCY_EDGES.iter().position(|&edge| ms < edge).unwrap_or(LATENCY_EDGES.len());
        bins[bin].orders += 1;
    }
    let first = bins.iter().position(|bin| bin.orders > 0).unwrap_or(0);
    let last = bins.iter().rposition(|bin| bin.orders > 0).unwrap_or(0);
    bins[first..=last].to_vec()
}

fn signed(units: u64) -> i64 {
    super::books::signed(units)
}
