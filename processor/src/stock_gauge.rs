//! `seckill_stock_remaining{voucher}` with bounded cardinality: a series
//! only for the most recently active vouchers. Voucher ids as label values
//! are acceptable only because the set is capped and old ones are removed.
//! The same vouchers' stock as the Redis gate has it,
//! `seckill_gate_stock_remaining{voucher}`, is read on a schedule
//! ([`watch_gate_stock`]), so the two can be compared.

use std::collections::VecDeque;
use std::sync::Mutex;

use prometheus::IntGaugeVec;
use seckill_core::metrics::MAX_STOCK_SERIES;
use seckill_core::shutdown::Every;
use seckill_core::VoucherId;

/// The gauge and the vouchers it has series for, most recent last.
#[derive(Debug)]
pub(crate) struct StockGauge {
    gauge: IntGaugeVec,
    tracked: Mutex<VecDeque<VoucherId>>,
}

impl StockGauge {
    pub(crate) fn new(gauge: IntGaugeVec) -> Self {
        Self { gauge, tracked: Mutex::new(VecDeque::new()) }
    }

    /// The vouchers with a series now, least recently active first.
    pub(crate) fn tracked(&self) -> Vec<VoucherId> {
        self.tracked.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).iter().copied().collect()
    }

    /// Records `voucher`'s persistent stock left, dropping the series of the
    /// least recently active voucher when over the cap.
    pub(crate) fn record(&self, voucher: VoucherId, remaining: u64) {
        let label = voucher.to_string();
        self.gauge.with_label_values(&[label.as_str()]).set(i64::try_from(remaining).unwrap_or(i64::MAX));
        let mut tracked = self.tracked.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        tracked.retain(|seen| *seen != voucher);
        tracked.push_back(voucher);
        while tracked.len() > MAX_STOCK_SERIES {
            if let Some(oldest) = tracked.pop_front() {
                let _ = self.gauge.remove_label_values(&[oldest.to_string().as_str()]);
            }
        }
    }
}

/// Every `every` until `shutdown`: the gate's remaining units of each
/// voucher `stock` tracks, in `gauge`; series of vouchers no longer tracked
/// are removed. A voucher the gate no longer has (its sale over and its
/// keys expired) gets no series.
pub(crate) async fn watch_gate_stock(
    stock: std::sync::Arc<StockGauge>,
    gate: seckill_gate::Gate,
    gauge: IntGaugeVec,
    every: std::time::Duration,
    shutdown: tokio_util::sync::CancellationToken,
) {
    let mut shown: Vec<VoucherId> = Vec::new();
    let mut ticks = Every::new(every);
    while ticks.tick(&shutdown).await {
        let tracked = stock.tracked();
        for gone in shown.iter().filter(|voucher| !tracked.contains(voucher)) {
            let _ = gauge.remove_label_values(&[gone.to_string().as_str()]);
        }
        shown.clear();
        for voucher in tracked {
            match gate.voucher(voucher).await {
                Ok(Some(state)) => {
                    gauge
                        .with_label_values(&[voucher.to_string().as_str()])
                        .set(i64::try_from(state.remaining).unwrap_or(i64::MAX));
                    shown.push(voucher);
                }
                Ok(None) => {
                    let _ = gauge.remove_label_values(&[voucher.to_string().as_str()]);
                }
                // Redis unreachable: `seckill_dependency_up` says so; the
                // last figure stays.
                Err(error) => {
                    tracing::debug!(%error, "Could not read the gate's stock.");
                    shown.push(voucher);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_a_series_for_recent_vouchers_only() {
        let gauge = IntGaugeVec::new(prometheus::Opts::new("t", "t"), &["voucher"]).expect("gauge");
        let stock = StockGauge::new(gauge.clone());
        let vouchers: Vec<VoucherId> = (0..=MAX_STOCK_SERIES).map(|_| VoucherId::generate()).collect();
        for (i, voucher) in vouchers.iter().enumerate() {
            stock.record(*voucher, i as u64);
        }
        let families = prometheus::core::Collector::collect(&gauge);
        assert_eq!(families[0].get_metric().len(), MAX_STOCK_SERIES);
        assert!(gauge.get_metric_with_label_values(&[vouchers[1].to_string().as_str()]).is_ok());
    }
}
