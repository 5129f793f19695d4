//! `GET /api/v1/vouchers/{voucher_id}/challenge`: a proof-of-work challenge
//! for the caller (`crate::challenge`). Nothing is stored: the challenge is
//! signed, bound to the user, the voucher and its expiry.

use std::sync::Arc;

use seckill_core::metrics::RefusalReason;
use seckill_core::{UserId, VoucherId};
use seckill_web::ApiError;
use warp::{Filter, Rejection, Reply};

use super::Ingress;
use crate::access::{auth, reading_client_address};

pub(super) fn issue(ingress: Arc<Ingress>) -> impl Filter<Extract = (impl Reply,), Error = Rejection> + Clone {
    warp::path!("api" / "v1" / "vouchers" / String / "challenge")
        .and(warp::get())
        .and(reading_client_address(Arc::clone(&ingress.access)))
        .and(auth::user(Arc::clone(&ingress.access)))
        .and(warp::any().map(move || Arc::clone(&ingress)))
        .and_then(handle)
}

/// Counted like the order reads, and held to the user's pace of challenge
/// requests (`challenge.per_user_per_second`): a challenge is cheap to hand
/// out, and asking for them raises nobody's difficulty (only proofs spent do).
async fn handle(
    raw: String,
    _address: Option<std::net::IpAddr>,
    user: UserId,
    ingress: Arc<Ingress>,
) -> Result<warp::reply::Response, Rejection> {
    let voucher: VoucherId = raw.parse().map_err(|e| ApiError::invalid(format!("voucher_id: {e}")))?;
    let issued = ingress.challenges.issue(&ingress.gate, voucher, &user).await.inspect_err(|error| {
        if error.code == "rate_limited" {
            ingress.access.metrics.refused.with_label_values(&[RefusalReason::RateLimitedUser.as_str()]).inc();
        }
    })?;
    let Some(issued) = issued else {
        return Err(ApiError::unknown_voucher(voucher).into());
    };
    let mut response = warp::reply::json(&issued).into_response();
    response.headers_mut().insert(warp::http::header::CACHE_CONTROL, warp::http::HeaderValue::from_static("no-store"));
    Ok(response)
}
