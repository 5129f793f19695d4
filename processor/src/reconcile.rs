//! Asking the provider before an order is closed as unpaid, and closing
//! an order's checkouts when it closes.
//!
//! A callback can be lost or late, so the expiry sweeper never closes an
//! order on the log's word alone: for every due order it reads each
//! checkout session the log recorded for it (`CheckoutOpened`), by id, and
//! expires each one still open. Ids, not the provider's search: Stripe's
//! search is eventually consistent, so a payment made a moment before the
//! deadline may not be found yet. An expired session can no longer be
//! paid, so the order is then closed without racing a buyer at the
//! checkout; a session found paid (before or during the expiry) is
//! reported like a callback, and the processor decides it by the charge's
//! time against `pay_by`. A session whose payment is still settling (a
//! bank debit: `complete` but `unpaid`) keeps the order open until the
//! provider says how it ended.

use seckill_core::event::{PaymentReceived, PaymentSource};
use seckill_core::metrics::PaymentMetrics;
use seckill_core::OrderId;
use seckill_payments::{CheckoutSession, IntentStatus, Provider, ProviderError, SessionPaymentStatus, SessionStatus};
use seckill_web::payments::{payment_received, timed};

/// What the provider says of an order's checkouts.
#[derive(Debug, PartialEq)]
pub(crate) enum Settled {
    /// No payment succeeded, and none can now: close it.
    Unpaid,
    /// These payments succeeded: report them instead of closing it.
    Paid(Vec<PaymentReceived>),
    /// A payment is still settling: keep the order open, ask again later.
    Settling,
}

/// Settles orders with the provider.
#[derive(Debug, Clone)]
pub(crate) struct Reconciler {
    pub(crate) provider: Provider,
    pub(crate) metrics: PaymentMetrics,
}

impl Reconciler {
    /// Expires the open checkouts of `order` and reports the paid ones.
    /// An error means nothing is known: ask again later, close nothing.
    pub(crate) async fn settle(&self, order: OrderId, checkouts: &[String]) -> Result<Settled, ProviderError> {
        let settled = self.ask(order, checkouts).await;
        let result = match &settled {
            Ok(Settled::Unpaid) => "unpaid",
            Ok(Settled::Paid(_)) => "paid",
            Ok(Settled::Settling) => "settling",
            Err(_) => "error",
        };
        self.metrics.reconciliations.with_label_values(&[result]).inc();
        settled
    }

    async fn ask(&self, order: OrderId, checkouts: &[String]) -> Result<Settled, ProviderError> {
        let mut paid = Vec::new();
        let mut settling = false;
        for id in checkouts {
            let session = match self.closed(id).await {
                Ok(session) => session,
                // A session the provider does not have (another account or
                // mode) can take no payment: nothing to wait for.
                Err(error) if error.status() == Some(404) => {
                    tracing::warn!(%error, session = %id, %order, "A recorded checkout is unknown to the provider.");
                    continue;
                }
                Err(error) => return Err(error),
            };
            match paid_by(&session, order) {
                Paying::Paid(payment) => paid.push(*payment),
                Paying::Settling => settling = true,
                Paying::No => {}
            }
        }
        Ok(if !paid.is_empty() {
            Settled::Paid(paid)
        } else if settling {
            Settled::Settling
        } else {
            Settled::Unpaid
        })
    }

    /// The session, expired first if it was still open: its final state
    /// (`expired`, or `complete` when the buyer paid first).
    pub(crate) async fn closed(&self, id: &str) -> Result<CheckoutSession, ProviderError> {
        let session = timed(&self.metrics, "retrieve", self.provider.retrieve_checkout(id)).await?;
        if session.status != SessionStatus::Open {
            return Ok(session);
        }
        timed(&self.metrics, "expire", self.provider.expire_checkout(id)).await
    }
}

/// What a closed session says of its order's payment.
pub(crate) enum Paying {
    Paid(Box<PaymentReceived>),
    Settling,
    No,
}

/// Whether `session`, read with its intent expanded, paid `order`.
pub(crate) fn paid_by(session: &CheckoutSession, order: OrderId) -> Paying {
    if session.status != SessionStatus::Complete {
        return Paying::No;
    }
    let Some(intent) = session.expanded_intent() else {
        // Complete without an intent: a free session, nothing taken.
        return Paying::No;
    };
    if session.payment_status != SessionPaymentStatus::Paid || intent.status != IntentStatus::Succeeded {
        return if intent.status == IntentStatus::Processing { Paying::Settling } else { Paying::No };
    }
    // The charge's time decides; the moment it is learnt of is the latest
    // it can have been.
    let now = seckill_core::clock::now().timestamp();
    match payment_received(intent, now, PaymentSource::Reconciliation) {
        Some(payment) if payment.order_id == order => Paying::Paid(Box::new(payment)),
        _ => {
            tracing::warn!(payment_id = %intent.id, %order, "A session's payment names another order; not reported.");
            Paying::No
        }
    }
}
