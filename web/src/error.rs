//! The one place errors become HTTP responses.
//!
//! Every error body is `{"error": CODE, "message": TEXT}` with a stable,
//! snake_case CODE clients can switch on, and extra fields (such as the
//! existing `order_id` of a duplicate) only where documented.

use std::convert::Infallible;

use serde::Serialize;
use warp::http::StatusCode;
use warp::reject::Reject;
use warp::{Rejection, Reply};

/// An error answer: status, stable code and a human message.
#[derive(Debug, Clone)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    /// Extra fields merged into the body (e.g. `order_id`).
    pub details: Option<serde_json::Map<String, serde_json::Value>>,
    /// Response headers the status calls for (`WWW-Authenticate` on `401`,
    /// `Retry-After` on `429`).
    pub headers: Vec<(&'static str, String)>,
}

impl Reject for ApiError {}

#[derive(Serialize)]
struct Body<'a> {
    error: &'a str,
    message: &'a str,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    details: Option<&'a serde_json::Map<String, serde_json::Value>>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self { status, code, message: message.into(), details: None, headers: Vec::new() }
    }

    /// Adds a response header.
    pub fn with_header(mut self, name: &'static str, value: impl Into<String>) -> Self {
        self.headers.push((name, value.into()));
        self
    }

    /// Adds one extra field to the body.
    pub fn with_detail(mut self, key: &str, value: impl Into<serde_json::Value>) -> Self {
        self.details.get_or_insert_with(serde_json::Map::new).insert(key.to_owned(), value.into());
        self
    }

    /// 400 `invalid_request`.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_request", message)
    }

    /// `401 unauthorized`: no credentials, or credentials that do not
    /// check out. Says how to authenticate (RFC 6750 §3).
    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "unauthorized", message)
            .with_header("www-authenticate", r#"Bearer realm="seckill""#)
    }

    /// `403 forbidden`: authenticated, but not allowed to do this.
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "forbidden", message)
    }

    /// `429 rate_limited`, with `Retry-After` in whole seconds (at least 1).
    pub fn rate_limited(retry_after: std::time::Duration, message: impl Into<String>) -> Self {
        let seconds = retry_after.as_secs_f64().ceil().max(1.0) as u64;
        Self::new(StatusCode::TOO_MANY_REQUESTS, "rate_limited", message)
            .with_header("retry-after", seconds.to_string())
            .with_detail("retry_after_seconds", seconds)
    }

    /// 404 `not_found`.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    /// `404 not_found` for an order nobody can see (unknown, or another
    /// user's: the two are not told apart).
    pub fn unknown_order(order: seckill_core::OrderId) -> Self {
        Self::not_found(format!("order {order} is unknown"))
    }

    /// `404 unknown_voucher`, the one answer for a voucher nobody defined.
    pub fn unknown_voucher(voucher: seckill_core::VoucherId) -> Self {
        Self::new(StatusCode::NOT_FOUND, "unknown_voucher", format!("voucher {voucher} is unknown"))
    }

    /// 503 `unavailable`: a dependency is down; retrying later may succeed.
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", message)
    }

    /// The answer when the order-status view could not be read: `503` when
    /// its backend failed (retrying may work), `500` when its data is
    /// unreadable. Logged either way.
    pub fn view_failed(error: &seckill_store::StoreError) -> Self {
        match error {
            seckill_store::StoreError::Backend(_) => {
                tracing::warn!(%error, "Status view unavailable.");
                Self::unavailable("the order status view is unavailable; retry the request")
            }
            seckill_store::StoreError::Corrupt(_) | seckill_store::StoreError::Fenced { .. } => Self::internal(error),
        }
    }

    /// 500 `internal`: logged with its cause; the client sees no detail.
    pub fn internal(cause: &dyn std::fmt::Display) -> Self {
        tracing::error!(%cause, "Request failed.");
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", "internal error")
    }
}

impl Reply for ApiError {
    fn into_response(self) -> warp::reply::Response {
        let body = Body { error: self.code, message: &self.message, details: self.details.as_ref() };
        let mut response = warp::reply::with_status(warp::reply::json(&body), self.status).into_response();
        for (name, value) in self.headers {
            if let Ok(value) = warp::http::HeaderValue::from_str(&value) {
                response.headers_mut().insert(name, value);
            }
        }
        response
    }
}

/// Turns every rejection, ours or warp's, into the error shape.
pub async fn recover(rejection: Rejection) -> Result<warp::reply::Response, Infallible> {
    let error = if let Some(api) = rejection.find::<ApiError>() {
        api.clone()
    } else if rejection.is_not_found() {
        ApiError::not_found("no such route")
    } else if rejection.find::<warp::reject::PayloadTooLarge>().is_some() {
        ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large", "request body too large")
    } else if rejection.find::<warp::reject::LengthRequired>().is_some() {
        ApiError::new(StatusCode::LENGTH_REQUIRED, "invalid_request", "a Content-Length header is required")
    } else if let Some(error) = rejection.find::<warp::reject::InvalidQuery>() {
        ApiError::invalid(format!("invalid query string: {error}"))
    } else if let Some(error) = rejection.find::<warp::reject::MissingHeader>() {
        ApiError::invalid(format!("missing header {}", error.name()))
    } else if let Some(error) = rejection.find::<warp::reject::InvalidHeader>() {
        ApiError::invalid(format!("invalid header {}", error.name()))
    } else if rejection.find::<warp::reject::MethodNotAllowed>().is_some() {
        ApiError::new(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed", "method not allowed")
    } else if rejection.find::<warp::reject::UnsupportedMediaType>().is_some() {
        ApiError::new(StatusCode::UNSUPPORTED_MEDIA_TYPE, "invalid_request", "bodies are application/json")
    } else {
        tracing::warn!(?rejection, "Unhandled rejection.");
        ApiError::invalid("request not understood")
    };
    Ok(error.into_response())
}
