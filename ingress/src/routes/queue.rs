//! `POST /api/v1/vouchers/{voucher_id}/queue`: a user takes a place in a
//! queue-mode sale's waiting room (`crate::room`).
//!
//! One place per user: joining again (a retry, a second tab, another
//! ingress) answers the place held, `200`, and changes nothing; a new place
//! is `201`. An `Idempotency-Key` is checked like the order route's and
//! honoured by that rule: a retry with it gets the same place. A place that
//! is over (skipped because its holder stopped watching, its entry lapsed,
//! or its entry spent on an order) may be taken again, at the back. The answer is the user's status, as
//! `GET …/queue/me` gives it.

use std::sync::Arc;

use seckill_core::{UserId, VoucherId};
use seckill_gate::{Joined, RetryKey};
use seckill_web::ApiError;
use warp::http::{HeaderMap, StatusCode};
use warp::{Filter, Rejection, Reply};

use super::Ingress;
use crate::access::limits;
use crate::error::rejection_error;

pub(super) fn join(ingress: Arc<Ingress>) -> impl Filter<Extract = (impl Reply,), Error = Rejection> + Clone {
    warp::path!("api" / "v1" / "vouchers" / String / "queue")
        .and(warp::post())
        .and(limits::per_client_address(Arc::clone(&ingress.access)))
        .and(limits::rate_limited_user(Arc::clone(&ingress.access)))
        .and(warp::header::optional::<String>("idempotency-key"))
        .and(warp::header::headers_cloned())
        .and(warp::any().map(move || Arc::clone(&ingress)))
        .and_then(handle)
}

async fn handle(
    raw: String,
    user: UserId,
    idempotency_key: Option<String>,
    headers: HeaderMap,
    ingress: Arc<Ingress>,
) -> Result<warp::reply::Response, Rejection> {
    let voucher: VoucherId = raw.parse().map_err(|e| ApiError::invalid(format!("voucher_id: {e}")))?;
    if let Some(key) = &idempotency_key {
        RetryKey::new(&user, key).map_err(ApiError::invalid)?;
    }
    let handle = ingress.rooms.room_of(voucher).await?;
    let proof = ingress.challenges.proof(ingress.rooms.gate(), voucher, &user, &headers).await?;
    let joined = ingress.rooms.gate().join_queue(voucher, &user, proof.as_ref()).await.map_err(|error| {
        tracing::warn!(%error, %voucher, "A join could not reach the waiting room.");
        ApiError::unavailable("the waiting room could not be reached; nothing changed, retry")
    })?;
    if proof.is_some() && matches!(joined, Joined::Placed { .. } | Joined::Unacknowledged { placed: true }) {
        ingress.challenges.spent(voucher);
    }
    let outcome = match joined {
        Joined::Placed { .. } => "placed",
        Joined::Held { .. } => "held",
        Joined::Unacknowledged { .. } => "unacknowledged",
        _ => "refused",
    };
    ingress.rooms.metrics.joins.with_label_values(&[outcome]).inc();
    let status = match joined {
        Joined::Placed { .. } => StatusCode::CREATED,
        Joined::Held { .. } => StatusCode::OK,
        Joined::Unacknowledged { .. } => {
            return Err(ApiError::unavailable(
                "no Redis replica acknowledged the place in time, so it may be lost: join again (a place held \
                 answers 200)",
            )
            .into())
        }
        Joined::Backlogged => {
            return Err(ApiError::unavailable("the event log is not keeping up; nothing changed, retry later").into())
        }
        Joined::UnknownVoucher => return Err(ApiError::unknown_voucher(voucher).into()),
        Joined::NotOpen { opens_at } => {
            let error = ApiError::new(StatusCode::CONFLICT, "queue_not_open", "the waiting room is not open yet");
            return Err(match opens_at {
                Some(at) => error.with_detail("opens_at", at.to_rfc3339()),
                None => error,
            }
            .into());
        }
        Joined::Ended => return Err(ApiError::new(StatusCode::CONFLICT, "ended", "the sale has ended").into()),
        Joined::Challenge(rejection) => return Err(rejection_error(rejection).into()),
    };
    let answer = ingress.rooms.status(&handle, &user).await.map_err(|error| {
        tracing::warn!(%error, %voucher, "A joined place could not be read back.");
        ApiError::unavailable("the place was taken but could not be read: read GET …/queue/me")
    })?;
    let Some((_, body)) = answer else {
        return Err(ApiError::internal(&"a place just taken is not in the room").into());
    };
    Ok(warp::reply::with_status(warp::reply::json(&body), status).into_response())
}
