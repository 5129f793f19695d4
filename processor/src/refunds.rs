//! The refund worker: gives back every payment the processor decided to
//! refund (`RefundRequested` on the orders topic), exactly once at the
//! provider whatever crashes, and closes the checkouts of orders that
//! closed ([`CheckoutCloser`]).
//!
//! Refunds are driven from the log, not from memory: the worker consumes
//! the orders topic in its own consumer group and stores a batch's offsets
//! only once every refund in it is acknowledged by the provider and its
//! `PaymentRefunded` record is in the log. A crash replays the batch; the
//! refund call carries the payment id as its idempotency key, so the
//! provider answers a repeated call with the refund it already made, never
//! a second one. A provider keeps a failed (`5xx`) answer under its key and
//! replays it for a day, so a later attempt reads the payment's refunds
//! first and asks under a new key only when none is done or under way. A
//! refund is final only when the provider says so: one accepted `pending`
//! is followed until it `succeeded` (then logged) or `failed` (then made
//! again); one still pending after [`FOLLOW_IN_BATCH`] is kept in the
//! stock store and followed from there ([`crate::pending_refunds`]), so a
//! slow bank holds no other refund. A provider that refuses (down, failing) is asked again
//! with doubling pauses until it acknowledges; a refund it refuses for good
//! (no such payment) is dead-lettered for an operator, never a stalled
//! partition.

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use futures::future::join_all;
use seckill_core::event::{Event, PaymentRefunded, RefundRequested};
use seckill_core::metrics::PaymentMetrics;
use seckill_core::topics::Topics;
use seckill_core::Envelope;
use seckill_kafka::{decode, retry, BatchConsumer, BatchHandler, DeadLetter, EventProducer, Interrupted, OwnedMessage};
use seckill_payments::{Provider, ProviderError, Refund};
use seckill_store::{PendingRefund, StockStore};
use seckill_web::payments::timed;
use tokio_util::sync::CancellationToken;

use crate::closer::CheckoutCloser;

/// The idempotency key of a payment's refund, attempt `attempt`: the
/// first attempt's key is the payment's alone; a later attempt is made
/// under a new key only once the provider's list of the payment's refunds
/// shows none done or under way, so there are never two (a provider keeps
/// a failed answer under its key for a day and would replay it).
pub(crate) fn refund_key(payment_id: &str, attempt: u32) -> String {
    if attempt == 0 {
        format!("refund-{payment_id}")
    } else {
        format!("refund-{payment_id}-{attempt}")
    }
}

/// One attempt to refund `payment`: the first under the payment's own key;
/// a later one only after reading the payment's refunds, so a refund an
/// earlier attempt made (its answer lost) is taken instead of made twice.
pub(crate) async fn attempt_refund(
    provider: &Provider,
    metrics: &PaymentMetrics,
    payment: &str,
    attempt: u32,
) -> Result<Refund, ProviderError> {
    if attempt > 0 {
        if let Some(made) = timed(metrics, "refunds", provider.live_refund(payment)).await? {
            return Ok(made);
        }
    }
    timed(metrics, "refund", provider.refund(payment, &refund_key(payment, attempt))).await
}

/// How `refund` ended, if it has.
pub(crate) fn ended(refund: &Refund) -> Option<Final> {
    match refund.status.as_str() {
        "succeeded" => Some(Final::Succeeded(refund.clone())),
        "failed" | "canceled" => Some(Final::Failed),
        _ => None,
    }
}

/// When a refund kept `pause` from now is next checked, to the millisecond
/// (as the stores keep it).
pub(crate) fn next_check(pause: Duration) -> chrono::DateTime<Utc> {
    let at = Utc::now() + chrono::Duration::from_std(pause).unwrap_or(chrono::Duration::MAX);
    chrono::DateTime::from_timestamp_millis(at.timestamp_millis()).unwrap_or(at)
}

/// `pause` in whole milliseconds, as a kept refund stores it.
pub(crate) fn millis(pause: Duration) -> u64 {
    u64::try_from(pause.as_millis()).unwrap_or(u64::MAX)
}

