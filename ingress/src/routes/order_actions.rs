//! `POST /api/v1/orders/{order_id}/cancel`, `.../confirm` (claiming a free
//! order) and `.../refund` (an admin refunds a paid order).
//!
//! The ingress checks what it can answer at once from what it knows of the
//! order (unknown order, someone else's order, already final) and otherwise
//! publishes the request on the sales topic, keyed by voucher, so the
//! processor decides it in log order with every other request about it (see
//! `seckill_core::decision`). An order is known from its `202` on: a request
//! that reaches the log before the order itself (it travels through the
//! Redis outbox) waits in the processor and is decided right after it. The
//! answer is `202`; the client polls or streams the order for the result.

use std::sync::Arc;

use seckill_core::event::{CancelReason, Event, OrderRequest};
use seckill_core::{Envelope, OrderId};
use seckill_store::{OrderStatus, OrderView};
use seckill_web::ApiError;
use warp::http::StatusCode;
use warp::{Filter, Rejection, Reply};

use super::Ingress;
use crate::access::auth::Caller;
use crate::access::limits;
use crate::live::http::orders::visible_order;

/// What the client asks of the order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Action {
    Cancel,
    Confirm,
    Refund,
}

impl Action {
    fn name(self) -> &'static str {
        match self {
            Self::Cancel => "cancel",
            Self::Confirm => "confirm",
            Self::Refund => "refund",
        }
    }

    /// The error code for an order this action cannot change.
    fn refused(self) -> &'static str {
        match self {
            Self::Cancel => "not_cancellable",
            Self::Confirm => "not_confirmable",
            Self::Refund => "not_refundable",
        }
    }
}

pub(super) fn cancel(ingress: Arc<Ingress>) -> impl Filter<Extract = (impl Reply,), Error = Rejection> + Clone {
    route(ingress, "cancel", Action::Cancel)
}

pub(super) fn confirm(ingress: Arc<Ingress>) -> impl Filter<Extract = (impl Reply,), Error = Rejection> + Clone {
    route(ingress, "confirm", Action::Confirm)
}

pub(super) fn refund(ingress: Arc<Ingress>) -> impl Filter<Extract = (impl Reply,), Error = Rejection> + Clone {
    route(ingress, "refund", Action::Refund)
}

fn route(
    ingress: Arc<Ingress>,
    segment: &'static str,
    action: Action,
) -> impl Filter<Extract = (impl Reply,), Error = Rejection> + Clone {
    warp::path("api")
        .and(warp::path("v1"))
        .and(warp::path("orders"))
        .and(warp::path::param::<String>())
        .and(warp::path(segment))
        .and(warp::path::end())
        .and(warp::post())
        .and(limits::per_client_address(Arc::clone(&ingress.access)))
        .and(limits::rate_limited_caller(Arc::clone(&ingress.access)))
        .and(warp::any().map(move || Arc::clone(&ingress)))
        .and_then(move |order, caller, ingress| handle(order, caller, ingress, action))
}

async fn handle(
    raw: String,
    caller: Caller,
    ingress: Arc<Ingress>,
    action: Action,
) -> Result<warp::reply::Response, Rejection> {
    let order_id: OrderId = raw.parse().map_err(|e| ApiError::invalid(format!("order_id: {e}")))?;
    // Refused for what the caller is, whatever the order: known or not.
    if caller == Caller::Admin && action == Action::Confirm {
        return Err(ApiError::forbidden("only the owner confirms an order").into());
    }
    if caller != Caller::Admin && action == Action::Refund {
        return Err(ApiError::forbidden("only an admin refunds an order").into());
    }
    // Someone else's order is answered exactly like an unknown one.
    let (order, _) = visible_order(&ingress.live, &caller, order_id).await?;

    let request = OrderRequest {
        order_id,
        voucher_id: order.voucher_id,
        reason: None,
        // Judged against pay_by, set on the same clock by the processor.
        requested_at: seckill_core::clock::now(),
        settled_checkouts: None,
    };
    let paid_with_money = order.status == OrderStatus::Paid && order.payment_id.is_some();
    let event = match (action, order.status) {
        (Action::Cancel, OrderStatus::Cancelled | OrderStatus::Refunded)
        | (Action::Confirm, OrderStatus::Paid)
        | (Action::Refund, OrderStatus::Refunded) => {
            return Ok(reply(StatusCode::OK, &order, None));
        }
        (Action::Confirm, OrderStatus::Pending | OrderStatus::Created) if order.amount > 0 => {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                "payment_required",
                format!(
                    "order {order_id} costs {} {}: pay it with POST /api/v1/orders/{order_id}/payment",
                    order.amount,
                    order.currency.map(|c| c.to_string()).unwrap_or_default()
                ),
            )
            .into());
        }
        (Action::Cancel, OrderStatus::Paid) if paid_with_money => {
            return Err(refused(order_id, &order, Action::Cancel, "a paid order is refunded by an admin"));
        }
        (_, OrderStatus::Failed)
        | (Action::Confirm, OrderStatus::Cancelled | OrderStatus::Refunded)
        | (Action::Refund, OrderStatus::Pending | OrderStatus::Created | OrderStatus::Cancelled) => {
            let only = match action {
                Action::Refund => "only paid orders are refunded",
                _ => "only pending or created orders can be changed",
            };
            return Err(refused(order_id, &order, action, only));
        }
        (Action::Cancel, _) => {
            Event::CancelRequested(OrderRequest { reason: Some(CancelReason::Requested), ..request })
        }
        (Action::Refund, _) => Event::CancelRequested(OrderRequest { reason: Some(CancelReason::Refunded), ..request }),
        (Action::Confirm, _) => Event::ConfirmRequested(request),
    };
    ingress.producer.send(&ingress.topics.sales, &Envelope::new(event)).await.map_err(|e| {
        ingress.metrics.produce_errors.inc();
        tracing::warn!(error = %e, %order_id, action = action.name(), "Order request not published.");
        // A produce that timed out may still be written (or still queued
        // in the client): the request can take effect after this answer.
        // Asking again is safe, a second request of a kind only repeats
        // the first's outcome.
        ApiError::unavailable(
            "the event log did not confirm the request; it may still take effect: ask again (a repeated request \
             changes nothing more)",
        )
    })?;
    Ok(reply(StatusCode::ACCEPTED, &order, Some(action)))
}

/// `409` with the order's status: `action` cannot change it.
fn refused(order_id: OrderId, order: &OrderView, action: Action, why: &str) -> Rejection {
    let status = serde_json::to_value(order.status).unwrap_or_default();
    ApiError::new(
        StatusCode::CONFLICT,
        action.refused(),
        format!("order {order_id} is {}; {why}", status.as_str().unwrap_or("final")),
    )
    .with_detail("status", status)
    .into()
}

/// `{"order_id", "status", "requested"?}`: the status as the view shows it
/// now, and the request made, if any.
fn reply(code: StatusCode, order: &OrderView, requested: Option<Action>) -> warp::reply::Response {
    let mut body = serde_json::json!({ "order_id": order.order_id, "status": order.status });
    if let Some(action) = requested {
        body["requested"] = action.name().into();
    }
    warp::reply::with_status(warp::reply::json(&body), code).into_response()
}
