//! `POST /api/v1/orders/{order_id}/payment`: the owner of a created, priced
//! order asks to pay it. The platform opens a hosted checkout at the
//! provider (a Stripe Checkout Session: the voucher's title, unit price,
//! currency and the order's quantity, the order named in its reference and
//! metadata) and answers where to pay (`checkout_url`). The order id is
//! the idempotency key, so asking again returns the same session.
//!
//! The session is recorded in the log (`CheckoutOpened` on the sales
//! topic) before the answer, so the processor closes it when the order
//! closes and reconciles it by id at `pay_by`. Stripe lets a session live
//! 30 minutes to 24 hours: a shorter payment window is closed by the
//! platform expiring the session at `pay_by`; a longer one gets a new
//! session once the last expired by itself.
//!
//! Nothing is paid here: the order is paid when the provider's signed
//! callback says so (`routes::webhook`), decided by the processor against
//! the order's `pay_by` by the charge's time.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use seckill_core::decision::MAX_CHECKOUTS;
use seckill_core::event::{CheckoutOpened, Event};
use seckill_core::{Envelope, OrderId};
use seckill_payments::{
    CheckoutSession, NewCheckout, SessionStatus, MAX_AMOUNT, MAX_SESSION_SECONDS, MIN_SESSION_SECONDS,
};
use seckill_store::OrderStatus;
use seckill_web::ApiError;
use warp::http::StatusCode;
use warp::{Filter, Rejection, Reply};

use super::Ingress;
use crate::access::auth::Caller;
use crate::access::limits;
use crate::live::http::orders::visible_order;

pub(super) fn create(ingress: Arc<Ingress>) -> impl Filter<Extract = (impl Reply,), Error = Rejection> + Clone {
    warp::path!("api" / "v1" / "orders" / String / "payment")
        .and(warp::post())
        .and(limits::per_client_address(Arc::clone(&ingress.access)))
        .and(limits::rate_limited_caller(Arc::clone(&ingress.access)))
        .and(warp::any().map(move || Arc::clone(&ingress)))
        .and_then(handle)
}