/// Gives back refunded payments.
#[derive(Debug)]
pub(crate) struct RefundWorker {
    pub(crate) provider: Provider,
    /// Where refunds still pending after [`FOLLOW_IN_BATCH`] are kept.
    pub(crate) store: Arc<dyn StockStore>,
    pub(crate) producer: EventProducer,
    pub(crate) dead_letter: DeadLetter,
    pub(crate) topics: Topics,
    pub(crate) metrics: PaymentMetrics,
    /// First pause after a refused refund; doubles up to `max_backoff`.
    pub(crate) backoff: Duration,
    pub(crate) max_backoff: Duration,
    /// Expires the checkouts of orders that closed.
    pub(crate) closer: CheckoutCloser,
}

/// How long a `pending` refund is followed inside its batch. A bank's
/// refund can stay pending for days: past this it is kept in the store and
/// followed from there ([`crate::pending_refunds`]), so it holds no refund
/// (and no order's close) behind it on its partition.
pub(crate) const FOLLOW_IN_BATCH: Duration = Duration::from_secs(10);

/// The first pause before a kept pending refund is asked about again; it
/// doubles up to [`crate::pending_refunds::MAX_PAUSE`].
pub(crate) const FIRST_KEPT_PAUSE: Duration = Duration::from_secs(5);

/// What became of one refund.
enum Refunded {
    Done(Envelope),
    /// Still `pending` at the provider: kept in the store, followed there.
    Kept,
    /// Refused for good: the reason, for the dead letter.
    Rejected(String),
}

/// How a refund ended, as far as it was followed.
pub(crate) enum Final {
    Succeeded(Refund),
    /// `failed` or `canceled`: made again.
    Failed,
    /// Still `pending` once the follow ended.
    Pending(Refund),
}

/// The `PaymentRefunded` record of `refund`, made for `request`.
pub(crate) fn refunded(request: &RefundRequested, refund: Refund) -> Envelope {
    Envelope::new(Event::PaymentRefunded(PaymentRefunded {
        order_id: request.order_id,
        voucher_id: request.voucher_id,
        payment_id: request.payment_id.clone(),
        refund_id: refund.id,
        amount: refund.amount,
        currency: request.currency,
        refunded_at: seckill_core::clock::now(),
    }))
}

impl RefundWorker {
    /// Consumes until `shutdown`, then commits what is done.
    pub(crate) async fn run(self, consumer: BatchConsumer, shutdown: CancellationToken) {
        consumer.run(&self, &shutdown).await;
        self.producer.flush(Duration::from_secs(5));
        tracing::info!("Refund worker stopped.");
    }

    /// Refunds one payment, asking until the provider says the refund is
    /// done (`succeeded`), refuses it for good, or holds it `pending`
    /// longer than [`FOLLOW_IN_BATCH`] (then it is kept in the store and
    /// followed from there). One that `failed` is made again.
    async fn refund(&self, request: &RefundRequested, shutdown: &CancellationToken) -> Result<Refunded, Interrupted> {
        let payment = request.payment_id.as_str();
        let mut attempt = 0;
        let mut pause = self.backoff;
        loop {
            match attempt_refund(&self.provider, &self.metrics, payment, attempt).await {
                Ok(refund) => match self.until_final(refund, shutdown).await? {
                    Final::Succeeded(refund) => {
                        self.metrics.refunds.with_label_values(&["completed"]).inc();
                        tracing::info!(payment_id = %payment, refund_id = %refund.id, reason = request.reason.as_str(), "Payment refunded.");
                        return Ok(Refunded::Done(refunded(request, refund)));
                    }
                    Final::Pending(refund) => {
                        let kept = PendingRefund {
                            request: request.clone(),
                            refund_id: refund.id,
                            attempt,
                            next_check: next_check(FIRST_KEPT_PAUSE),
                            pause_ms: millis(FIRST_KEPT_PAUSE),
                        };
                        retry(shutdown, "keeping a pending refund", || self.store.put_pending_refund(&kept)).await?;
                        tracing::info!(payment_id = %payment, refund_id = %kept.refund_id, "A refund is still pending; followed from the store.");
                        return Ok(Refunded::Kept);
                    }
                    Final::Failed => {
                        self.metrics.refunds.with_label_values(&["failed"]).inc();
                        tracing::warn!(payment_id = %payment, "The provider failed a refund; refunding again.");
                    }
                },
                // A refused key (401, 403) is a configuration an operator
                // fixes, not a verdict on the refund: asked again.
                Err(error) if !error.is_retryable() && !matches!(error.status(), Some(401 | 403)) => {
                    self.metrics.refunds.with_label_values(&["rejected"]).inc();
                    tracing::error!(%error, payment_id = %payment, "The provider refused a refund for good; dead-lettered.");
                    return Ok(Refunded::Rejected(format!("refund refused by the provider: {error}")));
                }
                Err(error) => {
                    self.metrics.refunds.with_label_values(&["retried"]).inc();
                    tracing::warn!(%error, payment_id = %payment, ?pause, "Refund not acknowledged; asking again.");
                }
            }
            attempt += 1;
            self.pause(&mut pause, shutdown).await?;
        }
    }

