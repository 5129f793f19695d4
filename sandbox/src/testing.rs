//! The routes only a sandbox has: its switches, paying or declining at an
//! exact moment, the audit ledger, and the health probe. Served without the
//! API key; never expose a sandbox beyond its tests.

use std::sync::Arc;

use seckill_payments::{PaymentIntent, Refund};
use serde::Serialize;
use warp::reply::Response;
use warp::{Filter, Rejection, Reply};

use crate::api::answer;
use crate::body;
use crate::state::{Outcome, State};
use crate::switches::SwitchesUpdate;
use crate::sync::lock;
use crate::webhooks::WebhookCounts;

/// `GET /sandbox/ledger`.
#[derive(Debug, Serialize)]
struct LedgerView {
    payment_intents: Vec<PaymentIntent>,
    refunds: Vec<Refund>,
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
            switches.apply(&update, now);
            tracing::info!(switches = ?*switches, "Sandbox switches changed.");
            warp::reply::json(&switches.view(now)).into_response()
        });
    let pay = warp::path!("sandbox" / "payment_intents" / String / "pay")
        .and(warp::post())
        .and(with_state.clone())
        .map(|id: String, state: Arc<State>| answer(state.settle(&id, Outcome::Pay)));
    let decline = warp::path!("sandbox" / "payment_intents" / String / "decline")
        .and(warp::post())
        .and(with_state.clone())
        .map(|id: String, state: Arc<State>| answer(state.settle(&id, Outcome::Decline)));
    let ledger = warp::path!("sandbox" / "ledger").and(warp::get()).and(with_state).map(|state: Arc<State>| {
        let (payment_intents, refunds) = lock(&state.ledger).snapshot();
        let view = LedgerView { payment_intents, refunds, webhooks: state.webhooks.counts() };
        warp::reply::json(&view).into_response()
    });
    let healthz = warp::path!("healthz").and(warp::get()).map(|| warp::reply::json(&"ok").into_response());
    read_settings.or(change_settings).unify().or(pay).unify().or(decline).unify().or(ledger).unify().or(healthz).unify()
}
