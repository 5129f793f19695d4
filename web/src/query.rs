//! The order-status query API, over any [`ViewReader`].
//!
//! * `GET /api/v1/orders/{order_id}`
//! * `GET /api/v1/users/{user_id}/orders?limit=N` (newest first, N ≤ 100)
//! * `GET /api/v1/vouchers/{voucher_id}`
//! * `GET /api/v1/vouchers?limit=N&before=ID` (newest first, N ≤ 100; pass
//!   the response's `next` as `before` for the following page)

use std::sync::Arc;

use seckill_core::{OrderId, UserId, VoucherId};
use seckill_store::{ViewReader, MAX_PAGE};
use serde::Deserialize;
use warp::{Filter, Rejection, Reply};

use crate::ApiError;

/// Query string of the user listing.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    /// Page size, 1 to [`MAX_PAGE`]; 20 when absent.
    pub limit: Option<usize>,
}

/// Query string of the voucher listing.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct VoucherListQuery {
    limit: Option<usize>,
    before: Option<String>,
}

const DEFAULT_PAGE: usize = 20;

/// The page size asked for, checked.
pub fn page_limit(requested: Option<usize>) -> Result<usize, ApiError> {
    let limit = requested.unwrap_or(DEFAULT_PAGE);
    if !(1..=MAX_PAGE).contains(&limit) {
        return Err(ApiError::invalid(format!("limit must be 1 to {MAX_PAGE}")));
    }
    Ok(limit)
}

/// Every query route, answering from `view` to anyone: the projector's
/// internal API, which the ingresses read through
/// [`RemoteView`](crate::RemoteView).
pub fn query_routes(view: Arc<dyn ViewReader>) -> impl Filter<Extract = (impl Reply,), Error = Rejection> + Clone {
    let with_view = warp::any().map({
        let view = Arc::clone(&view);
        move || Arc::clone(&view)
    });
    let order =
        warp::path!("api" / "v1" / "orders" / String).and(warp::get()).and(with_view.clone()).and_then(get_order);
    let user_orders = warp::path!("api" / "v1" / "users" / String / "orders")
        .and(warp::get())
        .and(warp::query::<ListQuery>())
        .and(with_view)
        .and_then(list_user_orders);
    order.or(user_orders).or(voucher_routes(view))
}

/// The voucher routes, public on the ingress: a sale's stock and counters
/// are what every buyer watches.
pub fn voucher_routes(view: Arc<dyn ViewReader>) -> impl Filter<Extract = (impl Reply,), Error = Rejection> + Clone {
    let with_view = warp::any().map(move || Arc::clone(&view));
    let voucher =
        warp::path!("api" / "v1" / "vouchers" / String).and(warp::get()).and(with_view.clone()).and_then(get_voucher);
    let vouchers = warp::path!("api" / "v1" / "vouchers")
        .and(warp::get())
        .and(warp::query::<VoucherListQuery>())
        .and(with_view)
        .and_then(list_vouchers);
    voucher.or(vouchers)
}

async fn get_order(raw: String, view: Arc<dyn ViewReader>) -> Result<warp::reply::Json, Rejection> {
    let id: OrderId = raw.parse().map_err(|e| ApiError::invalid(format!("order_id: {e}")))?;
    match view.order(id).await.map_err(|e| ApiError::view_failed(&e))? {
        Some(order) => Ok(warp::reply::json(&order)),
        None => Err(ApiError::unknown_order(id).into()),
    }
}

async fn list_user_orders(
    raw: String,
    query: ListQuery,
    view: Arc<dyn ViewReader>,
) -> Result<warp::reply::Json, Rejection> {
    let user = UserId::parse(&raw).map_err(|e| ApiError::invalid(format!("user_id: {e}")))?;
    let limit = page_limit(query.limit)?;
    let orders = view.user_orders(&user, limit).await.map_err(|e| ApiError::view_failed(&e))?;
    Ok(warp::reply::json(&serde_json::json!({ "user_id": user, "orders": orders })))
}

async fn get_voucher(raw: String, view: Arc<dyn ViewReader>) -> Result<warp::reply::Json, Rejection> {
    let id: VoucherId = raw.parse().map_err(|e| ApiError::invalid(format!("voucher_id: {e}")))?;
    match view.voucher(id).await.map_err(|e| ApiError::view_failed(&e))? {
        Some(voucher) => Ok(warp::reply::json(&voucher)),
        None => Err(ApiError::unknown_voucher(id).into()),
    }
}

async fn list_vouchers(query: VoucherListQuery, view: Arc<dyn ViewReader>) -> Result<warp::reply::Json, Rejection> {
    let limit = page_limit(query.limit)?;
    let before = match &query.before {
        Some(raw) => Some(raw.parse::<VoucherId>().map_err(|e| ApiError::invalid(format!("before: {e}")))?),
        None => None,
    };
    let vouchers = view.vouchers(before, limit).await.map_err(|e| ApiError::view_failed(&e))?;
    let next = if vouchers.len() == limit { vouchers.last().map(|v| v.voucher_id) } else { None };
    Ok(warp::reply::json(&serde_json::json!({ "vouchers": vouchers, "next": next })))
}
