//! Asking the provider before an order is closed as unpaid.
//!
//! A callback can be lost or late, so the expiry sweeper never closes an
//! order on the log's word alone: for every due order it asks the provider
//! for the order's payments and cancels each one still open. A cancelled
//! payment can no longer succeed, so the order is then closed without
//! racing a buyer at the checkout; a payment found succeeded (before or
//! during the cancel) is reported like a callback, and the processor
//! decides it by its payment time against `pay_by`. Operators of real
//! integrations reconcile the same way.

use seckill_core::event::{PaymentReceived, PaymentSource};
use seckill_core::metrics::PaymentMetrics;
use seckill_core::OrderId;
use seckill_payments::{IntentStatus, Provider, ProviderError};
use seckill_web::payments::{payment_received, timed};

/// What the provider says of an order due to expire.
#[derive(Debug, PartialEq)]
pub(crate) enum Settled {
    /// No payment succeeded, and none can now: close it.
    Unpaid,
    /// These payments succeeded: report them instead of closing it.
    Paid(Vec<PaymentReceived>),
}

/// Settles orders with the provider.
#[derive(Debug)]
pub(crate) struct Reconciler {
    pub(crate) provider: Provider,
    pub(crate) metrics: PaymentMetrics,
}

impl Reconciler {
    /// Cancels the open payments of `order` and reports the succeeded ones.
    /// An error means nothing is known: ask again later, close nothing.
    pub(crate) async fn settle(&self, order: OrderId) -> Result<Settled, ProviderError> {
        let settled = self.ask(order).await;
        let result = match &settled {
            Ok(Settled::Unpaid) => "unpaid",
            Ok(Settled::Paid(_)) => "paid",
            Err(_) => "error",
        };
        self.metrics.reconciliations.with_label_values(&[result]).inc();
        settled
    }

    async fn ask(&self, order: OrderId) -> Result<Settled, ProviderError> {
        let order_id = order.to_string();
        let intents = timed(&self.metrics, "search", self.provider.intents_for_order(&order_id)).await?;
        let mut paid = Vec::new();
        for intent in intents {
            let intent = if intent.status.is_final() {
                intent
            } else {
                timed(&self.metrics, "cancel", self.provider.cancel(&intent.id)).await?
            };
            if intent.status != IntentStatus::Succeeded {
                continue;
            }
            // The provider's payment time; the moment it is learnt of is the
            // latest it can have been.
            let now = chrono::Utc::now().timestamp();
            match payment_received(&intent, now, PaymentSource::Reconciliation) {
                Some(payment) if payment.order_id == order => paid.push(payment),
                _ => tracing::warn!(payment_id = %intent.id, %order, "A payment found for an order names another."),
            }
        }
        Ok(if paid.is_empty() { Settled::Unpaid } else { Settled::Paid(paid) })
    }
}
