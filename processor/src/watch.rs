//! The processor's part in the alert rules: whether it reaches Redis and
//! the broker (`seckill_dependency_up`), and the gate's stock of the
//! vouchers it decides, next to the persistent stock it keeps.

use std::sync::Arc;
use std::time::Duration;

use prometheus::{Gauge, IntGaugeVec};
use seckill_gate::Gate;
use seckill_kafka::EventProducer;
use seckill_web::probes::{probe_dependencies, Probe, PROBE_EVERY};
use tokio_util::sync::CancellationToken;

use crate::stock_gauge::{watch_gate_stock, StockGauge};

/// How often the gate's stock is read: a few reads of a few keys for at
/// most `MAX_STOCK_SERIES` vouchers.
const GATE_STOCK_EVERY: Duration = Duration::from_secs(5);

#[derive(Debug)]
pub(crate) struct Watch {
    pub(crate) gate: Gate,
    pub(crate) producer: EventProducer,
    pub(crate) stock: Arc<StockGauge>,
    pub(crate) gate_stock: IntGaugeVec,
    pub(crate) dependency_up: IntGaugeVec,
    /// Redis's clock minus ours, measured by the Redis probe.
    pub(crate) clock_offset: Gauge,
}

impl Watch {
    /// Probes and reads until `shutdown`.
    pub(crate) async fn run(self, shutdown: CancellationToken) {
        let probes = vec![Probe::redis(self.gate.clone(), self.clock_offset.clone()), Probe::kafka(self.producer)];
        tokio::join!(
            probe_dependencies(probes, self.dependency_up, PROBE_EVERY, shutdown.clone()),
            watch_gate_stock(self.stock, self.gate, self.gate_stock, GATE_STOCK_EVERY, shutdown),
        );
    }
}
