//! The order-status query API, over any [`ViewReader`].
//!
//! * `GET /api/v1/orders/{order_id}`
//! * `GET /api/v1/users/{user_id}/orders?limit=N` (newest first, N ≤ 100)
//! * `GET /api/v1/vouchers/{voucher_id}`

use std::sync::Arc;

use seckill_core::{OrderId, UserId, VoucherId};
use seckill_store::{ViewReader, MAX_PAGE};
use serde::Deserialize;
use warp::{Filter, Rejection, Reply};

use crate::ApiError;

/// Query string of the user listing.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ListQuery {
    limit: Option<usize>,
}

/// The query routes, answering from `view`.
pub fn query_routes(view: Arc<dyn ViewReader>) -> impl Filter<Extract = (impl Reply,), Error = Rejection> + Clone {
    let with_view = warp::any().map(move || Arc::clone(&view));
    let order =
        warp::path!("api" / "v1" / "orders" / String).and(warp::get()).and(with_view.clone()).and_then(get_order);
    let user_orders = warp::path!("api" / "v1" / "users" / String / "orders")
        .and(warp::get())
        .and(warp::query::<ListQuery>())
        .and(with_view.clone())
        .and_then(list_user_orders);
    let voucher = warp::path!("api" / "v1" / "vouchers" / String).and(warp::get()).and(with_view).and_then(get_voucher);
    order.or(user_orders).or(voucher)
}

async fn get_order(raw: String, view: Arc<dyn ViewReader>) -> Result<warp::reply::Json, Rejection> {
    let id: OrderId = raw.parse().map_err(|e| ApiError::invalid(format!("order_id: {e}")))?;
    match view.order(id).await.map_err(|e| ApiError::internal(&e))? {
        Some(order) => Ok(warp::reply::json(&order)),
        None => Err(ApiError::not_found(format!("order {id} is unknown")).into()),
    }
}

async fn list_user_orders(
    raw: String,
    query: ListQuery,
    view: Arc<dyn ViewReader>,
) -> Result<warp::reply::Json, Rejection> {
    let user = UserId::parse(&raw).map_err(|e| ApiError::invalid(format!("user_id: {e}")))?;
    let limit = query.limit.unwrap_or(20);
    if !(1..=MAX_PAGE).contains(&limit) {
        return Err(ApiError::invalid(format!("limit must be 1 to {MAX_PAGE}")).into());
    }
    let orders = view.user_orders(&user, limit).await.map_err(|e| ApiError::internal(&e))?;
    Ok(warp::reply::json(&serde_json::json!({ "user_id": user, "orders": orders })))
}

async fn get_voucher(raw: String, view: Arc<dyn ViewReader>) -> Result<warp::reply::Json, Rejection> {
    let id: VoucherId = raw.parse().map_err(|e| ApiError::invalid(format!("voucher_id: {e}")))?;
    match view.voucher(id).await.map_err(|e| ApiError::internal(&e))? {
        Some(voucher) => Ok(warp::reply::json(&voucher)),
        None => Err(ApiError::unknown_voucher(id).into()),
    }
}
