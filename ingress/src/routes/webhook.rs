//! `POST /api/v1/payments/webhook`: the payment provider's callbacks.
//!
//! A callback is authenticated by the provider's signature
//! (`Stripe-Signature: t=…,v1=…`, HMAC-SHA256 over `t.body` with a webhook
//! secret, compared in constant time; timestamps more than the tolerance
//! away refused) before anything in it is read; a refused one is `400` and
//! changes nothing. A paid checkout (`checkout.session.completed` whose
//! `payment_status` is `paid`, or `checkout.session.async_payment_succeeded`
//! once a bank debit settled) becomes a `PaymentReceived` record on the
//! sales topic, keyed by voucher, so the processor decides it in log order
//! with the order's other requests; whether it pays the order or is
//! refunded is its decision, by the charge's time against the order's
//! `pay_by`. The session is read back from the provider with its intent
//! and charge, so the amount is what was received and the time the
//! charge's, the same on every path (callback or reconciliation), and a
//! callback naming a session the provider does not have changes nothing.
//!
//! An event of the other mode than the key's (`livemode`), of a session
//! that is not the platform's, or of a type the platform does not act on
//! is answered `200` (a provider retries anything else), counted and
//! logged, and changes nothing.
//!
//! The answer is `2xx` only once the record is in the log: a provider
//! retries anything else, so a callback the log could not take is not lost.
//! A callback handled before (by provider event id) is answered at once.

use std::sync::Arc;

use bytes::Bytes;
use chrono::Utc;
use seckill_core::event::{Event, PaymentReceived, PaymentSource, MAX_EVENT_BYTES};
use seckill_core::Envelope;
use seckill_payments::{events, signature, CheckoutSession, SessionPaymentStatus};
use seckill_web::payments::{is_provider_id, payment_received, timed};
use seckill_web::ApiError;
use warp::http::StatusCode;
use warp::{Filter, Rejection, Reply};

use super::{body, Ingress};
use crate::payments::Payments;

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
    if event.livemode != payments.provider.livemode() {
        outcome("ignored");
        tracing::warn!(event_id = %event.id, livemode = event.livemode, "A callback of the other mode than the key's; ignored.");
        return Ok(received(&event.id, Some("not of this key's mode (livemode)")));
    }
    let pays = [events::CHECKOUT_COMPLETED, events::CHECKOUT_ASYNC_SUCCEEDED].contains(&event.kind.as_str());
    if !pays && events::SUBSCRIBED.contains(&event.kind.as_str()) {
        outcome("ignored");
        return Ok(received(&event.id, Some("nothing to record")));
    }
    if !pays {
        outcome("ignored");
        tracing::debug!(kind = %event.kind, "A callback of a type the platform does not use; ignored.");
        return Ok(received(&event.id, Some("not a payment event of this platform")));
    }
    let session = event.checkout_session().map_err(|e| {
        outcome("rejected");
        payments.metrics.webhook_rejections.with_label_values(&["body"]).inc();
        ApiError::new(StatusCode::BAD_REQUEST, "invalid_event", format!("not a checkout session: {e}"))
    })?;
    if session.payment_status != SessionPaymentStatus::Paid {
        // A debit still settling: `async_payment_succeeded` follows.
        outcome("ignored");
        return Ok(received(&event.id, Some("payment not settled yet")));
    }
    // Bounded as a whole: a broker that is down can hold a produce past
    // its own timeout, and a provider that stops waiting first would drop
    // the connection, so the ingress would never have answered at all.
    let logged = tokio::time::timeout(payments.answer_within, read_back_and_log(&ingress, payments, &session, event.created))
        .await
        .unwrap_or_else(|_| {
            // Either step may have been the slow one (the provider's read or
            // the produce), so no produce error is counted here: the
            // callback's `rejected` is.
            tracing::warn!(session = %session.id, within = ?payments.answer_within, "A payment callback could not be logged in time; the provider will retry.");
            Err(unlogged())
        });
    let logged = logged.inspect_err(|_| outcome("rejected"))?;
    if !logged {
        // Not one of ours (no order of this platform): a provider account
        // may serve other systems too; or unknown to the provider.
        outcome("ignored");
        tracing::warn!(session = %session.id, "A paid checkout names no payment of this platform; ignored.");
        return Ok(received(&event.id, Some("names no order of this platform")));
    }
    outcome("accepted");
    if let Err(error) = ingress.gate.mark_webhook_handled(&event.id).await {
        tracing::debug!(%error, "Could not remember a handled callback; a repeat will be published again.");
    }
    Ok(received(&event.id, None))
}

/// The payment a paid session made, read back from the provider (its
/// intent and charge); None when it is not the platform's or the provider
/// does not know it; a provider that cannot answer is `503`, so the
/// provider delivers the callback again.
async fn paid(
    payments: &Payments,
    session: &CheckoutSession,
    event_time: i64,
) -> Result<Option<PaymentReceived>, Rejection> {
    if session.order_id().is_none() || !is_provider_id(&session.id) {
        return Ok(None);
    }
    let read = timed(&payments.metrics, "retrieve", payments.provider.retrieve_checkout(&session.id)).await;
    let session = match read {
        Ok(session) => session,
        Err(error) if error.status() == Some(404) => return Ok(None),
        Err(error) => {
            tracing::warn!(%error, session = %session.id, "Could not read a paid checkout back; the provider will retry.");
            return Err(
                ApiError::unavailable("the payment provider could not be asked; deliver the event again").into()
            );
        }
    };
    let Some(intent) = session.expanded_intent() else { return Ok(None) };
    Ok(payment_received(intent, event_time, PaymentSource::Webhook))
}

/// Reads the paid session back and logs its payment: false when it names
/// no payment of this platform.
async fn read_back_and_log(
    ingress: &Ingress,
    payments: &Payments,
    session: &CheckoutSession,
    event_time: i64,
) -> Result<bool, Rejection> {
    let Some(payment) = paid(payments, session, event_time).await? else { return Ok(false) };
    publish(ingress, payment).await?;
    Ok(true)
}

async fn publish(ingress: &Ingress, payment: PaymentReceived) -> Result<(), Rejection> {
    let (order_id, payment_id) = (payment.order_id, payment.payment_id.clone());
    let record = Envelope::new(Event::PaymentReceived(payment));
    ingress.producer.send(&ingress.topics.sales, &record).await.map_err(|error| {
        ingress.metrics.produce_errors.inc();
        tracing::warn!(%error, %order_id, %payment_id, "A payment callback could not be logged; the provider will retry.");
        unlogged()
    })?;
    Ok(())
}

/// `503`: the callback is not in the log, so the provider must deliver it
/// again.
fn unlogged() -> Rejection {
    Rejection::from(ApiError::unavailable("the event log is unavailable; deliver the event again"))
}

/// `200 {"received": true, "event_id", "ignored"?}`.
fn received(event_id: &str, ignored: Option<&str>) -> warp::reply::Response {
    let mut body = serde_json::json!({ "received": true, "event_id": event_id });
    if let Some(why) = ignored {
        body["ignored"] = why.into();
    }
    warp::reply::json(&body).into_response()
}
