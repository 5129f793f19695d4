//! What the ingress's payment routes share: the provider, the webhook
//! secrets and the metrics (`routes::payment` creates payments,
//! `routes::webhook` takes the provider's callbacks).

use std::sync::Arc;
use std::time::Duration;

use seckill_core::config::PaymentsConfig;
use seckill_core::metrics::PaymentMetrics;
use seckill_core::{OrderId, VoucherId};
use seckill_payments::Provider;
use seckill_store::ViewReader;

/// The payment provider, as the ingress talks to it.
#[derive(Debug)]
pub(crate) struct Payments {
    pub(crate) provider: Provider,
    /// Secrets a callback may be signed with (a rotation lists two).
    pub(crate) webhook_secrets: Vec<String>,
    pub(crate) tolerance_seconds: i64,
    /// Longest a callback waits for its answer (read back and logged).
    pub(crate) answer_within: Duration,
    /// Where checkout returns to, with `{order_id}` and `{voucher_id}` to
    /// fill in.
    return_url: String,
    pub(crate) metrics: PaymentMetrics,
    /// Where a voucher's title (the checkout's line item) is read.
    pub(crate) view: Arc<dyn ViewReader>,
}

impl Payments {
    /// The ingress's payments; None when `config` turns them off.
    pub(crate) fn new(
        config: &PaymentsConfig,
        metrics: PaymentMetrics,
        view: Arc<dyn ViewReader>,
    ) -> Result<Option<Self>, seckill_payments::ProviderError> {
        Ok(seckill_web::payments::provider(config)?.map(|provider| Self {
            provider,
            webhook_secrets: config.webhook_secrets.iter().map(|secret| secret.expose().to_owned()).collect(),
            tolerance_seconds: config.webhook_tolerance_seconds,
            answer_within: Duration::from_millis(config.webhook_answer_ms),
            return_url: config.return_url.clone(),
            metrics,
            view,
        }))
    }

    /// Where the buyer of `order` (of `voucher`) returns after checkout.
    pub(crate) fn return_url(&self, order: OrderId, voucher: VoucherId) -> String {
        self.return_url.replace("{order_id}", &order.to_string()).replace("{voucher_id}", &voucher.to_string())
    }
}
