//! Following refunds the provider holds `pending` past the refund
//! worker's batch.
//!
//! A card refund usually succeeds at once; a bank's can stay `pending` for
//! days. The refund worker follows one for a few seconds
//! ([`crate::refunds::FOLLOW_IN_BATCH`]), then keeps it in the stock store
//! and lets its batch go, so one slow refund holds no other. This task
//! reads the kept refunds when their check is due and asks the provider
//! how each ended: `succeeded` is logged (`PaymentRefunded`), `failed` is
//! made again (after reading the payment's refunds, never twice), and one
//! still pending is asked again after a doubled pause.
//!
//! The store is the durable part: a refund is rescheduled by keeping its
//! next check before forgetting this one, and forgotten only once its
//! outcome is in the log. A crash in between checks it twice, which logs
//! `PaymentRefunded` at most twice for one refund (readers count a
//! refund once by its id) and never refunds twice.

use std::sync::Arc;
use std::time::Duration;

use seckill_core::metrics::PaymentMetrics;
use seckill_core::topics::Topics;
use seckill_kafka::EventProducer;
use seckill_payments::{Provider, Refund};
use seckill_store::{PendingRefund, StockStore, MAX_PENDING_REFUNDS_PAGE};
use seckill_web::payments::timed;
use tokio_util::sync::CancellationToken;

use crate::refunds::{attempt_refund, ended, millis, next_check, refunded, Final, FIRST_KEPT_PAUSE};

/// Longest pause between two checks of one kept refund.
pub(crate) const MAX_PAUSE: Duration = Duration::from_secs(600);

/// Follows the refunds kept in the store.
#[derive(Debug)]
pub(crate) struct PendingRefunds {
    pub(crate) store: Arc<dyn StockStore>,
    pub(crate) provider: Provider,
    pub(crate) producer: EventProducer,
    pub(crate) topics: Topics,
    pub(crate) metrics: PaymentMetrics,
    /// How often the store is read for due checks.
    pub(crate) interval: Duration,
}

/// What one check decided.
enum Checked {
    /// The outcome is in the log: forget the refund.
    Done,
    /// Ask again: keep this in its place.
    Again(PendingRefund),
}

impl PendingRefunds {
    /// Checks due refunds every `interval` until `shutdown`.
    pub(crate) async fn run(self, shutdown: CancellationToken) {
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = tokio::time::sleep(self.interval) => {}
            }
            if let Err(error) = self.sweep().await {
                tracing::warn!(%error, "Reading pending refunds failed; trying again next interval.");
            }
        }
    }

    async fn sweep(&self) -> Result<(), String> {
        let now = chrono::Utc::now();
        let due = self.store.due_pending_refunds(now, MAX_PENDING_REFUNDS_PAGE).await.map_err(|e| e.to_string())?;
        for kept in due {
            let next = match self.check(&kept).await {
                Checked::Done => None,
                Checked::Again(next) => Some(next),
            };
            if let Some(next) = &next {
                self.store.put_pending_refund(next).await.map_err(|e| e.to_string())?;
            }
            self.store.delete_pending_refund(&kept).await.map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    /// Asks the provider how `kept` ended and acts on it.
    async fn check(&self, kept: &PendingRefund) -> Checked {
        let payment = kept.request.payment_id.as_str();
        let read = timed(&self.metrics, "refunds", self.provider.retrieve_refund(&kept.refund_id)).await;
        let refund = match read {
            Ok(refund) => refund,
            Err(error) => {
                tracing::warn!(%error, refund_id = %kept.refund_id, "A pending refund could not be read; asking again.");
                return Checked::Again(later(kept));
            }
        };
        match ended(&refund) {
            Some(Final::Succeeded(refund)) => self.log(kept, refund).await,
            Some(Final::Failed) => {
                self.metrics.refunds.with_label_values(&["failed"]).inc();
                tracing::warn!(payment_id = %payment, refund_id = %kept.refund_id, "The provider failed a pending refund; refunding again.");
                let attempt = kept.attempt + 1;
                match attempt_refund(&self.provider, &self.metrics, payment, attempt).await {
                    Ok(made) => match ended(&made) {
                        Some(Final::Succeeded(made)) => self.log(kept, made).await,
                        // Made again and pending (or failed at once): followed
                        // under its own id from the first pause.
                        _ => Checked::Again(PendingRefund {
                            refund_id: made.id,
                            attempt,
                            next_check: next_check(FIRST_KEPT_PAUSE),
                            pause_ms: millis(FIRST_KEPT_PAUSE),
                            ..kept.clone()
                        }),
                    },
                    Err(error) => {
                        // The failed refund stays named: the next check
                        // finds it failed and tries again, reading the
                        // payment's refunds first.
                        tracing::warn!(%error, payment_id = %payment, "Refunding again failed; asking again.");
                        Checked::Again(later(kept))
                    }
                }
            }
            Some(Final::Pending(_)) | None => {
                self.metrics.refunds.with_label_values(&["pending"]).inc();
                Checked::Again(later(kept))
            }
        }
    }

    /// Logs `refund` as done for `kept`'s request; Again if the log did not
    /// take it.
    async fn log(&self, kept: &PendingRefund, refund: Refund) -> Checked {
        let refund_id = refund.id.clone();
        let record = refunded(&kept.request, refund);
        match self.producer.send(&self.topics.orders, &record).await {
            Ok(_) => {
                self.metrics.refunds.with_label_values(&["completed"]).inc();
                tracing::info!(payment_id = %kept.request.payment_id, %refund_id, "A pending refund succeeded.");
                Checked::Done
            }
            Err(error) => {
                tracing::warn!(%error, %refund_id, "A finished refund could not be logged; asking again.");
                Checked::Again(later(kept))
            }
        }
    }
}

/// `kept`, checked again after its pause, the pause doubled up to
/// [`MAX_PAUSE`].
fn later(kept: &PendingRefund) -> PendingRefund {
    let pause = Duration::from_millis(kept.pause_ms).max(FIRST_KEPT_PAUSE);
    PendingRefund { next_check: next_check(pause), pause_ms: millis((pause * 2).min(MAX_PAUSE)), ..kept.clone() }
}

#[cfg(test)]
mod tests {
    use chrono::Utc;
    use seckill_core::event::{RefundReason, RefundRequested};
    use seckill_core::money::Currency;
    use seckill_core::{OrderId, VoucherId};

    use super::*;

    #[test]
    fn a_refund_still_pending_is_asked_again_after_a_doubling_pause_up_to_the_bound() {
        let kept = PendingRefund {
            request: RefundRequested {
                order_id: OrderId::generate(),
                voucher_id: VoucherId::generate(),
                payment_id: "pi_1".to_owned(),
                amount: 100,
                currency: Currency::parse("EUR").expect("a currency"),
                reason: RefundReason::Late,
                requested_at: Utc::now(),
            },
            refund_id: "re_1".to_owned(),
            attempt: 0,
            next_check: Utc::now(),
            pause_ms: millis(FIRST_KEPT_PAUSE),
        };
        let next = later(&kept);
        assert_eq!(next.pause_ms, millis(FIRST_KEPT_PAUSE * 2));
        let wait = next.next_check - Utc::now();
        assert!(wait > chrono::Duration::seconds(4) && wait <= chrono::Duration::seconds(5), "{wait}");
        let mut slowest = kept;
        for _ in 0..20 {
            slowest = later(&slowest);
        }
        assert_eq!(slowest.pause_ms, millis(MAX_PAUSE), "the pause stops doubling at its bound");
        assert_eq!((slowest.refund_id.as_str(), slowest.attempt), ("re_1", 0), "the same refund is followed");
    }
}
