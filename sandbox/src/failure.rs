//! Refusals, answered in Stripe's error shape
//! (`{"error":{"type":…,"code":…,"message":…}}`) so the platform's client
//! handles the sandbox and a real provider by the same codes.

use std::convert::Infallible;

use seckill_payments::{ErrorBody, ErrorDetail};
use warp::http::StatusCode;
use warp::reject::Reject;
use warp::reply::Response;
use warp::{Rejection, Reply};

/// Stripe's type for a request that is wrong in itself.
const INVALID_REQUEST: &str = "invalid_request_error";

/// A refused request: HTTP status and Stripe's error fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Failure {
    pub(crate) status: StatusCode,
    pub(crate) kind: &'static str,
    pub(crate) code: Option<&'static str>,
    pub(crate) message: String,
    pub(crate) param: Option<String>,
}

impl Reject for Failure {}

impl Failure {
    fn new(status: StatusCode, kind: &'static str, code: Option<&'static str>, message: impl Into<String>) -> Self {
        Self { status, kind, code, message: message.into(), param: None }
    }

    /// `400`: the request is wrong, as `code` says.
    pub(crate) fn invalid(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, INVALID_REQUEST, Some(code), message)
    }

    /// `400` about one parameter.
    pub(crate) fn param(code: &'static str, param: &str, message: impl Into<String>) -> Self {
        Self { param: Some(param.to_owned()), ..Self::invalid(code, message) }
    }

    /// `400` without a code, as Stripe answers some refusals of state.
    pub(crate) fn refused(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, INVALID_REQUEST, None, message)
    }

    /// `409`: the object is no longer in a state that allows this.
    pub(crate) fn conflict(message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, INVALID_REQUEST, None, message)
    }

    /// `404`: no `object` with this id.
    pub(crate) fn missing(object: &str, id: &str) -> Self {
        Self::new(StatusCode::NOT_FOUND, INVALID_REQUEST, Some("resource_missing"), format!("No such {object}: '{id}'"))
    }

    /// `401`, as for a missing or wrong key.
    pub(crate) fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, INVALID_REQUEST, None, message)
    }

    /// `429`, as Stripe answers past a rate limit: retryable.
    pub(crate) fn rate_limited(message: impl Into<String>) -> Self {
        Self::new(StatusCode::TOO_MANY_REQUESTS, INVALID_REQUEST, Some("rate_limit"), message)
    }

    /// `500`: the provider failed; retryable.
    pub(crate) fn api_error(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "api_error", None, message)
    }

    /// `400`: an idempotency key reused with other parameters or on another
    /// route.
    pub(crate) fn idempotency_mismatch(key: &str) -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            "idempotency_error",
            Some("idempotency_key_in_use"),
            format!(
                "Keys for idempotent requests can only be used with the same parameters they were first used with. \
                 Try using a key other than '{key}' if you meant to execute a different request."
            ),
        )
    }

    /// Whether Stripe saves this refusal under the call's idempotency key:
    /// it does for what the call met while executing (a `500` included),
    /// not for a rate limit, which turned the call away before it began.
    /// (Refusals of the parameters are made before the key is consulted.)
    pub(crate) fn saved_under_key(&self) -> bool {
        self.status != StatusCode::TOO_MANY_REQUESTS
    }

    /// The body, as the platform's client reads it.
    pub(crate) fn body(&self) -> ErrorBody {
        ErrorBody {
            error: ErrorDetail {
                kind: self.kind.to_owned(),
                code: self.code.map(str::to_owned),
                message: self.message.clone(),
                param: self.param.clone(),
            },
        }
    }
}

impl Reply for Failure {
    fn into_response(self) -> Response {
        warp::reply::with_status(warp::reply::json(&self.body()), self.status).into_response()
    }
}

/// Answers what no route accepted in the same shape.
pub(crate) async fn recover(rejection: Rejection) -> Result<Response, Infallible> {
    let failure = if let Some(failure) = rejection.find::<Failure>() {
        failure.clone()
    } else if rejection.find::<warp::reject::PayloadTooLarge>().is_some() {
        Failure::new(StatusCode::PAYLOAD_TOO_LARGE, INVALID_REQUEST, None, "The request body is too large.")
    } else if rejection.find::<warp::reject::LengthRequired>().is_some() {
        Failure::new(StatusCode::LENGTH_REQUIRED, INVALID_REQUEST, None, "A Content-Length header is required.")
    } else if let Some(error) = rejection.find::<warp::filters::body::BodyDeserializeError>() {
        Failure::invalid("parameter_invalid", format!("The request body could not be read: {error}"))
    } else if rejection.find::<warp::reject::InvalidQuery>().is_some() {
        Failure::invalid("parameter_invalid", "The query string could not be read.")
    } else if rejection.find::<warp::reject::UnsupportedMediaType>().is_some() {
        Failure::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            INVALID_REQUEST,
            None,
            "Send parameters as application/x-www-form-urlencoded.",
        )
    } else if rejection.find::<warp::reject::InvalidHeader>().is_some() {
        Failure::invalid("parameter_invalid", "A request header could not be read.")
    } else if rejection.find::<warp::reject::MethodNotAllowed>().is_some() {
        Failure::new(StatusCode::METHOD_NOT_ALLOWED, INVALID_REQUEST, None, "This method is not allowed on this URL.")
    } else if rejection.is_not_found() {
        Failure::new(StatusCode::NOT_FOUND, INVALID_REQUEST, None, "Unrecognized request URL.")
    } else {
        tracing::warn!(?rejection, "Unexpected rejection.");
        Failure::api_error("The request could not be handled.")
    };
    Ok(failure.into_response())
}
