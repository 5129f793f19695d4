//! `POST /api/v1/vouchers/{voucher_id}/entries`: a user enters a draw sale
//! (`crate::room` drives the draw; `seckill_core::draw` has the rule).
//!
//! One entry per user: entering again (a retry, a second tab, another
//! ingress) answers the entry held, `200`, and changes nothing; a new entry
//! is `201`. Entries are taken from `entries_open_at` until `draw_at` (the
//! admission clock). The answer is the user's entry, as
//! `GET …/entries/me` gives it.

use std::sync::Arc;

use chrono::SecondsFormat;
use seckill_core::{UserId, VoucherId};
use seckill_gate::Entered;
use seckill_web::ApiError;
use warp::http::{HeaderMap, StatusCode};
use warp::{Filter, Rejection, Reply};

use super::Ingress;
use crate::access::limits;
use crate::error::rejection_error;

pub(super) fn enter(ingress: Arc<Ingress>) -> impl Filter<Extract = (impl Reply,), Error = Rejection> + Clone {
    warp::path!("api" / "v1" / "vouchers" / String / "entries")
        .and(warp::post())
        .and(limits::per_client_address(Arc::clone(&ingress.access)))
        .and(limits::rate_limited_user(Arc::clone(&ingress.access)))
        .and(warp::header::headers_cloned())
        .and(warp::any().map(move || Arc::clone(&ingress)))
        .and_then(handle)
}

async fn handle(
    raw: String,
    user: UserId,
    headers: HeaderMap,
    ingress: Arc<Ingress>,
) -> Result<warp::reply::Response, Rejection> {
    let voucher: VoucherId = raw.parse().map_err(|e| ApiError::invalid(format!("voucher_id: {e}")))?;
    let handle = ingress.rooms.draw_of(voucher).await?;
    let proof = ingress.challenges.proof(ingress.rooms.gate(), voucher, &user, &headers).await?;
    let entered = ingress.rooms.gate().enter_draw(voucher, &user, proof.as_ref()).await.map_err(|error| {
        tracing::warn!(%error, %voucher, "An entry could not reach the draw.");
        ApiError::unavailable("the draw could not be reached; nothing changed, retry")
    })?;
    if proof.is_some() && matches!(entered, Entered::New { .. } | Entered::Unacknowledged { entered: true }) {
        ingress.challenges.spent(voucher);
    }
    let outcome = match entered {
        Entered::New { .. } => "entered",
        Entered::Held => "held",
        Entered::Unacknowledged { .. } => "unacknowledged",
        _ => "refused",
    };
    ingress.rooms.metrics.entries.with_label_values(&[outcome]).inc();
    let status = match entered {
        Entered::New { .. } => StatusCode::CREATED,
        Entered::Held => StatusCode::OK,
        Entered::Unacknowledged { .. } => {
            return Err(ApiError::unavailable(
                "no Redis replica acknowledged the entry in time, so it may be lost: enter again (an entry held \
                 answers 200)",
            )
            .into())
        }
        Entered::Backlogged => {
            return Err(ApiError::unavailable("the event log is not keeping up; nothing changed, retry later").into())
        }
        Entered::UnknownVoucher => return Err(ApiError::unknown_voucher(voucher).into()),
        Entered::NotOpen { opens_at } => {
            let error = ApiError::new(StatusCode::CONFLICT, "draw_not_open", "entries to this draw are not open yet");
            return Err(match opens_at {
                Some(at) => error.with_detail("entries_open_at", at.to_rfc3339_opts(SecondsFormat::Millis, true)),
                None => error,
            }
            .into());
        }
        Entered::Closed { draw_at } => {
            let error = ApiError::new(StatusCode::CONFLICT, "draw_closed", "entries closed: the draw was made");
            return Err(match draw_at {
                Some(at) => error.with_detail("draw_at", at.to_rfc3339_opts(SecondsFormat::Millis, true)),
                None => error,
            }
            .into());
        }
        Entered::Challenge(rejection) => return Err(rejection_error(rejection).into()),
    };
    let answer = ingress.rooms.entry_status(&handle, &user).await.map_err(|error| {
        tracing::warn!(%error, %voucher, "An entry could not be read back.");
        ApiError::unavailable("the entry was taken but could not be read: read GET …/entries/me")
    })?;
    let Some((_, body)) = answer.filter(|(entry, _)| entry.state.is_some()) else {
        return Err(ApiError::internal(&"an entry just taken is not in the draw").into());
    };
    Ok(warp::reply::with_status(warp::reply::json(&body), status).into_response())
}
