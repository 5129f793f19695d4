//! `/v1/checkout/sessions`: create, retrieve and expire Checkout Sessions.
//! A session's intent is an id unless `expand[]=payment_intent` (or
//! `payment_intent.latest_charge`) asks for the object; its charge is
//! then expanded too, as the sandbox always answers intents.

use std::sync::Arc;

use warp::reply::Response;
use warp::{Filter, Rejection, Reply};

use super::idempotent::idempotent;
use super::{answer, session_request};
use crate::body;
use crate::clock::Moment;
use crate::failure::Failure;
use crate::ledger::Expansion;
use crate::params::Params;
use crate::state::State;

pub(super) fn routes(state: Arc<State>) -> impl Filter<Extract = (Response,), Error = Rejection> + Clone {
    let with_state = warp::any().map(move || Arc::clone(&state));
    let idempotency_key = warp::header::optional::<String>("idempotency-key");
    let create = warp::path!("checkout" / "sessions")
        .and(warp::post())
        .and(idempotency_key)
        .and(body::form())
        .and(with_state.clone())
        .map(create_session);
    let retrieve = warp::path!("checkout" / "sessions" / String)
        .and(warp::get())
        .and(warp::query::<Vec<(String, String)>>())
        .and(with_state.clone())
        .map(retrieve_session);
    let expire = warp::path!("checkout" / "sessions" / String / "expire")
        .and(warp::post())
        .and(idempotency_key)
        .and(body::form())
        .and(with_state)
        .map(expire_session);
    create.or(retrieve).unify().or(expire).unify()
}

fn create_session(key: Option<String>, pairs: Vec<(String, String)>, state: Arc<State>) -> Response {
    let read = Params::parse(pairs, session_request::ACCEPTED).and_then(|params| {
        expansion(&params)?;
        let request = session_request::read(&params, Moment::now(), state.min_session_seconds)?;
        Ok((request, params))
    });
    let (request, params) = match read {
        Ok(read) => read,
        Err(failure) => return failure.into_response(),
    };
    let fingerprint = params.fingerprint("POST /v1/checkout/sessions");
    // A new session has no intent yet, so there is nothing to expand.
    idempotent(&state, &state.switches(), key.as_deref(), fingerprint, |ledger, now| {
        ledger.create_session(request, now)
    })
}

fn retrieve_session(id: String, pairs: Vec<(String, String)>, state: Arc<State>) -> Response {
    let expansion = match Params::parse(pairs, &[]).and_then(|params| expansion(&params)) {
        Ok(expansion) => expansion,
        Err(failure) => return failure.into_response(),
    };
    answer(state.with_ledger(|ledger, now| ledger.session(&id, now, expansion)))
}

fn expire_session(id: String, key: Option<String>, pairs: Vec<(String, String)>, state: Arc<State>) -> Response {
    let read = Params::parse(pairs, &[]).and_then(|params| Ok((expansion(&params)?, params)));
    let (expansion, params) = match read {
        Ok(read) => read,
        Err(failure) => return failure.into_response(),
    };
    let fingerprint = params.fingerprint(&format!("POST /v1/checkout/sessions/{id}/expire"));
    idempotent(&state, &state.switches(), key.as_deref(), fingerprint, |ledger, now| {
        ledger.expire_session(&id, now)?;
        ledger.session(&id, now, expansion)
    })
}

/// What `expand[]` asks of a session: its intent, or nothing. Other
/// expansions Stripe offers are refused rather than ignored.
fn expansion(params: &Params) -> Result<Expansion, Failure> {
    let mut expansion = Expansion::Id;
    for field in params.expansions() {
        match field {
            "payment_intent" | "payment_intent.latest_charge" => expansion = Expansion::Intent,
            other => {
                return Err(Failure {
                    param: Some("expand".to_owned()),
                    ..Failure::refused(format!("This property cannot be expanded ({other})."))
                })
            }
        }
    }
    Ok(expansion)
}
