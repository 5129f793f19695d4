//! `GET /api/v1/vouchers/{voucher_id}` and `GET /api/v1/vouchers`: the
//! product page and the list, from memory, with `ETag` and `304`. With a
//! user's credentials, a draw's read carries the reader's own state too
//! ([`super::reader`]).

use std::sync::Arc;

use seckill_core::VoucherId;
use seckill_web::{page_limit, ApiError};
use serde::Deserialize;
use warp::{Filter, Rejection, Reply};

use super::{conditional, reader, Reading};
use crate::access::Caller;
use crate::live::vouchers::ReadError;

/// Query string of the voucher listing.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ListQuery {
    limit: Option<usize>,
    before: Option<String>,
}

pub(super) fn one(reading: Arc<Reading>) -> impl Filter<Extract = (impl Reply,), Error = Rejection> + Clone {
    warp::path!("api" / "v1" / "vouchers" / String)
        .and(warp::get())
        .and(warp::header::optional::<String>("if-none-match"))
        .and(warp::header::optional::<String>("authorization"))
        .and(warp::header::optional::<String>("x-user-id"))
        .and(warp::any().map(move || Arc::clone(&reading)))
        .and_then(get_voucher)
}

pub(super) fn list(reading: Arc<Reading>) -> impl Filter<Extract = (impl Reply,), Error = Rejection> + Clone {
    warp::path!("api" / "v1" / "vouchers")
        .and(warp::get())
        .and(warp::query::<ListQuery>())
        .and(warp::header::optional::<String>("if-none-match"))
        .and(warp::any().map(move || Arc::clone(&reading)))
        .and_then(list_vouchers)
}

pub(super) fn read_failed(error: &ReadError) -> ApiError {
    match error {
        ReadError::View(error) => ApiError::view_failed(error),
        ReadError::Gate(error) => {
            tracing::warn!(%error, "Redis unreadable for a voucher read.");
            ApiError::unavailable("the sale's state cannot be read right now; retry the request")
        }
        ReadError::Recent(error) => {
            tracing::debug!(%error, "A voucher read failed within the refresh interval.");
            ApiError::unavailable("the sale's state cannot be read right now; retry the request")
        }
    }
}

async fn get_voucher(
    raw: String,
    if_none_match: Option<String>,
    authorization: Option<String>,
    user_header: Option<String>,
    reading: Arc<Reading>,
) -> Result<warp::reply::Response, Rejection> {
    let id: VoucherId = raw.parse().map_err(|e| ApiError::invalid(format!("voucher_id: {e}")))?;
    conditional::check_if_none_match(if_none_match.as_deref())?;
    // Credentials are optional here, but ones given must check out.
    let reader = match (&authorization, &user_header) {
        (None, None) => None,
        _ => match reading.access.auth.caller(authorization.as_deref(), user_header.as_deref())? {
            Caller::User(user) => Some(user),
            Caller::Admin => None,
        },
    };
    let served = reading.live.vouchers.voucher(id).await.map_err(|e| read_failed(&e))?;
    let served = served.ok_or_else(|| ApiError::unknown_voucher(id))?;
    if let Some(user) = reader {
        let now = reading.live.clock.now();
        if let Some(me) = reader::draw_state(&reading, id, user, now).await {
            return Ok(reader::answer(&served, &me, if_none_match.as_deref(), now));
        }
    }
    Ok(conditional::answer(
        &served,
        if_none_match.as_deref(),
        reading.live.clock.now(),
        &reading.live.metrics,
        "voucher",
    ))
}

async fn list_vouchers(
    query: ListQuery,
    if_none_match: Option<String>,
    reading: Arc<Reading>,
) -> Result<warp::reply::Response, Rejection> {
    let limit = page_limit(query.limit)?;
    conditional::check_if_none_match(if_none_match.as_deref())?;
    let before = match &query.before {
        Some(raw) => Some(raw.parse::<VoucherId>().map_err(|e| ApiError::invalid(format!("before: {e}")))?),
        None => None,
    };
    let served = reading.live.vouchers.page(limit, before).await.map_err(|e| read_failed(&e))?;
    let now = reading.live.clock.now();
    Ok(conditional::answer(&served, if_none_match.as_deref(), now, &reading.live.metrics, "voucher_list"))
}
