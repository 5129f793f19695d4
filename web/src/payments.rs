//! The payment provider as the services call it: built from the
//! `[payments]` config, every call timed under
//! `seckill_payment_provider_seconds{call}`.

use std::future::Future;
use std::time::{Duration, Instant};

use chrono::DateTime;
use seckill_core::config::PaymentsConfig;
use seckill_core::event::{PaymentReceived, PaymentSource, MAX_PROVIDER_ID_BYTES};
use seckill_core::metrics::PaymentMetrics;
use seckill_core::money::Currency;
use seckill_core::{OrderId, VoucherId};
use seckill_payments::{PaymentIntent, Provider, ProviderError, ProviderSettings};

/// The provider `config` names; None when payments are off.
pub fn provider(config: &PaymentsConfig) -> Result<Option<Provider>, ProviderError> {
    if !config.enabled() {
        return Ok(None);
    }
    let settings = ProviderSettings {
        base_url: config.base_url.clone(),
        api_key: config.api_key.expose().to_owned(),
        timeout: Duration::from_millis(config.timeout_ms),
    };
    Provider::new(settings).map(Some)
}

/// Runs one provider `call` (one of `PROVIDER_CALLS`), recording how long
/// it took.
pub async fn timed<T, E>(
    metrics: &PaymentMetrics,
    call: &'static str,
    request: impl Future<Output = Result<T, E>>,
) -> Result<T, E> {
    let started = Instant::now();
    let result = request.await;
    metrics.provider_seconds.with_label_values(&[call]).observe(started.elapsed().as_secs_f64());
    result
}

/// The record a completed payment makes, if it is for an order of this
/// platform (its metadata names the order and voucher) and money was
/// received (`amount_received`): paid when the provider's charge was made
/// (whole seconds, as providers stamp it), else at `fallback_paid_at`. Every
/// path (callback or reconciliation) reads the intent with its charge
/// expanded, so the charge's time is the one judged.
pub fn payment_received(
    intent: &PaymentIntent,
    fallback_paid_at: i64,
    source: PaymentSource,
) -> Option<PaymentReceived> {
    let order_id: OrderId = intent.order_id()?.parse().ok()?;
    let voucher_id: VoucherId = intent.voucher_id()?.parse().ok()?;
    let currency = Currency::parse(&intent.currency).ok()?;
    let paid_at = DateTime::from_timestamp(intent.paid_at().unwrap_or(fallback_paid_at), 0)?;
    // What the provider took, not what it was asked for: an order is paid
    // only by the money really received.
    if !is_provider_id(&intent.id) || intent.amount_received == 0 {
        return None;
    }
    Some(PaymentReceived {
        order_id,
        voucher_id,
        payment_id: intent.id.clone(),
        amount: intent.amount_received,
        currency,
        paid_at,
        source,
    })
}

/// Whether `id` can be a provider's id in a record: printable ASCII, 1 to
/// 255 bytes.
pub fn is_provider_id(id: &str) -> bool {
    (1..=MAX_PROVIDER_ID_BYTES).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_graphic())
}
