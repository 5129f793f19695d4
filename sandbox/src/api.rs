//! The provider API under `/v1`, in Stripe's shape: form-encoded requests
//! with `Authorization: Bearer <api_key>`, JSON answers, Stripe's error
//! codes. Charges are always answered expanded; `expand[]` is accepted and
//! ignored.

use std::sync::Arc;

use seckill_payments::{Event, List, PaymentIntent, Refund};
use serde::Serialize;
use warp::reply::Response;
use warp::{Filter, Rejection, Reply};

use crate::failure::Failure;
use crate::ledger::{IntentRequest, Ledger, MAX_AMOUNT};
use crate::params::Params;
use crate::state::{unix_now, State};
use crate::sync::lock;
use crate::{body, search};

/// Most search results on one page, as Stripe allows.
const MAX_PAGE: usize = 100;
/// Search results on a page when the caller does not say.
const DEFAULT_PAGE: usize = 10;

/// Every `/v1` route.
pub(crate) fn routes(state: Arc<State>) -> impl Filter<Extract = (Response,), Error = Rejection> + Clone {
    let authorized = authorized(Arc::clone(&state));
    let with_state = warp::any().map(move || Arc::clone(&state));
    let idempotency_key = warp::header::optional::<String>("idempotency-key");
    let query = warp::query::<Vec<(String, String)>>();

    let create = warp::path!("payment_intents")
        .and(warp::post())
        .and(idempotency_key)
        .and(body::form())
        .and(with_state.clone())
        .map(create_intent);
    // Before `retrieve`, which would read `search` as an id.
    let search = warp::path!("payment_intents" / "search")
        .and(warp::get())
        .and(query)
        .and(with_state.clone())
        .map(search_intents);
    let retrieve =
        warp::path!("payment_intents" / String).and(warp::get()).and(with_state.clone()).map(retrieve_intent);
    let cancel = warp::path!("payment_intents" / String / "cancel")
        .and(warp::post())
        .and(body::form())
        .and(with_state.clone())
        .map(cancel_intent);
    let refund = warp::path!("refunds")
        .and(warp::post())
        .and(idempotency_key)
        .and(body::form())
        .and(with_state.clone())
        .then(answer_refund);
    let refunds = warp::path!("refunds").and(warp::get()).and(query).and(with_state.clone()).map(list_refunds);

    warp::path("v1")
        .and(authorized)
        .and(create.or(search).unify().or(retrieve).unify().or(cancel).unify().or(refund).unify().or(refunds).unify())
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

fn create_intent(key: Option<String>, pairs: Vec<(String, String)>, state: Arc<State>) -> Response {
    let params = match Params::parse(pairs, &["amount", "currency", "return_url", "description", "metadata"]) {
        Ok(params) => params,
        Err(failure) => return failure.into_response(),
    };
    let fingerprint = params.fingerprint("POST /v1/payment_intents");
    idempotent(&state, key.as_deref(), fingerprint, |ledger| {
        let request = intent_request(&params)?;
        Ok((ledger.create_intent(request, unix_now())?, None))
    })
}

/// Reads a create call's parameters with Stripe's rules.
fn intent_request(params: &Params) -> Result<IntentRequest, Failure> {
    let amount = params.required("amount")?;
    let amount: u64 =
        amount.parse().map_err(|_| Failure::param("parameter_invalid_integer", "amount", "Invalid integer: amount"))?;
    if amount == 0 {
        return Err(Failure::param("amount_too_small", "amount", "Amount must be at least 1."));
    }
    if amount > MAX_AMOUNT {
        return Err(Failure::param("amount_too_large", "amount", format!("Amount must be no more than {MAX_AMOUNT}.")));
    }
    let currency = params.required("currency")?;
    if currency.len() != 3 || !currency.chars().all(|c| c.is_ascii_alphabetic()) {
        return Err(Failure::param("parameter_invalid", "currency", format!("Invalid currency: {currency}.")));
    }
    let return_url = params.get("return_url");
    if return_url.is_some_and(|url| !(url.starts_with("http://") || url.starts_with("https://"))) {
        return Err(Failure::param("url_invalid", "return_url", "Not a valid URL."));
    }
    Ok(IntentRequest {
        amount,
        currency: currency.to_ascii_lowercase(),
        metadata: params.metadata()?,
        return_url: return_url.map(str::to_owned),
    })
}

fn retrieve_intent(id: String, state: Arc<State>) -> Response {
    answer(lock(&state.ledger).intent(&id))
}

fn cancel_intent(id: String, pairs: Vec<(String, String)>, state: Arc<State>) -> Response {
    if let Err(failure) = Params::parse(pairs, &["cancellation_reason"]) {
        return failure.into_response();
    }
    answer(lock(&state.ledger).cancel(&id, unix_now()))
}

fn search_intents(pairs: Vec<(String, String)>, state: Arc<State>) -> Response {
    answer(search_page(pairs, &state))
}

fn search_page(pairs: Vec<(String, String)>, state: &State) -> Result<List<PaymentIntent>, Failure> {
    let params = Params::parse(pairs, &["query", "limit", "page"])?;
    let order_id = search::order_id_of(params.required("query")?)
        .map_err(|problem| Failure::param("parameter_invalid", "query", format!("The sandbox's search: {problem}.")))?;
    let limit = match params.get("limit") {
        None => DEFAULT_PAGE,
        Some(limit) => limit.parse().ok().filter(|limit| (1..=MAX_PAGE).contains(limit)).ok_or_else(|| {
            Failure::param("parameter_invalid_integer", "limit", format!("limit must be 1 to {MAX_PAGE}."))
        })?,
    };
    let offset = match params.get("page") {
        None => 0,
        Some(page) => page
            .parse::<usize>()
            .map_err(|_| Failure::param("parameter_invalid", "page", "Not a page token from this search."))?,
    };
    let (data, has_more) = lock(&state.ledger).intents_for_order(&order_id, offset, limit);
    Ok(List {
        object: "search_result".to_owned(),
        data,
        has_more,
        next_page: has_more.then(|| (offset + limit).to_string()),
        url: Some("/v1/payment_intents/search".to_owned()),
    })
}

/// `create_refund`, its answer held back `refund_answer_delay_ms` after the
/// refund is made.
async fn answer_refund(key: Option<String>, pairs: Vec<(String, String)>, state: Arc<State>) -> Response {
    let delay = lock(&state.switches).refund_answer_delay_ms;
    let answer = create_refund(key, pairs, Arc::clone(&state));
    if delay > 0 {
        tokio::time::sleep(std::time::Duration::from_millis(delay)).await;
    }
    answer
}

fn create_refund(key: Option<String>, pairs: Vec<(String, String)>, state: Arc<State>) -> Response {
    if lock(&state.switches).refunds_failing(tokio::time::Instant::now()) {
        return Failure::api_error("The sandbox is failing refunds (fail_refunds_for_ms).").into_response();
    }
    let params = match Params::parse(pairs, &["payment_intent", "amount", "reason", "metadata"]) {
        Ok(params) => params,
        Err(failure) => return failure.into_response(),
    };
    let fingerprint = params.fingerprint("POST /v1/refunds");
    idempotent(&state, key.as_deref(), fingerprint, |ledger| {
        let intent = params.required("payment_intent")?;
        let amount = match params.get("amount") {
            None => None,
            Some(amount) => Some(
                amount
                    .parse()
                    .map_err(|_| Failure::param("parameter_invalid_integer", "amount", "Invalid integer: amount"))?,
            ),
        };
        let (refund, event) = ledger.refund(intent, amount, unix_now())?;
        Ok((refund, Some(event)))
    })
}

fn list_refunds(pairs: Vec<(String, String)>, state: Arc<State>) -> Response {
    let listed = Params::parse(pairs, &["payment_intent", "limit"]).and_then(|params| {
        let intent = params.required("payment_intent")?;
        let data: Vec<Refund> = lock(&state.ledger).refunds_for(intent);
        Ok(List {
            object: "list".to_owned(),
            data,
            has_more: false,
            next_page: None,
            url: Some("/v1/refunds".to_owned()),
        })
    });
    answer(listed)
}

/// Runs `action` once per idempotency key: a retry with the same key and
/// parameters gets the first answer again (marked `Idempotent-Replayed`),
/// with other parameters a refusal. The check and the action happen under
/// one lock, so two racing retries cannot both act.
fn idempotent<T: Serialize>(
    state: &State,
    key: Option<&str>,
    fingerprint: u64,
    action: impl FnOnce(&mut Ledger) -> Result<(T, Option<Event>), Failure>,
) -> Response {
    let (body, event) = {
        let mut ledger = lock(&state.ledger);
        if let Some(key) = key {
            match ledger.replays.replay(key, fingerprint) {
                Ok(Some(body)) => return json_body(body, true),
                Ok(None) => {}
                Err(failure) => return failure.into_response(),
            }
        }
        let (value, event) = match action(&mut ledger) {
            Ok(done) => done,
            Err(failure) => return failure.into_response(),
        };
        let body = serde_json::to_string(&value).expect("the sandbox's objects serialize");
        if let Some(key) = key {
            ledger.replays.remember(key, fingerprint, &body);
        }
        (body, event)
    };
    if let Some(event) = event {
        state.webhooks.enqueue(event);
    }
    json_body(body, false)
}

fn json_body(body: String, replayed: bool) -> Response {
    let mut response = warp::reply::with_header(body, "content-type", "application/json").into_response();
    if replayed {
        response.headers_mut().insert("idempotent-replayed", warp::http::HeaderValue::from_static("true"));
    }
    response
}

/// The object as JSON, or the refusal.
pub(crate) fn answer<T: Serialize>(result: Result<T, Failure>) -> Response {
    match result {
        Ok(value) => warp::reply::json(&value).into_response(),
        Err(failure) => failure.into_response(),
    }
}
