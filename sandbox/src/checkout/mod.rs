//! The hosted checkout pages a buyer is sent to: a Checkout Session's
//! (`/checkout/cs_…`, its `url`) and a bare intent's (`/checkout/pi_…`,
//! its `next_action.redirect_to_url`). Each shows the order and amount
//! and two buttons, `#pay` and `#decline`, each a form POST.
//!
//! Served without the API key: it is the buyer's browser that calls.

mod html;
mod intent_page;
mod session_page;

use std::sync::Arc;

use warp::reply::Response;
use warp::{Filter, Rejection};

use crate::body;
use crate::state::State;
use intent_page::Outcome;

/// Whether `id` names a Checkout Session rather than an intent.
fn is_session(id: &str) -> bool {
    id.starts_with("cs_")
}

/// The page and its two actions.
pub(crate) fn routes(state: Arc<State>) -> impl Filter<Extract = (Response,), Error = Rejection> + Clone {
    let with_state = warp::any().map(move || Arc::clone(&state));
    let page = warp::path!("checkout" / String).and(warp::get()).and(with_state.clone()).map(
        |id: String, state: Arc<State>| {
            if is_session(&id) {
                session_page::show(&state, &id)
            } else {
                intent_page::show(&state, &id)
            }
        },
    );
    let pay = warp::path!("checkout" / String / "pay").and(warp::post()).and(body::form()).and(with_state.clone()).map(
        |id: String, _: Vec<(String, String)>, state: Arc<State>| {
            if is_session(&id) {
                session_page::pay(&state, &id)
            } else {
                intent_page::settle(&state, &id, Outcome::Pay)
            }
        },
    );
    let decline = warp::path!("checkout" / String / "decline").and(warp::post()).and(body::form()).and(with_state).map(
        |id: String, _: Vec<(String, String)>, state: Arc<State>| {
            if is_session(&id) {
                session_page::decline(&state, &id)
            } else {
                intent_page::settle(&state, &id, Outcome::Decline)
            }
        },
    );
    page.or(pay).unify().or(decline).unify()
}
