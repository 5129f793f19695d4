//! `/v1/payment_intents`: create, retrieve, cancel and search. Search sees
//! a change only `search_lag_ms` after it is made, as Stripe's.

use std::sync::Arc;

use seckill_payments::{List, PaymentIntent};
use warp::reply::Response;
use warp::{Filter, Rejection, Reply};

use super::answer;
use super::idempotent::idempotent;
use crate::body;
use crate::failure::Failure;
use crate::ledger::{IntentRequest, MAX_AMOUNT};
use crate::params::Params;
use crate::search;
use crate::state::State;

/// Most search results on one page, as Stripe allows.
const MAX_PAGE: usize = 100;
/// Search results on a page when the caller does not say.
const DEFAULT_PAGE: usize = 10;

pub(super) fn routes(state: Arc<State>) -> impl Filter<Extract = (Response,), Error = Rejection> + Clone {
    let with_state = warp::any().map(move || Arc::clone(&state));
    let create = warp::path!("payment_intents")
        .and(warp::post())
        .and(warp::header::optional::<String>("idempotency-key"))
        .and(body::form())
        .and(with_state.clone())
        .map(create_intent);
    // Before `retrieve`, which would read `search` as an id.
    let search = warp::path!("payment_intents" / "search")
        .and(warp::get())
        .and(warp::query::<Vec<(String, String)>>())
        .and(with_state.clone())
        .map(|pairs, state: Arc<State>| answer(search_page(pairs, &state)));
    let retrieve = warp::path!("payment_intents" / String)
        .and(warp::get())
        .and(with_state.clone())
        .map(|id: String, state: Arc<State>| answer(state.with_ledger(|ledger, _| ledger.intent(&id))));
    let cancel = warp::path!("payment_intents" / String / "cancel")
        .and(warp::post())
        .and(body::form())
        .and(with_state)
        .map(cancel_intent);
    create.or(search).unify().or(retrieve).unify().or(cancel).unify()
}

fn create_intent(key: Option<String>, pairs: Vec<(String, String)>, state: Arc<State>) -> Response {
    let read = Params::parse(pairs, &["amount", "currency", "return_url", "description", "metadata[*]"])
        .and_then(|params| Ok((intent_request(&params)?, params)));
    let (request, params) = match read {
        Ok(read) => read,
        Err(failure) => return failure.into_response(),
    };
    let fingerprint = params.fingerprint("POST /v1/payment_intents");
    idempotent(&state, &state.switches(), key.as_deref(), fingerprint, |ledger, now| ledger.create_intent(request, now))
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
    let return_url = params.get("return_url");
    if return_url.is_some_and(|url| !is_http_url(url)) {
        return Err(Failure::param("url_invalid", "return_url", "Not a valid URL."));
    }
    Ok(IntentRequest {
        amount,
        currency: currency(params, "currency")?,
        metadata: params.metadata()?,
        return_url: return_url.map(str::to_owned),
    })
}

/// A three-letter currency parameter, lowercased as Stripe answers it.
pub(super) fn currency(params: &Params, name: &str) -> Result<String, Failure> {
    let currency = params.required(name)?;
    if currency.len() != 3 || !currency.chars().all(|c| c.is_ascii_alphabetic()) {
        return Err(Failure::param("parameter_invalid", name, format!("Invalid currency: {currency}.")));
    }
    Ok(currency.to_ascii_lowercase())
}

/// Whether a URL parameter is one Stripe would take.
pub(super) fn is_http_url(url: &str) -> bool {
    (url.starts_with("http://") || url.starts_with("https://")) && !url.contains(char::is_whitespace)
}

fn cancel_intent(id: String, pairs: Vec<(String, String)>, state: Arc<State>) -> Response {
    if let Err(failure) = Params::parse(pairs, &["cancellation_reason"]) {
        return failure.into_response();
    }
    answer(state.with_ledger(|ledger, now| ledger.cancel(&id, now)))
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
    let lag = state.switches().search_lag_ms;
    let (data, has_more) =
        state.with_ledger(|ledger, now| ledger.intents_for_order(&order_id, now.before_ms(lag), offset, limit));
    Ok(List {
        object: "search_result".to_owned(),
        data,
        has_more,
        next_page: has_more.then(|| (offset + limit).to_string()),
        url: Some("/v1/payment_intents/search".to_owned()),
    })
}
