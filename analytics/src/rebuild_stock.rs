//! Rebuilding the processor's stock store from the log, and checking it.
//!
//! The sales topic is the stock's source of truth: every voucher's
//! definition, addition, order, cancel, claim, payment and checkout is on
//! it, in each voucher's partition in the order the processor applied them.
//! A rebuild reads it from offset 0 to the high watermarks present when it
//! starts (no consumer group), turns each record into the `StockInput` the
//! processor would (`StockInput::of`) and applies them, in bounded chunks,
//! through the same `StockStore::apply` into a fresh store.
//!
//! The log must be whole: the sales topic keeps every record (`retention.ms`
//! and `retention.bytes` -1, checked at every service's start), and a
//! rebuild refuses to run when a partition's earliest offset is not 0
//! (records deleted by hand, or a topic made with the broker's defaults),
//! as the store it would build would lack the vouchers of the lost records.
//!
//! Every decision (created or failed, the reason, the units left, a
//! cancel's units back) is a function of the records in log order but one
//! time: an order's `pay_by` is its `decided_at`, the deciding clock, plus
//! the voucher's `payment_seconds`, and it decides later claims and
//! payments. So the rebuild first reads each order's decision time from
//! the processor's own outcomes on the orders topic, and decides the order
//! again as of then (`StockInput::OrderAsDecided`): its `pay_by` is the one
//! the buyer was told. An order the processor had not decided is decided
//! now, as the processor would. The other times of the outcomes
//! (`cancelled_at`, `paid_at`, a refund's `requested_at`) and their event
//! ids are the rebuild's own; they decide nothing. `verify` compares
//! decisions without their times and ids, and the `pay_by`s.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use seckill_core::config::KafkaConfig;
use seckill_core::event::Event;
use seckill_core::{Envelope, OrderId, VoucherId};
use seckill_kafka::Message;
use seckill_store::{Decided, StockInput, StockStore};
use serde::Serialize;

use crate::audit::StockFigures;
use crate::chunks::{counts, read_in_chunks};
use crate::AnalyticsError;

/// What a sales-topic record asks of the store, as the processor's
/// pipeline reads it (`StockInput::of`), an order dated by the processor's
/// decision of it where `decided` has one: None for the waiting room's and
/// the draw's records, which decide no order, and for records that do not
/// belong on the sales topic (the processor parks those as dead letters;
/// they change no stock).
fn stock_input(envelope: Envelope, decided: &BTreeMap<OrderId, DateTime<Utc>>) -> Option<StockInput> {
    match StockInput::of(envelope).ok()?? {
        StockInput::Order(order) => Some(match decided.get(&order.order_id) {
            Some(&decided_at) => StockInput::OrderAsDecided { order, decided_at },
            None => StockInput::Order(order),
        }),
        input => Some(input),
    }
}

/// One outcome of an order, without what a rebuild cannot reproduce (its
/// event id and times): what two runs over the same log must agree on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Outcome {
    /// `created`, `failed`, `paid`, `cancelled` or `refund`.
    pub kind: &'static str,
    /// The decision's content: units left, a reason, a payment id.
    pub detail: String,
}

impl Outcome {
    /// The step of an order's life the outcome is (the processor's waves).
    fn step(&self) -> u8 {
        match self.kind {
            "created" | "failed" => 0,
            "paid" => 1,
            "cancelled" => 2,
            _ => 3,
        }
    }

    /// The outcome an orders-topic event is, with the order it belongs to
    /// and its `pay_by` (created orders); None for other events.
    pub fn of(event: &Event) -> Option<(OrderId, Self, Option<DateTime<Utc>>)> {
        let outcome = |kind, detail: String| Self { kind, detail };
        Some(match event {
            Event::OrderCreated(c) => {
                (c.order.order_id, outcome("created", format!("remaining={}", c.remaining)), c.pay_by)
            }
            Event::OrderFailed(f) => (f.order.order_id, outcome("failed", f.reason.as_str().to_owned()), None),
            Event::OrderPaid(p) => {
                let by = p.payment_id.as_deref().unwrap_or("claim");
                (p.order.order_id, outcome("paid", by.to_owned()), None)
            }
            Event::OrderCancelled(c) => {
                let detail = format!("{} remaining={}", c.reason.as_str(), c.remaining);
                (c.order.order_id, outcome("cancelled", detail), None)
            }
            Event::RefundRequested(r) => {
                let detail = format!("{} {} {}", r.reason.as_str(), r.payment_id, r.amount);
                (r.order_id, outcome("refund", detail), None)
            }
            _ => return None,
        })
    }
}

