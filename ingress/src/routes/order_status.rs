//! `GET /api/v1/orders/{order_id}` and `GET /api/v1/users/{user_id}/orders`:
//! what clients poll after their `202`.
//!
//! A user sees their own orders only; someone else's order is answered
//! exactly like an unknown one (`404`), so order ids cannot be probed. The
//! admin token sees every order.

use std::sync::Arc;

use seckill_core::{OrderId, UserId};
use seckill_store::OrderView;
use seckill_web::{page_limit, ApiError, ListQuery};
use warp::{Filter, Rejection, Reply};

use super::auth::{self, Caller};
use super::Ingress;

pub(super) fn order(ingress: Arc<Ingress>) -> impl Filter<Extract = (impl Reply,), Error = Rejection> + Clone {
    warp::path!("api" / "v1" / "orders" / String)
        .and(warp::get())
        .and(auth::caller(Arc::clone(&ingress)))
        .and(warp::any().map(move || Arc::clone(&ingress)))
        .and_then(get_order)
}

pub(super) fn user_orders(ingress: Arc<Ingress>) -> impl Filter<Extract = (impl Reply,), Error = Rejection> + Clone {
    warp::path!("api" / "v1" / "users" / String / "orders")
        .and(warp::get())
        .and(auth::caller(Arc::clone(&ingress)))
        .and(warp::query::<ListQuery>())
        .and(warp::any().map(move || Arc::clone(&ingress)))
        .and_then(list_user_orders)
}

/// The order, if `caller` may see it.
pub(super) async fn visible_order(
    ingress: &Ingress,
    caller: &Caller,
    order_id: OrderId,
) -> Result<OrderView, ApiError> {
    let order = ingress.view.order(order_id).await.map_err(|e| ApiError::view_failed(&e))?;
    order.filter(|order| sees(caller, &order.user_id)).ok_or_else(|| ApiError::unknown_order(order_id))
}

fn sees(caller: &Caller, owner: &UserId) -> bool {
    match caller {
        Caller::Admin => true,
        Caller::User(user) => user == owner,
    }
}

async fn get_order(raw: String, caller: Caller, ingress: Arc<Ingress>) -> Result<warp::reply::Json, Rejection> {
    let order_id: OrderId = raw.parse().map_err(|e| ApiError::invalid(format!("order_id: {e}")))?;
    Ok(warp::reply::json(&visible_order(&ingress, &caller, order_id).await?))
}

async fn list_user_orders(
    raw: String,
    caller: Caller,
    query: ListQuery,
    ingress: Arc<Ingress>,
) -> Result<warp::reply::Json, Rejection> {
    let user = UserId::parse(&raw).map_err(|e| ApiError::invalid(format!("user_id: {e}")))?;
    if !sees(&caller, &user) {
        return Err(ApiError::not_found(format!("no orders of user {user} are visible to you")).into());
    }
    let limit = page_limit(query.limit)?;
    let orders = ingress.view.user_orders(&user, limit).await.map_err(|e| ApiError::view_failed(&e))?;
    Ok(warp::reply::json(&serde_json::json!({ "user_id": user, "orders": orders })))
}
