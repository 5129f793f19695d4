//! The expiry sweeper: cancels orders not paid within their `pay_by`.
//!
//! Deadlines live in the stock store (written in the same transaction that
//! created the order), so expiry survives restarts: a processor that was
//! down when a hold ended finds the order on its first sweep. The sweeper
//! does not cancel anything itself; it publishes `CancelRequested` (reason
//! `expired`) on the sales topic, and the pipeline decides it in log order
//! with everything else (a claim asked for before the deadline wins
//! whenever it is decided). With a payment provider, each order is first
//! settled with it ([`Reconciler`]): the checkout sessions the log
//! recorded for it are read by id and expired if still open, and a payment
//! found succeeded is reported (`PaymentReceived`) instead of the
//! cancellation; the order is closed only when the provider confirms no
//! payment can succeed, and kept open while one is still settling. The
//! cancellation names the sessions it settled, and the pipeline refuses it
//! if the log holds one more by then (a session opened while this store was
//! behind, possibly paid in time). While the pipeline is behind on the
//! sales topic a request is never sent twice.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::stream::{self, StreamExt};
use prometheus::IntGaugeVec;
use seckill_core::event::{Event, OrderRequest};
use seckill_core::metrics::ProcessorMetrics;
use seckill_core::topics::Topics;
use seckill_core::{Envelope, OrderId};
use seckill_kafka::EventProducer;
use seckill_store::{HoldCursor, StockStore, MAX_EXPIRED_PAGE};
use tokio_util::sync::CancellationToken;

use crate::reconcile::{Reconciler, Settled};

/// How long a published request is given to be decided, once the pipeline
/// has caught up with the sales topic, before the order, still held, is
/// requested again (the first request may have been lost with a crashed
/// broker or processor).
const REQUEST_AGAIN_AFTER: Duration = Duration::from_secs(30);

/// Finds expired holds and requests their cancellation.
#[derive(Debug)]
pub(crate) struct ExpirySweeper {
    pub(crate) store: Arc<dyn StockStore>,
    pub(crate) producer: EventProducer,
    pub(crate) topics: Topics,
    pub(crate) interval: Duration,
    pub(crate) metrics: ProcessorMetrics,
    /// The pipeline's consumer lag per partition (`seckill_consumer_lag`):
    /// while it is behind on the sales topic, a request already published is
    /// still on its way, not lost.
    pub(crate) lag: IntGaugeVec,
    /// Asks the provider before an order is closed; None without payments.
    pub(crate) reconciler: Option<Reconciler>,
}

/// Orders settled with the provider at once.
const SETTLE_AT_ONCE: usize = 8;

/// Whether a due hold is requested now, given when it was last requested:
/// at once the first time; again only once `REQUEST_AGAIN_AFTER` has passed
/// and the pipeline is caught up, so the earlier request, had it arrived,
/// would have been decided. A lagging processor is never sent the same
/// request again (each would make it emit the order's history once more).
fn request_now(last: Option<Instant>, now: Instant, pipeline_caught_up: bool) -> bool {
    match last {
        None => true,
        Some(at) => pipeline_caught_up && now.saturating_duration_since(at) >= REQUEST_AGAIN_AFTER,
    }
}

/// Whether the consumer reports no record of `topic` left to handle (no
/// report counts as caught up: a processor with no partition of it).
fn caught_up(lag: &IntGaugeVec, topic: &str) -> bool {
    prometheus::core::Collector::collect(lag).iter().flat_map(|family| family.get_metric()).all(|metric| {
        let of_topic = metric.get_label().iter().any(|label| label.name() == "topic" && label.value() == topic);
        !of_topic || metric.get_gauge().get_value() <= 0.0
    })
}

