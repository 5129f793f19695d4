//! The processor's consume → decide → produce → store-offsets loop.

use std::sync::Arc;
use std::time::Duration;

use futures::future::join_all;
use seckill_core::event::Event;
use seckill_core::event::RefundReason;
use seckill_core::metrics::{ConsumerMetrics, PaymentMetrics};
use seckill_core::topics::Topics;
use seckill_kafka::{
    decode, retry, retry_pause, BatchConsumer, BatchHandler, DeadLetter, EventProducer, Interrupted, OwnedMessage,
};
use seckill_store::{Decided, StockInput, StockStore, StoreError};
use tokio_util::sync::CancellationToken;

use crate::stock_gauge::StockGauge;

/// The loop's parts.
#[derive(Debug)]
pub(crate) struct Pipeline {
    pub(crate) producer: EventProducer,
    pub(crate) dead_letter: DeadLetter,
    pub(crate) store: Arc<dyn StockStore>,
    pub(crate) topics: Topics,
    pub(crate) metrics: ConsumerMetrics,
    /// The persistent stock of recently active vouchers, for dashboards.
    pub(crate) stock: Arc<StockGauge>,
    /// What reported payments did (`seckill_payments_decided_total`).
    pub(crate) payments: PaymentMetrics,
}

impl Pipeline {
    /// Runs until `shutdown`, then commits the stored offsets.
    pub(crate) async fn run(self, consumer: BatchConsumer, shutdown: CancellationToken) {
        consumer.run(&self, &shutdown).await;
        self.producer.flush(Duration::from_secs(5));
        tracing::info!("Processor stopped.");
    }

    /// Produces every outcome and waits for all acknowledgements, keeping
    /// each order's outcomes in order on the topic: outcomes go out in
    /// waves, decisions, then confirmations, then cancellations, and a wave
    /// starts only once the one before is acknowledged. A failed send is retried within its
    /// wave (duplicates on the topic are harmless, reordering is not: a
    /// retried `OrderCreated` must never land after its `OrderCancelled`).
    async fn emit(&self, decided: &[Decided], shutdown: &CancellationToken) -> Result<(), Interrupted> {
        for wave in waves(decided) {
            let mut pending = wave;
            while !pending.is_empty() {
                let sends = pending.iter().map(|decision| self.producer.send(&self.topics.orders, &decision.outcome));
                let results = join_all(sends).await;
                let mut failed = Vec::new();
                for (decision, result) in pending.into_iter().zip(results) {
                    match result {
                        Ok(_) => self.record(decision),
                        Err(error) => {
                            self.metrics.produce_errors.inc();
                            tracing::warn!(%error, "Outcome not acknowledged; retrying.");
                            failed.push(decision);
                        }
                    }
                }
                pending = failed;
                if !pending.is_empty() {
                    self.unless_fenced(&pending).await?;
                    retry_pause(shutdown).await?;
                }
            }
        }
        Ok(())
    }

    /// Gives the batch up (`Interrupted`: the consumer rewinds and polls)
    /// when a processor with a later fencing epoch has written a voucher of
    /// `pending`: that processor owns the voucher's partition now and sends
    /// these outcomes itself (it replays them); one sent late from here, by
    /// a processor cut off from Kafka past its session, could land after
    /// that processor's next outcome of the same order.
    async fn unless_fenced(&self, pending: &[&Decided]) -> Result<(), Interrupted> {
        let mut vouchers: Vec<_> = pending.iter().map(|decision| decision.outcome.event.voucher_id()).collect();
        vouchers.sort_unstable();
        vouchers.dedup();
        for voucher in vouchers {
            match self.store.fenced(voucher).await {
                Ok(false) => {}
                Ok(true) => {
                    tracing::warn!(%voucher, "Fenced: another processor owns the voucher; its outcomes are not sent from here.");
                    return Err(Interrupted);
                }
                // Unknown: sending again is what happened before fencing.
                Err(error) => tracing::warn!(%error, %voucher, "Fencing not checked."),
            }
        }
        Ok(())
    }

