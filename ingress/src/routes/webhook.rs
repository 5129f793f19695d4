//! `POST /api/v1/payments/webhook`: the payment provider's callbacks.
//!
//! A callback is authenticated by the provider's signature
//! (`Stripe-Signature: t=…,v1=…`, HMAC-SHA256 over `t.body` with a webhook
//! secret, compared in constant time; timestamps more than the tolerance
//! away refused) before anything in it is read; a refused one is `400` and
//! changes nothing. A completed payment (`payment_intent.succeeded`)
//! becomes a `PaymentReceived` record on the sales topic, keyed by voucher,
//! so the processor decides it in log order with the order's other
//! requests; whether it pays the order or is refunded is its decision, by
//! the provider's payment time against the order's `pay_by`.
//!
//! The answer is `2xx` only once the record is in the log: a provider
//! retries anything else, so a callback the log could not take is not lost.
//! A callback handled before (by provider event id) is answered at once.

use std::sync::Arc;

use bytes::Bytes;
use chrono::Utc;
use seckill_core::event::{Event, PaymentReceived, PaymentSource, MAX_EVENT_BYTES};
use seckill_core::Envelope;
use seckill_payments::signature;
use seckill_web::payments::{is_provider_id, payment_received};
use seckill_web::ApiError;
use warp::http::StatusCode;
use warp::{Filter, Rejection, Reply};

use super::{body, Ingress};
use crate::payments::Payments;

/// The callback that reports a completed payment.
const SUCCEEDED: &str = "payment_intent.succeeded";

pub(super) fn receive(ingress: Arc<Ingress>) -> impl Filter<Extract = (impl Reply,), Error = Rejection> + Clone {
    warp::path!("api" / "v1" / "payments" / "webhook")
        .and(warp::post())
        .and(warp::header::optional::<String>("stripe-signature"))
        // A callback is one small event: bounded like a log record.
        .and(body::bounded(MAX_EVENT_BYTES as u64))
        .and(warp::any().map(move || Arc::clone(&ingress)))
        .and_then(handle)
}

async fn handle(
    signature: Option<String>,
    raw: Bytes,
    ingress: Arc<Ingress>,
) -> Result<warp::reply::Response, Rejection> {
    let Some(payments) = &ingress.payments else {
        return Err(ApiError::unavailable("payments are not configured on this platform").into());
    };
    let outcome = |outcome: &str| payments.metrics.webhooks.with_label_values(&[outcome]).inc();
    let now = Utc::now().timestamp();
    let verified = signature::verify(
        signature.as_deref().unwrap_or(""),
        &raw,
        &payments.webhook_secrets,
        now,
        payments.tolerance_seconds,
    );
    if let Err(error) = verified {
        outcome("rejected");
        payments.metrics.webhook_rejections.with_label_values(&[error.reason()]).inc();
        return Err(ApiError::new(StatusCode::BAD_REQUEST, "invalid_signature", error.to_string())
            .with_detail("reason", error.reason())
            .into());
    }
    let event: seckill_payments::Event = serde_json::from_slice(&raw).map_err(|e| {
        outcome("rejected");
        payments.metrics.webhook_rejections.with_label_values(&["body"]).inc();
        ApiError::new(StatusCode::BAD_REQUEST, "invalid_event", format!("not a provider event: {e}"))
    })?;
    if !is_provider_id(&event.id) {
        outcome("rejected");
        payments.metrics.webhook_rejections.with_label_values(&["body"]).inc();
        return Err(ApiError::new(StatusCode::BAD_REQUEST, "invalid_event", "the event id is not a provider id").into());
    }
    // A failed check only costs a second record, which the processor
    // recognises by its payment id.
    if ingress.gate.webhook_handled(&event.id).await.unwrap_or(false) {
        outcome("duplicate");
        return Ok(received(&event.id, Some("duplicate")));
    }
    if event.kind != SUCCEEDED {
        outcome("ignored");
        return Ok(received(&event.id, Some("not a completed payment")));
    }
    let intent = event.payment_intent().map_err(|e| {
        outcome("rejected");
        payments.metrics.webhook_rejections.with_label_values(&["body"]).inc();
        ApiError::new(StatusCode::BAD_REQUEST, "invalid_event", format!("not a payment: {e}"))
    })?;
    let Some(payment) = payment_received(&intent, event.created, PaymentSource::Webhook) else {
        // Not one of ours (no order of this platform in its metadata): a
        // provider account may serve other systems too.
        outcome("ignored");
        tracing::warn!(payment_id = %intent.id, "A completed payment names no order of this platform; ignored.");
        return Ok(received(&event.id, Some("names no order of this platform")));
    };
    publish(&ingress, payments, payment).await?;
    outcome("accepted");
    if let Err(error) = ingress.gate.mark_webhook_handled(&event.id).await {
        tracing::debug!(%error, "Could not remember a handled callback; a repeat will be published again.");
    }
    Ok(received(&event.id, None))
}

async fn publish(ingress: &Ingress, payments: &Payments, payment: PaymentReceived) -> Result<(), Rejection> {
    let (order_id, payment_id) = (payment.order_id, payment.payment_id.clone());
    let record = Envelope::new(Event::PaymentReceived(payment));
    ingress.producer.send(&ingress.topics.sales, &record).await.map_err(|error| {
        ingress.metrics.produce_errors.inc();
        payments.metrics.webhooks.with_label_values(&["rejected"]).inc();
        tracing::warn!(%error, %order_id, %payment_id, "A payment callback could not be logged; the provider will retry.");
        Rejection::from(ApiError::unavailable("the event log is unavailable; deliver the event again"))
    })?;
    Ok(())
}

/// `200 {"received": true, "event_id", "ignored"?}`.
fn received(event_id: &str, ignored: Option<&str>) -> warp::reply::Response {
    let mut body = serde_json::json!({ "received": true, "event_id": event_id });
    if let Some(why) = ignored {
        body["ignored"] = why.into();
    }
    warp::reply::json(&body).into_response()
}