impl ExpirySweeper {
    /// Sweeps every `interval` until `shutdown`.
    pub(crate) async fn run(self, shutdown: CancellationToken) {
        // The orders of the last page of due holds, with when each was last
        // requested, and any requested in the last `REQUEST_AGAIN_AFTER`:
        // bounded by what one sweep requests in that time.
        let mut requested: HashMap<OrderId, Instant> = HashMap::new();
        // Where the next sweep's page starts: after a full page, past it, so
        // a page of orders kept open (a payment settling, the provider
        // down) never hides the due orders behind it; from the start again
        // after a short one.
        let mut after: Option<HoldCursor> = None;
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = tokio::time::sleep(self.interval) => {}
            }
            match self.sweep(&mut requested, after).await {
                Ok(next) => after = next,
                Err(error) => tracing::warn!(%error, "Expiry sweep failed; trying again next interval."),
            }
        }
    }

    /// Requests what one page of due holds needs; returns where the next
    /// page starts.
    async fn sweep(
        &self,
        requested: &mut HashMap<OrderId, Instant>,
        after: Option<HoldCursor>,
    ) -> Result<Option<HoldCursor>, String> {
        let page =
            self.store.expired(seckill_core::clock::now(), after, MAX_EXPIRED_PAGE).await.map_err(|e| e.to_string())?;
        let next = if page.len() >= MAX_EXPIRED_PAGE { page.last().map(|hold| hold.cursor) } else { None };
        let now = Instant::now();
        // An order no longer due was decided: forget it (a page's orders,
        // and those requested too recently to be asked again on any page).
        let due_now: HashSet<OrderId> = page.iter().map(|hold| hold.request.order_id).collect();
        requested
            .retain(|order, at| due_now.contains(order) || now.saturating_duration_since(*at) < REQUEST_AGAIN_AFTER);
        let caught_up = caught_up(&self.lag, &self.topics.sales);
        let due: Vec<OrderRequest> = page
            .into_iter()
            .map(|hold| hold.request)
            .filter(|request| request_now(requested.get(&request.order_id).copied(), now, caught_up))
            .collect();
        let mut settled = stream::iter(due).map(|request| self.settle(request)).buffered(SETTLE_AT_ONCE);
        while let Some((order_id, records)) = settled.next().await {
            let Some(records) = records else { continue };
            for event in records {
                let cancels = matches!(event, Event::CancelRequested(_));
                let envelope = Envelope::new(event);
                self.producer.send(&self.topics.sales, &envelope).await.map_err(|e| e.to_string())?;
                if cancels {
                    self.metrics.expiry_requests.inc();
                    tracing::debug!(%order_id, "Hold expired; cancellation requested.");
                } else {
                    tracing::info!(%order_id, "A payment found before closing the order; reported.");
                }
            }
            requested.insert(order_id, Instant::now());
        }
        Ok(next)
    }

    /// What to publish for an order due to expire: its cancellation, or the
    /// payments the provider has for it; None when the provider could not
    /// say (asked again next sweep).
    async fn settle(&self, request: OrderRequest) -> (OrderId, Option<Vec<Event>>) {
        let order_id = request.order_id;
        let Some(reconciler) = &self.reconciler else {
            return (order_id, Some(vec![Event::CancelRequested(request)]));
        };
        let record = match self.store.order_record(request.voucher_id, order_id).await {
            Ok(record) => record.unwrap_or_default(),
            Err(error) => {
                tracing::warn!(%error, %order_id, "Could not read an expiring order's checkouts; kept open.");
                return (order_id, None);
            }
        };
        // The expiry names the sessions settled: the pipeline decides it
        // only if they are all the log holds by then (this store may be
        // behind the log, and a session not read here may be paid).
        let request = OrderRequest { settled_checkouts: Some(record.checkouts.clone()), ..request };
        match reconciler.settle(order_id, &record.checkouts).await {
            Ok(Settled::Unpaid) => (order_id, Some(vec![Event::CancelRequested(request)])),
            Ok(Settled::Paid(payments)) => {
                // A payment already decided against (refunded: the wrong
                // amount, say) pays nothing: reporting it again would hold
                // the order open for ever, asked about every sweep.
                let fresh: Vec<Event> = payments
                    .into_iter()
                    .filter(|payment| !record.refunded(&payment.payment_id))
                    .map(Event::PaymentReceived)
                    .collect();
                if fresh.is_empty() {
                    (order_id, Some(vec![Event::CancelRequested(request)]))
                } else {
                    (order_id, Some(fresh))
                }
            }
            Ok(Settled::Settling) => {
                tracing::info!(%order_id, "An expiring order's payment is still settling; kept open.");
                (order_id, None)
            }
            Err(error) => {
                tracing::warn!(%error, %order_id, "The payment provider could not settle an expiring order; kept open.");
                (order_id, None)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use prometheus::Opts;

    use super::*;

    #[test]
    fn a_request_is_sent_again_only_when_the_pipeline_would_have_decided_it() {
        let now = Instant::now();
        assert!(request_now(None, now, false), "the first time, at once, lagging or not");
        let long_ago = now.checked_sub(REQUEST_AGAIN_AFTER * 10).unwrap_or(now);
        if long_ago < now {
            assert!(!request_now(Some(long_ago), now, false), "never again while the pipeline is behind");
            assert!(request_now(Some(long_ago), now, true), "caught up and still held: the request was lost");
        }
        assert!(!request_now(Some(now), now, true), "not again right away");
    }

    #[test]
    fn the_pipeline_is_caught_up_when_no_partition_of_the_topic_is_behind() {
        let lag = IntGaugeVec::new(Opts::new("lag", "lag"), &["topic", "partition"]).expect("a gauge");
        assert!(caught_up(&lag, "sales"), "no report");
        lag.with_label_values(&["sales", "0"]).set(0);
        lag.with_label_values(&["orders", "0"]).set(500);
        assert!(caught_up(&lag, "sales"), "another topic's lag does not count");
        lag.with_label_values(&["sales", "1"]).set(3);
        assert!(!caught_up(&lag, "sales"));
    }
}
