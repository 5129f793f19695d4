//! `/v1/refunds`: refund an intent in full, list an intent's refunds
//! (newest first, as Stripe lists them), retrieve one. Each refund call
//! naming an intent is recorded for audits, with its idempotency key.

use std::sync::Arc;
use std::time::Duration;

use seckill_payments::List;
use warp::reply::Response;
use warp::{Filter, Rejection, Reply};

use super::answer;
use super::idempotent::idempotent;
use crate::body;
use crate::failure::Failure;
use crate::ledger::{Attempt, RefundRecord, RefundTiming};
use crate::params::Params;
use crate::state::State;

/// Most refunds listed on one page, as Stripe allows.
const MAX_PAGE: usize = 100;
/// Refunds listed when the caller does not say, as Stripe lists.
const DEFAULT_PAGE: usize = 10;

pub(super) fn routes(state: Arc<State>) -> impl Filter<Extract = (Response,), Error = Rejection> + Clone {
    let with_state = warp::any().map(move || Arc::clone(&state));
    let create = warp::path!("refunds")
        .and(warp::post())
        .and(warp::header::optional::<String>("idempotency-key"))
        .and(body::form())
        .and(with_state.clone())
        .then(answer_refund);
    let list = warp::path!("refunds")
        .and(warp::get())
        .and(warp::query::<Vec<(String, String)>>())
        .and(with_state.clone())
        .map(|pairs, state: Arc<State>| answer(list_refunds(pairs, &state)));
    let retrieve = warp::path!("refunds" / String)
        .and(warp::get())
        .and(with_state)
        .map(|id: String, state: Arc<State>| answer(state.with_ledger(|ledger, _| ledger.refund_by_id(&id))));
    create.or(list).unify().or(retrieve).unify()
}

/// `create_refund`, its answer held back `refund_answer_delay_ms` after the
/// refund is made.
async fn answer_refund(key: Option<String>, pairs: Vec<(String, String)>, state: Arc<State>) -> Response {
    let delay = state.switches().refund_answer_delay_ms;
    let answer = create_refund(key, pairs, &state);
    if delay > 0 {
        tokio::time::sleep(Duration::from_millis(delay)).await;
    }
    answer
}

fn create_refund(key: Option<String>, pairs: Vec<(String, String)>, state: &State) -> Response {
    let read = Params::parse(pairs, &["payment_intent", "amount", "reason", "metadata[*]"])
        .and_then(|params| Ok((refund_request(&params)?, params)));
    let ((intent, amount), params) = match read {
        Ok(read) => read,
        Err(failure) => return failure.into_response(),
    };
    let switches = state.switches();
    let failing = switches.refunds_failing(tokio::time::Instant::now());
    let timing = RefundTiming { pending_ms: switches.pending_refunds_ms, fail: switches.fail_pending_refunds };
    let fingerprint = params.fingerprint("POST /v1/refunds");
    let response = idempotent(state, &switches, key.as_deref(), fingerprint, |ledger, now| {
        if failing {
            return Err(Failure::api_error("The sandbox is failing refunds (fail_refunds_for_ms)."));
        }
        ledger.refund(&intent, amount, now, timing)
    });
    let attempt = Attempt {
        idempotency_key: key,
        status: response.status().as_u16(),
        replayed: response.headers().contains_key("idempotent-replayed"),
    };
    state.with_ledger(|ledger, _| ledger.record_refund_attempt(&intent, attempt));
    response
}

/// The intent to refund and the amount asked, if one is.
fn refund_request(params: &Params) -> Result<(String, Option<u64>), Failure> {
    let intent = params.required("payment_intent")?.to_owned();
    let amount = match params.get("amount") {
        None => None,
        Some(amount) => Some(
            amount
                .parse()
                .map_err(|_| Failure::param("parameter_invalid_integer", "amount", "Invalid integer: amount"))?,
        ),
    };
    params.metadata()?;
    Ok((intent, amount))
}

fn list_refunds(pairs: Vec<(String, String)>, state: &State) -> Result<List<RefundRecord>, Failure> {
    let params = Params::parse(pairs, &["payment_intent", "limit"])?;
    let intent = params.required("payment_intent")?;
    let limit = match params.get("limit") {
        None => DEFAULT_PAGE,
        Some(limit) => limit.parse().ok().filter(|limit| (1..=MAX_PAGE).contains(limit)).ok_or_else(|| {
            Failure::param("parameter_invalid_integer", "limit", format!("limit must be 1 to {MAX_PAGE}."))
        })?,
    };
    let mut refunds = state.with_ledger(|ledger, _| ledger.refunds_for(intent));
    refunds.reverse();
    let has_more = refunds.len() > limit;
    refunds.truncate(limit);
    Ok(List {
        object: "list".to_owned(),
        data: refunds,
        has_more,
        next_page: None,
        url: Some("/v1/refunds".to_owned()),
    })
}