async fn handle(raw: String, caller: Caller, ingress: Arc<Ingress>) -> Result<warp::reply::Response, Rejection> {
    let order_id: OrderId = raw.parse().map_err(|e| ApiError::invalid(format!("order_id: {e}")))?;
    if caller == Caller::Admin {
        return Err(ApiError::forbidden("only the owner pays an order").into());
    }
    let Some(payments) = &ingress.payments else {
        return Err(ApiError::unavailable("payments are not configured on this platform").into());
    };
    let (order, _) = visible_order(&ingress.live, &caller, order_id).await?;
    let status = serde_json::to_value(order.status).unwrap_or_default();
    let conflict = |code: &'static str, message: String| -> Rejection {
        ApiError::new(StatusCode::CONFLICT, code, message).with_detail("status", status.clone()).into()
    };
    match order.status {
        OrderStatus::Created => {}
        OrderStatus::Paid => return Err(conflict("already_paid", format!("order {order_id} is paid"))),
        OrderStatus::Pending => {
            return Err(conflict("not_payable", format!("order {order_id} is PENDING; pay it once it is CREATED")))
        }
        _ => {
            let now = status.as_str().unwrap_or("final").to_owned();
            return Err(conflict("not_payable", format!("order {order_id} is {now}; only created orders are paid")));
        }
    }
    let Some(currency) = order.currency.filter(|_| order.amount > 0) else {
        return Err(conflict(
            "nothing_to_pay",
            format!("order {order_id} is free: claim it with POST /api/v1/orders/{order_id}/confirm"),
        ));
    };
    // pay_by is on the platform's clock (seckill_core::clock), as is the
    // processor's expiry of the hold.
    if order.pay_by.is_some_and(|pay_by| seckill_core::clock::now() >= pay_by) {
        return Err(conflict("payment_window_closed", format!("order {order_id} had to be paid by its pay_by")));
    }

    if order.amount > MAX_AMOUNT {
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "amount_too_large",
            format!("order {order_id} owes more than the payment provider accepts in one payment ({MAX_AMOUNT} minor units)"),
        )
        .into());
    }
    let title = match payments.view.voucher(order.voucher_id).await {
        Ok(Some(voucher)) => voucher.title,
        _ => None,
    };
    let now = seckill_core::clock::now();
    let quantity = order.quantity.max(1);
    let request = NewCheckout {
        unit_amount: order.amount / u64::from(quantity),
        quantity,
        currency: currency.lowercase(),
        title: title.unwrap_or_else(|| format!("Voucher {}", order.voucher_id)),
        order_id: order_id.to_string(),
        voucher_id: order.voucher_id.to_string(),
        success_url: payments.return_url(order_id, order.voucher_id),
        cancel_url: payments.return_url(order_id, order.voucher_id),
        expires_at: session_expiry(now, order.pay_by),
    };
    let session = match open_checkout(payments, &request, order_id, now).await {
        Ok(session) => session,
        Err(error) => {
            payments.metrics.payments_created.with_label_values(&["provider_error"]).inc();
            tracing::warn!(%error, %order_id, "The payment provider did not open a checkout.");
            return Err(ApiError::new(
                StatusCode::BAD_GATEWAY,
                "provider_unavailable",
                "the payment provider did not answer; nothing was charged, try again",
            )
            .into());
        }
    };
    match session.status {
        SessionStatus::Expired => {
            return Err(conflict("payment_window_closed", format!("order {order_id}'s checkout was closed unpaid")))
        }
        SessionStatus::Complete => {
            // Paid (or a debit settling): the order follows once the
            // provider's callback is decided.
            return Err(conflict(
                "payment_in_progress",
                format!("order {order_id}'s checkout is complete; its payment is being recorded"),
            ));
        }
        SessionStatus::Open | SessionStatus::Unknown => {}
    }
    // Recorded before the buyer can pay on it: the processor closes it
    // with the order and reconciles it by id.
    let opened = CheckoutOpened {
        order_id,
        voucher_id: order.voucher_id,
        session_id: session.id.clone(),
        opened_at: DateTime::from_timestamp(session.created, 0).unwrap_or(now),
        expires_at: DateTime::from_timestamp(session.expires_at, 0).unwrap_or(now),
    };
    let record = Envelope::new(Event::CheckoutOpened(opened));
    if let Err(error) = ingress.producer.send(&ingress.topics.sales, &record).await {
        ingress.metrics.produce_errors.inc();
        tracing::warn!(%error, %order_id, "A checkout could not be recorded in the log; not handed out.");
        return Err(ApiError::unavailable("the event log is unavailable; nothing was charged, try again").into());
    }
    payments.metrics.payments_created.with_label_values(&["created"]).inc();
    let body = serde_json::json!({
        "order_id": order_id,
        "payment_id": session.id,
        "checkout_url": session.url,
        "amount": order.amount,
        "currency": currency,
        "pay_by": order.pay_by,
        "checkout_expires_at": opened_expiry(&session),
        "status": session.status.as_str(),
    });
    Ok(warp::reply::json(&body).into_response())
}

/// When the provider should expire the session by itself: at `pay_by`
/// where Stripe allows it (30 minutes to 24 hours after now, a minute
/// inside each bound for clocks that differ). A shorter window is closed by
/// the platform at `pay_by`, and its session is told `pay_by` + 31 minutes.
/// The value depends on the order, not on the second it is asked (a window
/// over a day: on the hour): a repeated request under the order's
/// idempotency key must send the same parameters, or the provider refuses
/// it (`idempotency_key_in_use`), as it did to a buyer asking twice a
/// second apart while the view had not yet recorded the first session.
fn session_expiry(now: DateTime<Utc>, pay_by: Option<DateTime<Utc>>) -> i64 {
    let soonest = now.timestamp() + MIN_SESSION_SECONDS + 60;
    let latest = now.timestamp() + MAX_SESSION_SECONDS - 60;
    let latest_on_the_hour = latest - latest.rem_euclid(3_600);
    let wanted = match pay_by.map(|pay_by| pay_by.timestamp()) {
        Some(pay_by) if pay_by < soonest => pay_by + MIN_SESSION_SECONDS + 60,
        Some(pay_by) => pay_by.min(latest_on_the_hour),
        None => latest_on_the_hour,
    };
    wanted.clamp(soonest, latest)
}

