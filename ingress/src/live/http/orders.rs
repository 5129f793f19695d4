//! `GET /api/v1/orders/{order_id}` (optionally a long-poll) and
//! `GET /api/v1/users/{user_id}/orders`: what buyers refresh after their
//! `202`.
//!
//! A user sees their own orders only; someone else's order is answered
//! exactly like an unknown one (`404`), so order ids cannot be probed. The
//! admin token sees every order.
//!
//! `?wait=10s` (at most 30 s) turns the read into a long-poll: the answer
//! comes as soon as the order's status differs from `?status=` (by default
//! the status the order has when the request arrives: any change), or when
//! the wait ends, with the order as it stands then; the `Seckill-Wait`
//! header says which (`changed` or `timeout`; the ingress shutting down
//! ends every wait early, as `timeout`).

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use seckill_core::metrics::ReadSource;
use seckill_core::{OrderId, UserId};
use seckill_store::{OrderStatus, OrderView};
use seckill_web::{page_limit, ApiError, ListQuery};
use serde::Deserialize;
use warp::http::{header, HeaderValue};
use warp::{Filter, Rejection, Reply};

use super::Reading;
use crate::access::{auth, reading_client_address, Caller};
use crate::config::MAX_WAIT_SECONDS;
use crate::live::places::Refused;
use crate::live::{Live, Source};

/// The response header that says how a long-poll ended.
pub(crate) const WAIT_HEADER: &str = "seckill-wait";

/// Query string of an order read.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct OrderQuery {
    /// How long to wait for a change: `250ms`, `10s`.
    wait: Option<String>,
    /// The status the client has; a change is any other. By default the
    /// status the order has when the request arrives.
    status: Option<OrderStatus>,
}

pub(super) fn one(reading: Arc<Reading>) -> impl Filter<Extract = (impl Reply,), Error = Rejection> + Clone {
    warp::path!("api" / "v1" / "orders" / String)
        .and(warp::get())
        .and(reading_client_address(Arc::clone(&reading.access)))
        .and(auth::caller(Arc::clone(&reading.access)))
        .and(warp::query::<OrderQuery>())
        .and(warp::any().map(move || Arc::clone(&reading)))
        .and_then(get_order)
}

pub(super) fn of_user(reading: Arc<Reading>) -> impl Filter<Extract = (impl Reply,), Error = Rejection> + Clone {
    warp::path!("api" / "v1" / "users" / String / "orders")
        .and(warp::get())
        .and(reading_client_address(Arc::clone(&reading.access)))
        .and(auth::caller(Arc::clone(&reading.access)))
        .and(warp::query::<ListQuery>())
        .and(warp::any().map(move || Arc::clone(&reading)))
        .and_then(list_user_orders)
}

/// Whether `caller` may see `owner`'s orders.
pub(crate) fn sees(caller: &Caller, owner: &UserId) -> bool {
    match caller {
        Caller::Admin => true,
        Caller::User(user) => user == owner,
    }
}

/// `10s`, `250ms` → a duration of at most [`MAX_WAIT_SECONDS`].
pub(super) fn parse_wait(raw: &str) -> Result<Duration, ApiError> {
    let invalid = || ApiError::invalid(format!("wait must be like 500ms or 10s, at most {MAX_WAIT_SECONDS}s"));
    let (number, unit_ms) = match raw.strip_suffix("ms") {
        Some(number) => (number, 1),
        None => (raw.strip_suffix('s').ok_or_else(invalid)?, 1_000),
    };
    // Exactly what the document's pattern allows: digits, no leading zero.
    let leading_zero = number.len() > 1 && number.starts_with('0');
    if number.is_empty() || number.len() > 6 || leading_zero || !number.bytes().all(|b| b.is_ascii_digit()) {
        return Err(invalid());
    }
    let millis = number.parse::<u64>().map_err(|_| invalid())? * unit_ms;
    if millis > MAX_WAIT_SECONDS * 1_000 {
        return Err(invalid());
    }
    Ok(Duration::from_millis(millis))
}

/// The order, if `caller` may see it, and where it was read.
pub(crate) async fn visible_order(
    live: &Live,
    caller: &Caller,
    order_id: OrderId,
) -> Result<(OrderView, Source), ApiError> {
    let found = live.order(order_id).await.map_err(|e| ApiError::view_failed(&e))?;
    found.filter(|(order, _)| sees(caller, &order.user_id)).ok_or_else(|| ApiError::unknown_order(order_id))
}

fn reply(reading: &Reading, order: &OrderView, source: Source, wait: Option<&'static str>) -> warp::reply::Response {
    let metric = match source {
        Source::Memory => ReadSource::Memory,
        Source::View => ReadSource::View,
        Source::Pending => ReadSource::Pending,
    };
    reading.live.metrics.answers.with_label_values(&["order", metric.as_str()]).inc();
    let mut response = warp::reply::json(order).into_response();
    let headers = response.headers_mut();
    // Someone's own order: never kept by a shared cache.
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("private, no-store"));
    if let Some(wait) = wait {
        headers.insert(WAIT_HEADER, HeaderValue::from_static(wait));
    }
    response
}

async fn get_order(
    raw: String,
    address: Option<IpAddr>,
    caller: Caller,
    query: OrderQuery,
    reading: Arc<Reading>,
) -> Result<warp::reply::Response, Rejection> {
    let order_id: OrderId = raw.parse().map_err(|e| ApiError::invalid(format!("order_id: {e}")))?;
    let wait = query.wait.as_deref().map(parse_wait).transpose()?;
    // `status` says what a long-poll waits to change from; a plain read
    // answers the status as it is, so without `wait` it changes nothing.
    let Some(wait) = wait else {
        let (order, source) = visible_order(&reading.live, &caller, order_id).await?;
        return Ok(reply(&reading, &order, source, None));
    };
    long_poll(&reading, &caller, address, order_id, query.status, wait).await.map_err(Rejection::from)
}