/// An order's outcomes, each once, in the order of an order's life.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct OrderOutcomes {
    pub voucher_id: Option<VoucherId>,
    /// Sorted by the step of the order's life (decision, payment,
    /// cancellation, refunds), as the processor publishes a batch's
    /// outcomes: the order they reach the topic in depends on how the
    /// records fell into batches, which a rebuild does not repeat.
    pub outcomes: Vec<Outcome>,
    /// The order's `pay_by`, when created for a voucher that holds orders.
    pub pay_by: Option<DateTime<Utc>>,
}

impl OrderOutcomes {
    /// Adds `outcome` unless the order has it: an order has at most one of
    /// each (a refund is once per payment id), and an outcome published
    /// again (a redelivery, or one answered from a rebuilt store under a
    /// new event id) is the same outcome.
    fn push(&mut self, voucher: VoucherId, outcome: Outcome, pay_by: Option<DateTime<Utc>>) {
        self.voucher_id = Some(voucher);
        self.pay_by = self.pay_by.or(pay_by);
        if !self.outcomes.contains(&outcome) {
            let at = self.outcomes.partition_point(|o| o.step() <= outcome.step());
            self.outcomes.insert(at, outcome);
        }
    }
}

/// What a rebuild read and built.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct StockRebuild {
    /// Records read from the sales topic.
    pub records: u64,
    /// Records that are not events (the processor parks them).
    pub undecodable: u64,
    /// Records that decide nothing (waiting room, draw) or do not belong on
    /// the sales topic.
    pub passed: u64,
    /// Every voucher the records name.
    pub vouchers: BTreeSet<VoucherId>,
    /// Every accepted order read, with the outcomes the rebuild decided.
    pub orders: BTreeMap<OrderId, OrderOutcomes>,
}

impl StockRebuild {
    fn record(&mut self, decided: &[Decided]) {
        for decision in decided.iter().filter(|decision| !decision.replayed) {
            let event = &decision.outcome.event;
            if let Some((order, outcome, pay_by)) = Outcome::of(event) {
                self.orders.entry(order).or_default().push(event.voucher_id(), outcome, pay_by);
            }
        }
    }
}

/// Refuses a topic whose partitions do not all start at offset 0: records
/// were deleted, and whatever is built from the rest is wrong.
async fn ensure_whole(kafka: &KafkaConfig, topic: String) -> Result<(), AnalyticsError> {
    let config = kafka.clone();
    let overview = tokio::task::spawn_blocking(move || crate::topics::overview(&config, &[]))
        .await
        .map_err(|e| AnalyticsError::Task(e.to_string()))??;
    let Some(found) = overview.topics.iter().find(|t| t.name == topic) else {
        return Err(AnalyticsError::Live {
            what: format!("reading topic {topic}"),
            reason: "it does not exist".into(),
        });
    };
    if let Some(cut) = found.partitions.iter().find(|p| p.low != 0) {
        return Err(AnalyticsError::LogIncomplete { topic, partition: cut.partition, earliest: cut.low });
    }
    Ok(())
}

/// Applies the sales topic, as it is now, from its first record, to
/// `target` (a fresh store), each order decided as of the processor's
/// logged decision of it.
pub async fn rebuild_stock(kafka: &KafkaConfig, target: Arc<dyn StockStore>) -> Result<StockRebuild, AnalyticsError> {
    let topics = kafka.topics();
    ensure_whole(kafka, topics.sales.clone()).await?;
    let decided = decision_times(kafka).await?;
    // Under a fencing epoch of its own (CQL), like a processor: one started
    // later takes a later epoch and owns every voucher again.
    target.take_epoch().await?;
    let (mut received, reader) = read_in_chunks(kafka.brokers.clone(), vec![topics.sales.clone()]);

    let mut report = StockRebuild::default();
    while let Some(chunk) = received.recv().await {
        let mut inputs = Vec::with_capacity(chunk.len());
        for envelope in chunk {
            report.vouchers.insert(envelope.event.voucher_id());
            if let Event::OrderAccepted(order) = &envelope.event {
                report.orders.entry(order.order_id).or_default().voucher_id = Some(order.voucher_id);
            }
            match stock_input(envelope, &decided) {
                Some(input) => inputs.push(input),
                None => report.passed += 1,
            }
        }
        let decided = target.apply(inputs).await?;
        report.record(&decided);
    }
    let (records, undecodable) = counts(reader).await?;
    report.records = records;
    report.undecodable = undecodable;
    Ok(report)
}

