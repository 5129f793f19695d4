//! `POST /api/v1/orders/{order_id}/payment`: the owner of a created, priced
//! order asks to pay it. The provider creates one payment per order (the
//! order id is the idempotency key, so asking again returns the same
//! payment) and the answer carries where to pay it (`checkout_url`).
//!
//! Nothing is published here: the order is paid when the provider's signed
//! callback says so (`routes::webhook`), decided by the processor against
//! the order's `pay_by`.

use std::sync::Arc;

use chrono::Utc;
use seckill_core::OrderId;
use seckill_payments::{IntentStatus, NewIntent};
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
    if order.pay_by.is_some_and(|pay_by| Utc::now() >= pay_by) {
        return Err(conflict("payment_window_closed", format!("order {order_id} had to be paid by its pay_by")));
    }

    let request = NewIntent {
        amount: order.amount,
        currency: currency.lowercase(),
        order_id: order_id.to_string(),
        voucher_id: order.voucher_id.to_string(),
        return_url: payments.return_url(order_id, order.voucher_id),
    };
    let created = seckill_web::payments::timed(
        &payments.metrics,
        "create",
        payments.provider.create_intent(&request, &format!("order-{order_id}")),
    )
    .await;
    let intent = match created {
        Ok(intent) => intent,
        Err(error) => {
            payments.metrics.payments_created.with_label_values(&["provider_error"]).inc();
            tracing::warn!(%error, %order_id, "The payment provider did not create a payment.");
            return Err(ApiError::new(
                StatusCode::BAD_GATEWAY,
                "provider_unavailable",
                "the payment provider did not answer; nothing was charged, try again",
            )
            .into());
        }
    };
    if intent.status == IntentStatus::Canceled {
        // Closed by the expiry sweeper: it can no longer be paid.
        return Err(conflict("payment_window_closed", format!("order {order_id}'s payment was closed unpaid")));
    }
    payments.metrics.payments_created.with_label_values(&["created"]).inc();
    let body = serde_json::json!({
        "order_id": order_id,
        "payment_id": intent.id,
        "checkout_url": intent.checkout_url(),
        "amount": order.amount,
        "currency": currency,
        "pay_by": order.pay_by,
        "status": intent.status.as_str(),
    });
    Ok(warp::reply::json(&body).into_response())
}
