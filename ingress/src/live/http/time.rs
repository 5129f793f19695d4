//! `GET /api/v1/time`: the admission clock, for countdowns.

use std::sync::Arc;

use chrono::SecondsFormat;
use warp::http::{header, HeaderValue};
use warp::{Filter, Rejection, Reply};

use super::Reading;

pub(super) fn route(reading: Arc<Reading>) -> impl Filter<Extract = (impl Reply,), Error = Rejection> + Clone {
    warp::path!("api" / "v1" / "time").and(warp::get()).map(move || {
        let now = reading.live.clock.now();
        let body = serde_json::json!({
            "server_time": now.to_rfc3339_opts(SecondsFormat::Millis, true),
            "unix_ms": now.timestamp_millis(),
        });
        let mut response = warp::reply::json(&body).into_response();
        // A clock must not be cached.
        response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        response
    })
}