/// When the processor decided each order it decided (its first
/// `OrderCreated` or `OrderFailed` on the orders topic): 16 bytes of key
/// and 12 of time per order in memory.
async fn decision_times(kafka: &KafkaConfig) -> Result<BTreeMap<OrderId, DateTime<Utc>>, AnalyticsError> {
    let orders_topic = kafka.topics().orders;
    ensure_whole(kafka, orders_topic.clone()).await?;
    let brokers = kafka.brokers.clone();
    tokio::task::spawn_blocking(move || {
        let mut decided = BTreeMap::new();
        seckill_kafka::read_to_end(&brokers, &[&orders_topic], |message| {
            let Ok(envelope) = Envelope::decode(message.payload().unwrap_or_default()) else { return };
            let (order, at) = match &envelope.event {
                Event::OrderCreated(created) => (created.order.order_id, created.decided_at),
                Event::OrderFailed(failed) => (failed.order.order_id, failed.decided_at),
                _ => return,
            };
            decided.entry(order).or_insert(at);
        })?;
        Ok(decided)
    })
    .await
    .map_err(|e| AnalyticsError::Task(e.to_string()))?
}

/// The outcomes the processor published on the orders topic, per order.
pub async fn logged_outcomes(kafka: &KafkaConfig) -> Result<BTreeMap<OrderId, OrderOutcomes>, AnalyticsError> {
    let orders_topic = kafka.topics().orders;
    ensure_whole(kafka, orders_topic.clone()).await?;
    let brokers = kafka.brokers.clone();
    tokio::task::spawn_blocking(move || {
        let mut logged: BTreeMap<OrderId, OrderOutcomes> = BTreeMap::new();
        seckill_kafka::read_to_end(&brokers, &[&orders_topic], |message| {
            let Ok(envelope) = Envelope::decode(message.payload().unwrap_or_default()) else { return };
            if let Some((order, outcome, pay_by)) = Outcome::of(&envelope.event) {
                logged.entry(order).or_default().push(envelope.event.voucher_id(), outcome, pay_by);
            }
        })?;
        Ok(logged)
    })
    .await
    .map_err(|e| AnalyticsError::Task(e.to_string()))?
}

/// One thing the rebuilt store and the log or the live store disagree on.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StockDifference {
    /// `order` (its outcomes against the log) or `voucher` (its stock
    /// against the live store).
    pub row: &'static str,
    pub id: String,
    /// What the rebuild has (None: nothing).
    pub rebuilt: Option<serde_json::Value>,
    /// What the log or the live store has (None: nothing).
    pub live: Option<serde_json::Value>,
    /// Why, when the tool can tell (the wall clock of the decision).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub explained: Option<String>,
}

/// Compares every order the rebuild read with the outcomes `logged` for
/// it, and every voucher's rebuilt stock with what `live` (the running
/// processor's stock, or None where it does not know the voucher) has.
pub async fn verify<F, Fut>(
    report: &StockRebuild,
    logged: &BTreeMap<OrderId, OrderOutcomes>,
    rebuilt: &dyn StockStore,
    live: F,
) -> Result<Vec<StockDifference>, AnalyticsError>
where
    F: Fn(VoucherId) -> Fut,
    Fut: std::future::Future<Output = Result<Option<StockFigures>, AnalyticsError>>,
{
    let mut differences = Vec::new();
    let nothing = OrderOutcomes::default();
    for (order, ours) in &report.orders {
        let theirs = logged.get(order).unwrap_or(&nothing);
        if ours.outcomes == theirs.outcomes && ours.pay_by == theirs.pay_by {
            continue;
        }
        let explained = match (ours.pay_by, theirs.pay_by) {
            (Some(rebuilt), Some(logged)) if rebuilt != logged => Some(format!(
                "pay_by {rebuilt} where the processor's was {logged}: the log's decision time was not found \
                 (a claim or payment between the two is judged differently)"
            )),
            _ => None,
        };
        differences.push(StockDifference {
            row: "order",
            id: order.to_string(),
            rebuilt: json_of(&ours.outcomes)?,
            live: json_of(&theirs.outcomes)?,
            explained,
        });
    }
    for voucher in &report.vouchers {
        let ours = rebuilt.stock(*voucher).await?.map(|l| StockFigures { stock: l.stock, remaining: l.remaining });
        let theirs = live(*voucher).await?;
        if ours == theirs {
            continue;
        }
        let figures =
            |f: Option<StockFigures>| f.map(|f| serde_json::json!({"stock": f.stock, "remaining": f.remaining}));
        differences.push(StockDifference {
            row: "voucher",
            id: voucher.to_string(),
            rebuilt: figures(ours),
            live: figures(theirs),
            explained: None,
        });
    }
    Ok(differences)
}