    /// Applies the batch to the stock store, retrying failures, or gives it
    /// up when fenced: a processor with a later epoch has written one of
    /// its vouchers, so this one lost the partition in a rebalance it has
    /// not seen yet (the consumer rewinds and polls, and sees it).
    async fn apply(&self, inputs: &[StockInput], shutdown: &CancellationToken) -> Result<Vec<Decided>, Interrupted> {
        loop {
            match self.store.apply(inputs.to_vec()).await {
                Ok(decided) => return Ok(decided),
                Err(error @ StoreError::Fenced { .. }) => {
                    tracing::warn!(%error, "Fenced: another processor owns a voucher of this batch; giving it up.");
                    return Err(Interrupted);
                }
                Err(error) => {
                    tracing::error!(%error, what = "applying a batch to the stock store", "Failed; retrying.");
                    retry_pause(shutdown).await?;
                }
            }
        }
    }

    fn record(&self, decision: &Decided) {
        let result = if decision.replayed { "duplicate" } else { "applied" };
        self.metrics.events.with_label_values(&[request_kind(&decision.outcome.event), result]).inc();
        if decision.replayed {
            return;
        }
        match &decision.outcome.event {
            Event::OrderCreated(c) => self.stock.record(c.order.voucher_id, c.remaining),
            Event::OrderCancelled(c) => self.stock.record(c.order.voucher_id, c.remaining),
            Event::OrderPaid(paid) if paid.payment_id.is_some() => {
                self.payments.decided.with_label_values(&["paid"]).inc();
            }
            Event::RefundRequested(refund) => {
                let outcome = match refund.reason {
                    RefundReason::Late => "refund_late",
                    RefundReason::Duplicate => "refund_duplicate",
                    RefundReason::Admin => "refund_admin",
                    RefundReason::AmountMismatch => "refund_amount_mismatch",
                };
                self.payments.decided.with_label_values(&[outcome]).inc();
            }
            _ => {}
        }
        let (accepted_at, decided_at) = match &decision.outcome.event {
            Event::OrderCreated(c) => (c.order.accepted_at, c.decided_at),
            Event::OrderFailed(f) => (f.order.accepted_at, f.decided_at),
            _ => return,
        };
        let micros = (decided_at - accepted_at).num_microseconds().unwrap_or(0);
        self.metrics.order_latency.with_label_values(&["decided"]).observe(micros as f64 / 1e6);
    }
}

impl BatchHandler for Pipeline {
    /// Makes every effect of `batch` durable: decisions stored, outcomes and
    /// dead letters acknowledged.
    async fn handle(&self, batch: &[OwnedMessage], shutdown: &CancellationToken) -> Result<(), Interrupted> {
        self.metrics.batch_size.observe(batch.len() as f64);
        let mut inputs = Vec::with_capacity(batch.len());
        let mut rejects = Vec::new();
        for message in batch {
            match classify(message) {
                Ok(Some(input)) => inputs.push(input),
                Ok(None) => self.metrics.events.with_label_values(&["queue", "passed"]).inc(),
                Err(reason) => rejects.push((message, reason)),
            }
        }

        let decided = self.apply(&inputs, shutdown).await?;
        self.emit(&decided, shutdown).await?;
        // Redis follows from the log, off this path (`crate::gate_follower`):
        // deciding needs no Redis, so a Redis master out of reach stops no
        // decision.
        self.dead_letter.park_all(&rejects, shutdown).await?;
        self.metrics.dead_letters.inc_by(rejects.len() as u64);
        self.metrics.events.with_label_values(&["invalid", "dead_lettered"]).inc_by(rejects.len() as u64);
        Ok(())
    }

    /// Takes a fencing epoch after each assignment, before the first batch
    /// (see `StockStore::take_epoch`).
    async fn assigned(&self, shutdown: &CancellationToken) -> Result<(), Interrupted> {
        let epoch = retry(shutdown, "taking a fencing epoch", || self.store.take_epoch()).await?;
        if epoch > 0 {
            tracing::info!(epoch, "Took a fencing epoch.");
        }
        Ok(())
    }
}

