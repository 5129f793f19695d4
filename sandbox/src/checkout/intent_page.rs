//! The page of a bare payment intent (`next_action.redirect_to_url`):
//! afterwards the buyer is sent back (`303`) to the intent's `return_url`
//! with `payment_intent=<id>` and `redirect_status=succeeded|failed`
//! added, as Stripe does, or shown the result when there is none.

use seckill_payments::IntentStatus;
use warp::http::StatusCode;
use warp::reply::Response;

use super::html;
use crate::failure::Failure;
use crate::state::State;

/// What the buyer did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Outcome {
    Pay,
    Decline,
}

pub(super) fn show(state: &State, id: &str) -> Response {
    let intent = match state.with_ledger(|ledger, _| ledger.intent(id)) {
        Ok(intent) => intent,
        Err(failure) => return html::failure(&failure),
    };
    let mut body = html::summary(intent.order_id(), intent.amount, &intent.currency);
    if intent.status == IntentStatus::RequiresPaymentMethod {
        body.push_str(&html::buttons(&intent.id));
    } else {
        body.push_str(&format!("<p id=\"status\">This payment is {}.</p>\n", intent.status.as_str()));
    }
    html::page(StatusCode::OK, &body)
}

pub(super) fn settle(state: &State, id: &str, outcome: Outcome) -> Response {
    let settled = state.with_ledger(|ledger, now| {
        // Read before paying: a paid intent has no `next_action` left.
        let return_url = ledger.intent(id)?.next_action.and_then(|action| action.redirect_to_url?.return_url);
        let intent = match outcome {
            Outcome::Pay => ledger.pay(id, now)?,
            Outcome::Decline => ledger.decline(id, now)?,
        };
        Ok::<_, Failure>((intent, return_url))
    });
    let (intent, return_url) = match settled {
        Ok(settled) => settled,
        Err(failure) => return html::failure(&failure),
    };
    let redirect_status = match outcome {
        Outcome::Pay => "succeeded",
        Outcome::Decline => "failed",
    };
    if let Some(return_url) = return_url {
        let separator = if return_url.contains('?') { '&' } else { '?' };
        let location = format!("{return_url}{separator}payment_intent={}&redirect_status={redirect_status}", intent.id);
        if let Some(redirect) = html::redirect(&location) {
            return redirect;
        }
    }
    html::result(match outcome {
        Outcome::Pay => "Payment succeeded.",
        Outcome::Decline => "Payment declined.",
    })
}
