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
        Self { status, code, message: message.into(), details: None }
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

    /// 500 `internal`: logged with its cause; the client sees no detail.
    pub fn internal(cause: &dyn std::fmt::Display) -> Self {
        tracing::error!(%cause, "Request failed.");
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", "internal error")
    }
}

impl Reply for ApiError {
    fn into_response(self) -> warp::reply::Response {
        let body = Body { error: self.code, message: &self.message, details: self.details.as_ref() };
        warp::reply::with_status(warp::reply::json(&body), self.status).into_response()
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