/// Splits `decided` into waves by the step of an order's life each outcome
/// is: decisions (`OrderCreated`, `OrderFailed`), then payments, then
/// cancellations, then refund requests (a refund may follow the
/// cancellation it belongs to: an admin's). An order has at most one outcome of each step in a batch
/// (the store sends each outcome once), so no wave holds two outcomes of one
/// order, and every order's outcomes go out in the order they happen, even
/// when the batch decided them out of that order: a duplicate acceptance
/// later in the batch than a new cancellation replays the order's creation
/// after it, and the creation must still reach the log first.
fn waves(decided: &[Decided]) -> Vec<Vec<&Decided>> {
    let mut waves: Vec<Vec<&Decided>> = vec![Vec::new(); 4];
    for decision in decided {
        let step = match decision.outcome.event {
            Event::OrderPaid(_) => 1,
            Event::OrderCancelled(_) => 2,
            Event::RefundRequested(_) => 3,
            _ => 0,
        };
        waves[step].push(decision);
    }
    waves.retain(|wave| !wave.is_empty());
    waves
}

/// What a sales-topic record asks of the processor (nothing, for the
/// waiting room's and the draw's records: they decide no order), or why it cannot be used.
fn classify(message: &OwnedMessage) -> Result<Option<StockInput>, String> {
    StockInput::of(decode(message)?).map_err(|kind| format!("{kind} does not belong on the sales topic"))
}

/// The kind of sales-topic record an outcome answers, for the consumed-events
/// metric.
fn request_kind(outcome: &Event) -> &'static str {
    match outcome {
        Event::OrderCancelled(_) => "CancelRequested",
        Event::OrderPaid(paid) if paid.payment_id.is_none() => "ConfirmRequested",
        Event::OrderPaid(_) | Event::RefundRequested(_) => "PaymentReceived",
        _ => "OrderAccepted",
    }
}

#[cfg(test)]
mod tests {
    use chrono::Utc;
    use seckill_core::event::{CancelReason, OrderAccepted, OrderCancelled, OrderCreated, OrderPaid};
    use seckill_core::{Envelope, UserId, VoucherId};

    use super::*;

    fn order() -> OrderAccepted {
        OrderAccepted::now(VoucherId::generate(), UserId::parse("u").expect("valid"), 1)
    }

    fn decided(event: Event) -> Decided {
        Decided { outcome: Envelope::new(event), replayed: false }
    }

    #[test]
    fn an_orders_outcomes_go_out_in_separate_waves_in_order() {
        let (a, b) = (order(), order());
        let now = Utc::now();
        let created_a = decided(Event::OrderCreated(OrderCreated {
            order: a.clone(),
            decided_at: now,
            remaining: 1,
            pay_by: None,
        }));
        let created_b = decided(Event::OrderCreated(OrderCreated {
            order: b.clone(),
            decided_at: now,
            remaining: 0,
            pay_by: None,
        }));
        let confirmed_a = decided(Event::OrderPaid(OrderPaid { order: a.clone(), paid_at: now, payment_id: None }));
        let cancelled_a = decided(Event::OrderCancelled(OrderCancelled {
            order: a,
            cancelled_at: now,
            reason: CancelReason::Requested,
            remaining: 2,
        }));
        let batch = vec![created_a.clone(), confirmed_a.clone(), created_b.clone(), cancelled_a.clone()];
        let waves = waves(&batch);
        assert_eq!(waves, vec![vec![&created_a, &created_b], vec![&confirmed_a], vec![&cancelled_a]]);
    }

    /// A new cancellation, then a duplicate acceptance replaying the
    /// creation, in one batch: the creation still goes out first.
    #[test]
    fn a_replayed_creation_goes_out_before_a_new_cancellation_of_the_same_batch() {
        let order = order();
        let now = Utc::now();
        let created = Decided {
            replayed: true,
            ..decided(Event::OrderCreated(OrderCreated {
                order: order.clone(),
                decided_at: now,
                remaining: 1,
                pay_by: None,
            }))
        };
        let cancelled = decided(Event::OrderCancelled(OrderCancelled {
            order,
            cancelled_at: now,
            reason: CancelReason::Expired,
            remaining: 2,
        }));
        let batch = vec![cancelled.clone(), created.clone()];
        assert_eq!(waves(&batch), vec![vec![&created], vec![&cancelled]]);
    }
}
