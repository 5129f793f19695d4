//! Answers with validators: `ETag`, `Cache-Control` and `304 Not Modified`.

use chrono::{DateTime, Utc};
use seckill_core::metrics::{LiveMetrics, ReadSource};
use seckill_web::ApiError;
use warp::http::{header, HeaderValue, StatusCode};
use warp::hyper::body::Bytes;
use warp::reply::Response;

use crate::live::vouchers::Served;

/// Longest `If-None-Match` read: a few tags.
const MAX_IF_NONE_MATCH: usize = 1_024;

/// Refuses an `If-None-Match` too long to be a few tags.
pub(super) fn check_if_none_match(header: Option<&str>) -> Result<(), ApiError> {
    match header {
        Some(header) if header.len() > MAX_IF_NONE_MATCH => {
            Err(ApiError::invalid(format!("If-None-Match is longer than {MAX_IF_NONE_MATCH} bytes")))
        }
        _ => Ok(()),
    }
}

/// Whether `if_none_match` (the request header) names `etag`: any listed
/// tag, compared weakly as RFC 9110 asks for this header, or `*`.
fn matches(if_none_match: &str, etag: &str) -> bool {
    let bare = |tag: &str| tag.trim().trim_start_matches("W/").to_owned();
    if_none_match.split(',').any(|tag| tag.trim() == "*" || bare(tag) == bare(etag))
}

/// `304` when the client's copy is current, else the representation with
/// its clock fields as of `now`.
pub(super) fn answer(
    served: &Served,
    if_none_match: Option<&str>,
    now: DateTime<Utc>,
    metrics: &LiveMetrics,
    resource: &'static str,
) -> Response {
    let representation = &served.representation;
    let not_modified = if_none_match.is_some_and(|header| matches(header, &representation.etag));
    let source = match (not_modified, served.rebuilt, served.stale) {
        (true, ..) => ReadSource::NotModified,
        (false, _, true) => ReadSource::Stale,
        (false, true, false) => ReadSource::Refreshed,
        (false, false, false) => ReadSource::Memory,
    };
    metrics.answers.with_label_values(&[resource, source.as_str()]).inc();
    let mut response = if not_modified {
        let mut response = Response::new(Bytes::new().into());
        *response.status_mut() = StatusCode::NOT_MODIFIED;
        response
    } else {
        let mut response = Response::new(representation.body(now, served.stale).into());
        response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        response
    };
    let headers = response.headers_mut();
    if let Ok(etag) = HeaderValue::from_str(&representation.etag) {
        headers.insert(header::ETAG, etag);
    }
    // A stale answer (a rebuild failed) is not one for shared caches to keep.
    let cache_control = if served.stale { "no-store" } else { representation.cache_control };
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache_control));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn if_none_match_takes_lists_weak_tags_and_a_star() {
        let etag = "\"abc\"";
        assert!(matches("\"abc\"", etag));
        assert!(matches("\"x\", W/\"abc\"", etag));
        assert!(matches("*", etag));
        assert!(!matches("\"abd\"", etag));
        assert!(!matches("abc", etag), "an unquoted tag is not the same tag");
    }
}