/// Answers once the order's status is not `have` (None: the status its
/// first read finds), or after `wait`.
async fn long_poll(
    reading: &Reading,
    caller: &Caller,
    address: Option<IpAddr>,
    order_id: OrderId,
    mut have: Option<OrderStatus>,
    wait: Duration,
) -> Result<warp::reply::Response, ApiError> {
    let live = &reading.live;
    let user = match caller {
        Caller::User(user) => Some(user),
        Caller::Admin => None,
    };
    let _place = live.waiter_places.take(user, address).map_err(|refused| {
        let (reason, error) = match refused {
            Refused::Full => (
                "waiters_full",
                ApiError::unavailable("too many requests are waiting; poll without wait or retry later"),
            ),
            Refused::UserFull => (
                "user_waiters_full",
                ApiError::rate_limited(Duration::from_secs(1), "this user has too many requests waiting"),
            ),
            Refused::AddressFull => (
                "address_waiters_full",
                ApiError::rate_limited(Duration::from_secs(1), "this address has too many requests waiting"),
            ),
        };
        live.metrics.refused.with_label_values(&[reason]).inc();
        error
    })?;
    // Registered before the first read: a change between the two wakes us.
    let Some(registration) = live.waiters.register(order_id) else {
        live.metrics.refused.with_label_values(&["waiters_full"]).inc();
        return Err(ApiError::unavailable("too many requests are waiting; poll without wait or retry later"));
    };
    live.metrics.waiters.inc();
    let _waiting = scopeguard(|| live.metrics.waiters.dec());
    let deadline = tokio::time::Instant::now() + wait;
    let mut woken = Box::pin(registration.notify().notified());
    woken.as_mut().enable();
    loop {
        let (order, source) = visible_order(&reading.live, caller, order_id).await?;
        // Without `status=`, the first read says which status the order has now.
        let from = *have.get_or_insert(order.status);
        if order.status != from {
            return Ok(reply(reading, &order, source, Some("changed")));
        }
        tokio::select! {
            () = &mut woken => {
                woken = Box::pin(registration.notify().notified());
                woken.as_mut().enable();
            }
            () = tokio::time::sleep_until(deadline) => return Ok(reply(reading, &order, source, Some("timeout"))),
            () = live.closing.cancelled() => return Ok(reply(reading, &order, source, Some("timeout"))),
        }
    }
}

/// Runs `on_drop` when dropped.
fn scopeguard<F: FnOnce()>(on_drop: F) -> impl Drop {
    struct Guard<F: FnOnce()>(Option<F>);
    impl<F: FnOnce()> Drop for Guard<F> {
        fn drop(&mut self) {
            if let Some(on_drop) = self.0.take() {
                on_drop();
            }
        }
    }
    Guard(Some(on_drop))
}

async fn list_user_orders(
    raw: String,
    _address: Option<IpAddr>,
    caller: Caller,
    query: ListQuery,
    reading: Arc<Reading>,
) -> Result<warp::reply::Response, Rejection> {
    let user = UserId::parse(&raw).map_err(|e| ApiError::invalid(format!("user_id: {e}")))?;
    if !sees(&caller, &user) {
        return Err(ApiError::not_found(format!("no orders of user {user} are visible to you")).into());
    }
    let limit = page_limit(query.limit)?;
    let orders = reading.live.user_orders(&user, limit).await.map_err(|e| ApiError::view_failed(&e))?;
    let mut response = warp::reply::json(&serde_json::json!({ "user_id": user, "orders": orders })).into_response();
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("private, no-store"));
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_are_bounded_and_spelled_with_a_unit() {
        assert_eq!(parse_wait("10s").expect("valid"), Duration::from_secs(10));
        assert_eq!(parse_wait("250ms").expect("valid"), Duration::from_millis(250));
        assert_eq!(parse_wait("30s").expect("valid"), Duration::from_secs(30));
        for bad in ["31s", "30001ms", "10", "s", "-1s", "1.5s", "10m", "", "99999999s", "010s", "006977s"] {
            assert!(parse_wait(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_documents_pattern_for_waits_is_exactly_what_is_accepted() {
        let document: serde_json::Value =
            serde_json::from_str(crate::routes::openapi::OPENAPI_JSON).expect("the document");
        let parameters = document["paths"]["/api/v1/orders/{order_id}"]["get"]["parameters"].as_array().expect("some");
        let wait = parameters.iter().find(|p| p["name"] == "wait").expect("wait is documented");
        let pattern = wait["schema"]["pattern"].as_str().expect("a pattern");
        // The pattern's two alternatives, spelled out: every value of either
        // parses, and the first values past them do not.
        assert_eq!(pattern, "^((0|[1-9][0-9]{0,3}|[12][0-9]{4}|30000)ms|([0-9]|[12][0-9]|30)s)$");
        for ms in [0, 1, 999, 9_999, 10_000, 29_999, 30_000] {
            assert!(parse_wait(&format!("{ms}ms")).is_ok(), "{ms}ms");
        }
        for s in 0..=30 {
            assert!(parse_wait(&format!("{s}s")).is_ok(), "{s}s");
        }
        for bad in ["30001ms", "31s", "00ms", "01s"] {
            assert!(parse_wait(bad).is_err(), "{bad}");
        }
    }
}
