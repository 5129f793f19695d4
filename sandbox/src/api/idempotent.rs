//! Calls made once per idempotency key: a retry with the same key and
//! parameters gets the first answer again (marked `Idempotent-Replayed`),
//! a retry with other parameters a refusal. The check and the call happen
//! under one lock, so two racing retries cannot both act.

use serde::Serialize;
use warp::http::{HeaderValue, StatusCode};
use warp::reply::Response;
use warp::Reply;

use crate::clock::Moment;
use crate::failure::Failure;
use crate::idempotency::Answer;
use crate::ledger::Ledger;
use crate::state::State;
use crate::switches::Switches;

/// Runs `action` unless `key` has a saved answer. Its success is saved
/// under the key; so is its failure when the `replay_failures` switch is
/// on and Stripe would save it. Parameters are read and refused before
/// this, as Stripe refuses them before the key is consulted.
pub(super) fn idempotent<T: Serialize>(
    state: &State,
    switches: &Switches,
    key: Option<&str>,
    fingerprint: u64,
    action: impl FnOnce(&mut Ledger, Moment) -> Result<T, Failure>,
) -> Response {
    let (answer, replayed) = state.with_ledger(|ledger, now| {
        if let Some(key) = key {
            match ledger.replays.replay(key, fingerprint, now, switches.idempotency_ttl_ms) {
                Ok(Some(answer)) => return (answer, true),
                Ok(None) => {}
                Err(failure) => return (failed(&failure), false),
            }
        }
        let answer = match action(ledger, now) {
            Ok(value) => Answer {
                status: StatusCode::OK,
                body: serde_json::to_string(&value).expect("the sandbox's objects serialize"),
            },
            Err(failure) if switches.replay_failures && failure.saved_under_key() => failed(&failure),
            Err(failure) => return (failed(&failure), false),
        };
        if let Some(key) = key {
            ledger.replays.remember(key, fingerprint, answer.clone(), now);
        }
        (answer, false)
    });
    let mut response = warp::reply::with_status(answer.body, answer.status).into_response();
    let headers = response.headers_mut();
    headers.insert("content-type", HeaderValue::from_static("application/json"));
    if replayed {
        headers.insert("idempotent-replayed", HeaderValue::from_static("true"));
    }
    response
}

fn failed(failure: &Failure) -> Answer {
    Answer { status: failure.status, body: serde_json::to_string(&failure.body()).expect("an error body serializes") }
}