    /// Follows a refund until the provider says how it ended, for at most
    /// [`FOLLOW_IN_BATCH`].
    async fn until_final(&self, mut refund: Refund, shutdown: &CancellationToken) -> Result<Final, Interrupted> {
        let mut pause = self.backoff;
        let until = tokio::time::Instant::now() + FOLLOW_IN_BATCH;
        loop {
            if let Some(ended) = ended(&refund) {
                return Ok(ended);
            }
            // `pending` (or `requires_action`): not final yet.
            self.metrics.refunds.with_label_values(&["pending"]).inc();
            if tokio::time::Instant::now() + pause > until {
                return Ok(Final::Pending(refund));
            }
            self.pause(&mut pause, shutdown).await?;
            match timed(&self.metrics, "refunds", self.provider.retrieve_refund(&refund.id)).await {
                Ok(now) => refund = now,
                Err(error) => {
                    tracing::warn!(%error, refund_id = %refund.id, "A pending refund could not be read; asking again.")
                }
            }
        }
    }

    /// Waits `pause` (Err on shutdown), then doubles it up to the bound.
    async fn pause(&self, pause: &mut Duration, shutdown: &CancellationToken) -> Result<(), Interrupted> {
        tokio::select! {
            () = shutdown.cancelled() => return Err(Interrupted),
            () = tokio::time::sleep(*pause) => {}
        }
        *pause = (*pause * 2).min(self.max_backoff);
        Ok(())
    }
}

impl BatchHandler for RefundWorker {
    // A refund's attempt number is its idempotency key: a batch read again
    // would ask the provider with the keys of the attempts that failed
    // (answered the same, replayed), so a long outage would never get past
    // them. Its consumer waits five minutes for a poll instead (`app.rs`).
    const REWIND_WHEN_STUCK: bool = false;

    async fn handle(&self, batch: &[OwnedMessage], shutdown: &CancellationToken) -> Result<(), Interrupted> {
        // Records this worker cannot read are the pipeline's and the
        // projector's to dead-letter; refund requests and closed orders
        // matter here.
        let mut requests: Vec<(&OwnedMessage, RefundRequested)> = Vec::new();
        for message in batch {
            let Ok(envelope) = decode(message) else { continue };
            if let Event::RefundRequested(request) = envelope.event {
                requests.push((message, request));
                continue;
            }
            let found = self.closer.close(&envelope.event, shutdown).await.map_err(|()| Interrupted)?;
            for payment in found {
                retry(shutdown, "reporting a closed order's payment", || {
                    self.producer.send(&self.topics.sales, &payment)
                })
                .await?;
            }
        }
        if requests.is_empty() {
            return Ok(());
        }
        // Different payments are independent: refunded at once.
        let results = join_all(requests.iter().map(|(_, request)| self.refund(request, shutdown))).await;
        let mut rejected = Vec::new();
        for ((message, _), result) in requests.iter().zip(results) {
            match result? {
                Refunded::Done(record) => {
                    retry(shutdown, "logging a refund", || self.producer.send(&self.topics.orders, &record)).await?;
                }
                Refunded::Kept => {}
                Refunded::Rejected(reason) => rejected.push((*message, reason)),
            }
        }
        self.dead_letter.park_all(&rejected, shutdown).await
    }
}
