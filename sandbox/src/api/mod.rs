//! The provider API under `/v1`, in Stripe's shape: form-encoded requests
//! with `Authorization: Bearer <api_key>`, JSON answers, Stripe's error
//! codes. Intents' charges are always answered expanded (`expand[]` is
//! accepted and ignored there); a session's intent is expanded when asked.

mod idempotent;
mod intents;
mod refunds;
mod session_request;
mod sessions;

use std::sync::Arc;

use serde::Serialize;
use warp::reply::Response;
use warp::{Filter, Rejection, Reply};

use crate::events::API_VERSION;
use crate::failure::Failure;
use crate::state::State;

/// Every `/v1` route.
pub(crate) fn routes(state: Arc<State>) -> impl Filter<Extract = (Response,), Error = Rejection> + Clone {
    warp::path("v1").and(authorized(Arc::clone(&state))).and(pinned_version()).and(
        intents::routes(Arc::clone(&state))
            .or(refunds::routes(Arc::clone(&state)))
            .unify()
            .or(sessions::routes(state))
            .unify(),
    )
}

/// Refuses a call without the configured key, as Stripe answers.
fn authorized(state: Arc<State>) -> impl Filter<Extract = (), Error = Rejection> + Clone {
    warp::header::optional::<String>("authorization")
        .and_then(move |header: Option<String>| {
            let state = Arc::clone(&state);
            async move {
                match header.as_deref().and_then(|value| value.strip_prefix("Bearer ")) {
                    Some(key) if key == state.api_key => Ok(()),
                    Some(_) => Err(warp::reject::custom(Failure::unauthorized("Invalid API Key provided."))),
                    None => Err(warp::reject::custom(Failure::unauthorized(
                        "You did not provide an API key. Provide it in the Authorization header as a bearer token.",
                    ))),
                }
            }
        })
        .untuple_one()
}

/// Refuses a `Stripe-Version` other than the one whose shapes the sandbox
/// answers: Stripe would answer another version in other shapes, which
/// the sandbox cannot, so it says so rather than mislead.
fn pinned_version() -> impl Filter<Extract = (), Error = Rejection> + Copy {
    warp::header::optional::<String>("stripe-version")
        .and_then(|version: Option<String>| async move {
            match version {
                Some(version) if version != API_VERSION => Err(warp::reject::custom(Failure::refused(format!(
                    "The sandbox answers Stripe-Version {API_VERSION} only, not {version}."
                )))),
                _ => Ok(()),
            }
        })
        .untuple_one()
}

/// The object as JSON, or the refusal.
pub(crate) fn answer<T: Serialize>(result: Result<T, Failure>) -> Response {
    match result {
        Ok(value) => warp::reply::json(&value).into_response(),
        Err(failure) => failure.into_response(),
    }
}
