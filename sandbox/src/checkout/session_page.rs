//! A Checkout Session's hosted page. Paying makes the session's intent
//! and sends the buyer (`303`) to the `success_url`, Stripe's
//! `{CHECKOUT_SESSION_ID}` replaced by the id; declining leaves the session
//! open and sends them to the `cancel_url`. A session no longer open
//! cannot be paid: the page says so (`409`) and nothing is charged.

use seckill_payments::types::SessionStatus;
use warp::http::StatusCode;
use warp::reply::Response;

use super::html;
use crate::state::State;

/// Stripe's placeholder in `success_url`.
const SESSION_ID_TEMPLATE: &str = "{CHECKOUT_SESSION_ID}";

pub(super) fn show(state: &State, id: &str) -> Response {
    let record = match state.with_ledger(|ledger, now| ledger.session_record(id, now)) {
        Ok(record) => record,
        Err(failure) => return html::failure(&failure),
    };
    let session = &record.session;
    let mut body = html::summary(
        session.order_id(),
        session.amount_total.unwrap_or_default(),
        session.currency.as_deref().unwrap_or_default(),
    );
    body.push_str(&format!("<p id=\"product\">{}</p>\n", html::escape(&record.product_name)));
    if session.status == SessionStatus::Open {
        body.push_str(&html::buttons(&session.id));
    } else {
        body.push_str(&format!("<p id=\"status\">This checkout is {}.</p>\n", session.status.as_str()));
    }
    html::page(StatusCode::OK, &body)
}

pub(super) fn pay(state: &State, id: &str) -> Response {
    let method = state.switches().payment_method();
    match state.with_ledger(|ledger, now| ledger.pay_session(id, now, method)) {
        Ok(record) => {
            let location = record.success_url.replace(SESSION_ID_TEMPLATE, &record.session.id);
            html::redirect(&location).unwrap_or_else(|| html::result("Payment succeeded."))
        }
        Err(failure) => html::failure(&failure),
    }
}

pub(super) fn decline(state: &State, id: &str) -> Response {
    match state.with_ledger(|ledger, now| ledger.decline_session(id, now)) {
        Ok(record) => {
            record.cancel_url.as_deref().and_then(html::redirect).unwrap_or_else(|| html::result("Payment declined."))
        }
        Err(failure) => html::failure(&failure),
    }
}