/// The order's checkout: the live one the log recorded (the view's
/// `checkout_id`), else the one its idempotency key opens, or, when that
/// one expired by itself (a payment window longer than a session may
/// live), the next in a chain of keys each named after the expired one, so
/// concurrent requests still agree on one session and a second is opened
/// only once the first can no longer be paid.
async fn open_checkout(
    payments: &crate::payments::Payments,
    request: &NewCheckout,
    order_id: OrderId,
    now: DateTime<Utc>,
) -> Result<CheckoutSession, seckill_payments::ProviderError> {
    let create = |key: String| {
        retried(move || {
            let key = key.clone();
            async move {
                seckill_web::payments::timed(
                    &payments.metrics,
                    "create",
                    payments.provider.create_checkout(request, &key),
                )
                .await
            }
        })
    };
    let lapsed = |session: &CheckoutSession| session.expires_at <= now.timestamp();
    // The platform's own record first: the provider forgets idempotency
    // keys after a day, the log does not.
    let recorded = match payments.view.order(order_id).await {
        Ok(Some(row)) => row.checkout_id.zip(row.checkout_expires_at),
        _ => None,
    };
    let mut session = match recorded {
        Some((id, expires_at)) if expires_at.timestamp() > now.timestamp() => {
            let retrieve = || {
                seckill_web::payments::timed(&payments.metrics, "retrieve", payments.provider.retrieve_checkout(&id))
            };
            return retried(retrieve).await;
        }
        Some((id, _)) => create(format!("checkout-{order_id}-after-{id}")).await?,
        None => create(format!("checkout-{order_id}")).await?,
    };
    for _ in 1..MAX_CHECKOUTS {
        if !lapsed(&session) {
            return Ok(session);
        }
        session = create(format!("checkout-{order_id}-after-{}", session.id)).await?;
    }
    if lapsed(&session) {
        // Every session the chain allows has lapsed: nothing payable left.
        session.status = SessionStatus::Expired;
    }
    Ok(session)
}

/// Retries after a failed call that may succeed when asked again.
const CALL_RETRIES: u32 = 2;
/// The first pause before a retry; it triples after each.
const FIRST_RETRY_PAUSE: Duration = Duration::from_millis(100);

/// `call`, asked again up to [`CALL_RETRIES`] times while it fails in a way
/// a retry can change (a timeout, a `5xx`, a `429`, a key's lock), as
/// Stripe's own libraries do: the idempotency key makes a retry of a
/// creation that did succeed return the same session. A buyer is answered
/// `502` only when the provider stays unavailable for the whole round.
async fn retried<T, F, Fut>(mut call: F) -> Result<T, seckill_payments::ProviderError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, seckill_payments::ProviderError>>,
{
    let mut pause = FIRST_RETRY_PAUSE;
    for _ in 0..CALL_RETRIES {
        match call().await {
            Err(error) if error.is_retryable() => {
                tracing::debug!(%error, ?pause, "A provider call failed; asking again.");
                tokio::time::sleep(pause).await;
                pause *= 3;
            }
            answer => return answer,
        }
    }
    call().await
}

/// When the provider expires the session, as RFC 3339.
fn opened_expiry(session: &CheckoutSession) -> Option<DateTime<Utc>> {
    DateTime::from_timestamp(session.expires_at, 0)
}

#[cfg(test)]
mod tests {
    use chrono::Duration;

    use super::*;

    #[test]
    fn a_session_expires_at_the_same_time_however_often_it_is_asked_for() {
        let now = Utc::now();
        for (window, what) in [(6, "a short window"), (3_600, "an hour"), (3 * 86_400, "three days")] {
            let pay_by = Some(now + Duration::seconds(window));
            let first = session_expiry(now, pay_by);
            let again = session_expiry(now + Duration::seconds(1), pay_by);
            let later = session_expiry(now + Duration::seconds(3), pay_by);
            let hourly = window > 86_400;
            assert!(hourly || (first == again && again == later), "{what}: {first} {again} {later}");
            for (asked, at) in [(now, first), (now + Duration::seconds(1), again)] {
                assert!(at >= asked.timestamp() + MIN_SESSION_SECONDS, "{what}: Stripe's soonest");
                assert!(at <= asked.timestamp() + MAX_SESSION_SECONDS, "{what}: Stripe's latest");
            }
        }
        let short = now + Duration::seconds(6);
        assert_eq!(session_expiry(now, Some(short)), short.timestamp() + MIN_SESSION_SECONDS + 60);
        let hour = now + Duration::seconds(3_600);
        assert_eq!(session_expiry(now, Some(hour)), hour.timestamp(), "a window Stripe allows ends at pay_by");
    }
}
