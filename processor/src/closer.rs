//! Closing an order's checkouts when the order closes.
//!
//! A buyer can keep a checkout tab open after the order was cancelled (by
//! them, an admin or the expiry) or paid through another session: every
//! close of an order expires its recorded sessions at the provider at
//! once, so nobody can pay for an order that is gone. A session found paid
//! meanwhile (the buyer won the race) is reported like a callback
//! (`PaymentReceived`, source `reconciliation`), so the processor refunds
//! it exactly once whether or not its callback ever arrives.
//!
//! Driven by the orders topic in the refund worker's group, so a crash
//! replays the batch; expiring an expired session and reporting a payment
//! twice both change nothing.

use std::sync::Arc;
use std::time::Duration;

use seckill_core::event::Event;
use seckill_core::Envelope;
use seckill_store::StockStore;
use tokio_util::sync::CancellationToken;

use crate::reconcile::{paid_by, Paying, Reconciler};

/// Expires the checkouts of closed orders.
#[derive(Debug)]
pub(crate) struct CheckoutCloser {
    pub(crate) store: Arc<dyn StockStore>,
    pub(crate) reconciler: Reconciler,
    /// First pause after a failed call; doubles up to `max_backoff`.
    pub(crate) backoff: Duration,
    pub(crate) max_backoff: Duration,
}

/// A refusal that asking again cannot change (the session is unknown to
/// the provider): logged and left.
fn is_final(error: &seckill_payments::ProviderError) -> bool {
    !error.is_retryable() && !matches!(error.status(), Some(401 | 403))
}

impl CheckoutCloser {
    /// The payments found on the checkouts of the order `event` closes
    /// (none for other events), once every open one is expired; Err only
    /// on shutdown.
    pub(crate) async fn close(&self, event: &Event, shutdown: &CancellationToken) -> Result<Vec<Envelope>, ()> {
        let order = match event {
            Event::OrderCancelled(cancelled) => &cancelled.order,
            Event::OrderPaid(paid) if paid.payment_id.is_some() => &paid.order,
            _ => return Ok(Vec::new()),
        };
        let record = self
            .asked(shutdown, "reading a closed order's checkouts", || async {
                self.store.order_record(order.voucher_id, order.order_id).await.map_err(|e| e.to_string())
            })
            .await?
            .unwrap_or_default();
        let mut found = Vec::new();
        for id in &record.checkouts {
            let closed = self
                .asked(shutdown, "expiring a closed order's checkout", || async {
                    match self.reconciler.closed(id).await {
                        Ok(session) => Ok(Some(session)),
                        Err(error) if is_final(&error) => {
                            tracing::warn!(%error, session = %id, "A closed order's checkout is unknown to the provider.");
                            Ok(None)
                        }
                        Err(error) => Err(error.to_string()),
                    }
                })
                .await?;
            if let Some(Paying::Paid(payment)) = closed.map(|session| paid_by(&session, order.order_id)) {
                // A payment already decided (it paid the order, or was
                // refunded) is not reported again: its decision would be
                // repeated, with the order's outcomes, and bring us back.
                let decided = record.paid_by(&payment.payment_id) || record.refunded(&payment.payment_id);
                if !decided {
                    tracing::info!(order_id = %order.order_id, payment_id = %payment.payment_id, "A closed order's checkout was paid; reported.");
                    found.push(Envelope::new(Event::PaymentReceived(*payment)));
                }
            }
        }
        Ok(found)
    }

    /// Runs `call` until it succeeds, with doubling pauses; Err on shutdown.
    async fn asked<T, F, Fut>(&self, shutdown: &CancellationToken, what: &str, mut call: F) -> Result<T, ()>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T, String>>,
    {
        let mut pause = self.backoff;
        loop {
            match call().await {
                Ok(value) => return Ok(value),
                Err(error) => {
                    tracing::warn!(%error, ?pause, "{what} failed; asking again.");
                    tokio::select! {
                        () = shutdown.cancelled() => return Err(()),
                        () = tokio::time::sleep(pause) => {}
                    }
                    pause = (pause * 2).min(self.max_backoff);
                }
            }
        }
    }
}
