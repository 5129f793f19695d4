//! The routes only a sandbox has: its switches, paying or declining at an
//! exact moment (JSON twins of the checkout pages' buttons), the audit
//! ledger, and the health probe. Served without the API key; never expose
//! a sandbox beyond its tests.

use std::sync::Arc;

use serde::Serialize;
use warp::reply::Response;
use warp::{Filter, Rejection, Reply};

use crate::api::answer;
use crate::body;
use crate::failure::Failure;
use crate::ledger::Audit;
use crate::state::State;
use crate::switches::SwitchesUpdate;
use crate::sync::lock;
use crate::webhooks::WebhookCounts;

/// `GET /sandbox/ledger`.
#[derive(Debug, Serialize)]
struct LedgerView {
    #[serde(flatten)]
    audit: Audit,
    webhooks: WebhookCounts,
}

/// The sandbox's own routes and `/healthz`.
pub(crate) fn routes(state: Arc<State>) -> impl Filter<Extract = (Response,), Error = Rejection> + Clone {
    let with_state = warp::any().map(move || Arc::clone(&state));
    let read_settings =
        warp::path!("sandbox" / "settings").and(warp::get()).and(with_state.clone()).map(|state: Arc<State>| {
            warp::reply::json(&lock(&state.switches).view(tokio::time::Instant::now())).into_response()
        });
    let change_settings = warp::path!("sandbox" / "settings")
        .and(warp::post())
        .and(body::json::<SwitchesUpdate>())
        .and(with_state.clone())
        .map(|update: SwitchesUpdate, state: Arc<State>| {
            let now = tokio::time::Instant::now();
            let mut switches = lock(&state.switches);
            if let Err(problem) = switches.apply(&update, now) {
                return Failure::invalid("parameter_invalid", problem).into_response();
            }
            tracing::info!(switches = ?*switches, "Sandbox switches changed.");
            warp::reply::json(&switches.view(now)).into_response()
        });
    let pay_intent = warp::path!("sandbox" / "payment_intents" / String / "pay")
        .and(warp::post())
        .and(with_state.clone())
        .map(|id: String, state: Arc<State>| answer(state.with_ledger(|ledger, now| ledger.pay(&id, now))));
    let decline_intent = warp::path!("sandbox" / "payment_intents" / String / "decline")
        .and(warp::post())
        .and(with_state.clone())
        .map(|id: String, state: Arc<State>| answer(state.with_ledger(|ledger, now| ledger.decline(&id, now))));
    let pay_session = warp::path!("sandbox" / "checkout" / "sessions" / String / "pay")
        .and(warp::post())
        .and(with_state.clone())
        .map(|id: String, state: Arc<State>| {
            let method = state.switches().payment_method();
            answer(state.with_ledger(|ledger, now| ledger.pay_session(&id, now, method)).map(|record| record.object()))
        });
    let decline_session = warp::path!("sandbox" / "checkout" / "sessions" / String / "decline")
        .and(warp::post())
        .and(with_state.clone())
        .map(|id: String, state: Arc<State>| {
            answer(state.with_ledger(|ledger, now| ledger.decline_session(&id, now)).map(|record| record.object()))
        });
    let ledger = warp::path!("sandbox" / "ledger").and(warp::get()).and(with_state).map(|state: Arc<State>| {
        let audit = state.with_ledger(|ledger, _| ledger.audit());
        warp::reply::json(&LedgerView { audit, webhooks: state.webhooks.counts() }).into_response()
    });
    let healthz = warp::path!("healthz").and(warp::get()).map(|| warp::reply::json(&"ok").into_response());
    read_settings
        .or(change_settings)
        .unify()
        .or(pay_intent)
        .unify()
        .or(decline_intent)
        .unify()
        .or(pay_session)
        .unify()
        .or(decline_session)
        .unify()
        .or(ledger)
        .unify()
        .or(healthz)
        .unify()
}
