//! What the running platform holds for a voucher, for `audit --live`: the
//! view's voucher row (the projector's query API), the persistent stock
//! (the processor's `GET /api/v1/stock/{id}`) and the gate's counters in
//! Redis, plus the admitted orders still in the outbox (in Redis, not yet
//! in the log).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use seckill_core::config::RedisConfig;
use seckill_core::event::OrderAccepted;
use seckill_core::ids::VoucherId;
use seckill_core::{Envelope, Event};
use seckill_gate::Gate;
use seckill_store::{ViewReader, VoucherView};
use serde::Deserialize;

use crate::AnalyticsError;

/// Most outbox records read; an outbox this long means the relay is far
/// behind, and the gate comparison says how many it counted.
pub const MAX_OUTBOX: usize = 1_000_000;
/// How long one HTTP request to the processor may take.
const HTTP_TIMEOUT: Duration = Duration::from_secs(10);

/// The processor's persistent stock of one voucher.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
pub struct StockFigures {
    pub stock: u64,
    pub remaining: u64,
}

/// The gate's counters of one voucher.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GateFigures {
    pub stock: u64,
    pub remaining: u64,
    /// Units per user id.
    pub bought: HashMap<String, u64>,
}

/// One voucher as the live stores hold it; `None` where a store does not
/// know the voucher.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LiveFigures {
    pub view: Option<VoucherView>,
    pub stock: Option<StockFigures>,
    pub gate: Option<GateFigures>,
    /// This voucher's admitted orders in the outbox.
    pub outbox: Vec<OrderAccepted>,
}

/// Where the live figures come from.
#[derive(Clone)]
pub struct LiveSources {
    view: Arc<dyn ViewReader>,
    processor_url: String,
    http: reqwest::Client,
    gate: Gate,
}

impl std::fmt::Debug for LiveSources {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveSources").field("processor_url", &self.processor_url).finish_non_exhaustive()
    }
}

impl LiveSources {
    /// The view behind `view`, the processor at `processor_url` (e.g.
    /// `http://127.0.0.1:8081`) and the gate in `redis`.
    pub async fn connect(
        view: Arc<dyn ViewReader>,
        processor_url: &str,
        redis: &RedisConfig,
    ) -> Result<Self, AnalyticsError> {
        let http = reqwest::Client::builder().timeout(HTTP_TIMEOUT).build().map_err(live("an HTTP client"))?;
        let gate = Gate::connect(redis).await.map_err(live("connecting to Redis"))?;
        Ok(Self { view, processor_url: processor_url.trim_end_matches('/').to_owned(), http, gate })
    }

    /// The outbox's admitted orders, by voucher (read once for every
    /// voucher audited).
    pub async fn outbox(&self) -> Result<HashMap<VoucherId, Vec<OrderAccepted>>, AnalyticsError> {
        let records = self.gate.outbox_records(MAX_OUTBOX).await.map_err(live("reading the outbox"))?;
        let mut orders: HashMap<VoucherId, Vec<OrderAccepted>> = HashMap::new();
        for record in records {
            if let Ok(Envelope { event: Event::OrderAccepted(order), .. }) = Envelope::decode(&record) {
                orders.entry(order.voucher_id).or_default().push(order);
            }
        }
        Ok(orders)
    }

    /// What the view, the processor and Redis hold for `voucher`.
    pub async fn figures(&self, voucher: VoucherId, outbox: Vec<OrderAccepted>) -> Result<LiveFigures, AnalyticsError> {
        let view = self.view.voucher(voucher).await?;
        let stock = self.stock(voucher).await?;
        let snapshot = self.gate.admission_snapshot(voucher).await.map_err(live("reading the gate in Redis"))?;
        let gate = snapshot.map(|s| GateFigures { stock: s.stock, remaining: s.remaining, bought: s.bought });
        Ok(LiveFigures { view, stock, gate, outbox })
    }

    async fn stock(&self, voucher: VoucherId) -> Result<Option<StockFigures>, AnalyticsError> {
        let url = format!("{}/api/v1/stock/{voucher}", self.processor_url);
        let response = self.http.get(&url).send().await.map_err(live(format!("asking {url}")))?;
        if response.status() == reqwest::StatusCode::NOT_FOUND {
            return Ok(None);
        }
        let response = response.error_for_status().map_err(live(format!("asking {url}")))?;
        response.json().await.map(Some).map_err(live(format!("reading the answer of {url}")))
    }
}

/// Maps a live source's error to one naming what was being done.
fn live<E: std::fmt::Display>(what: impl Into<String>) -> impl FnOnce(E) -> AnalyticsError {
    let what = what.into();
    move |error| AnalyticsError::Live { what, reason: error.to_string() }
}