/// The running processor's persistent stock, through its
/// `GET /api/v1/stock/{id}` (the live store may be a redb file the
/// processor holds open).
#[derive(Clone, Debug)]
pub struct ProcessorStock {
    url: String,
    http: reqwest::Client,
}

impl ProcessorStock {
    /// The processor at `url` (e.g. `http://127.0.0.1:8081`).
    pub fn new(url: &str) -> Result<Self, AnalyticsError> {
        let http = reqwest::Client::builder()
            .timeout(std::time::Duration::from_secs(10))
            .build()
            .map_err(|e| AnalyticsError::Live { what: "an HTTP client".into(), reason: e.to_string() })?;
        Ok(Self { url: url.trim_end_matches('/').to_owned(), http })
    }

    /// The voucher's stock and units left; None when the processor does
    /// not know it.
    pub async fn stock(&self, voucher: VoucherId) -> Result<Option<StockFigures>, AnalyticsError> {
        let url = format!("{}/api/v1/stock/{voucher}", self.url);
        let failed = |e: reqwest::Error| AnalyticsError::Live { what: format!("asking {url}"), reason: e.to_string() };
        let response = self.http.get(&url).send().await.map_err(failed)?;
        if response.status() == reqwest::StatusCode::NOT_FOUND {
            return Ok(None);
        }
        response.error_for_status().map_err(failed)?.json().await.map(Some).map_err(failed)
    }
}

/// A list of outcomes as JSON, None when empty.
fn json_of(outcomes: &[Outcome]) -> Result<Option<serde_json::Value>, AnalyticsError> {
    if outcomes.is_empty() {
        return Ok(None);
    }
    serde_json::to_value(outcomes).map(Some).map_err(|e| AnalyticsError::Task(e.to_string()))
}

#[cfg(test)]
mod tests {
    use seckill_core::event::{CancelReason, OrderAccepted, OrderCancelled, OrderCreated};
    use seckill_core::UserId;

    use super::*;

    /// Two outcomes that differ only in their times and ids compare equal;
    /// the units left do not.
    #[test]
    fn outcomes_compare_without_times_and_ids() {
        let order = OrderAccepted::now(VoucherId::generate(), UserId::parse("u1").expect("valid"), 1);
        let created = |at: DateTime<Utc>, remaining| {
            Event::OrderCreated(OrderCreated { order: order.clone(), decided_at: at, remaining, pay_by: Some(at) })
        };
        let (now, later) = (Utc::now(), Utc::now() + chrono::Duration::seconds(30));
        let (id, first, first_pay_by) = Outcome::of(&created(now, 3)).expect("an outcome");
        let (_, second, second_pay_by) = Outcome::of(&created(later, 3)).expect("an outcome");
        assert_eq!((id, &first), (order.order_id, &second));
        assert_ne!(first_pay_by, second_pay_by);
        assert_ne!(Outcome::of(&created(now, 2)).expect("an outcome").1, first);
        let cancelled = Event::OrderCancelled(OrderCancelled {
            order: order.clone(),
            cancelled_at: now,
            reason: CancelReason::Expired,
            remaining: 4,
        });
        let (_, cancel, _) = Outcome::of(&cancelled).expect("an outcome");
        assert_eq!((cancel.kind, cancel.detail.as_str()), ("cancelled", "expired remaining=4"));
        assert!(Outcome::of(&Event::OrderAccepted(order)).is_none());
    }

    /// A refund decided before the cancellation it came with, or an
    /// outcome published twice, is the same history as the processor's
    /// waves put on the topic.
    #[test]
    fn an_orders_outcomes_do_not_depend_on_batching_or_redelivery() {
        let voucher = VoucherId::generate();
        let outcome = |kind, detail: &str| Outcome { kind, detail: detail.to_owned() };
        let (created, cancelled, refund) = (
            outcome("created", "remaining=0"),
            outcome("cancelled", "expired remaining=1"),
            outcome("refund", "late pi_1 500"),
        );
        let mut decided = OrderOutcomes::default();
        for o in [&created, &refund, &cancelled] {
            decided.push(voucher, o.clone(), None);
        }
        let mut published = OrderOutcomes::default();
        for o in [&created, &cancelled, &refund, &created] {
            published.push(voucher, o.clone(), None);
        }
        assert_eq!(decided, published);
        assert_eq!(published.outcomes, vec![created, cancelled, refund]);
    }
}
