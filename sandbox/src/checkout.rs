//! The hosted checkout a buyer is sent to (`next_action.redirect_to_url`):
//! one page with the order and amount and two buttons, `#pay` and
//! `#decline`, each a form POST. Afterwards the buyer is sent back (`303`)
//! to the intent's `return_url` with `payment_intent=<id>` and
//! `redirect_status=succeeded|failed` added, as Stripe does, or shown the
//! result when there is none.
//!
//! Served without the API key: it is the buyer's browser that calls.

use std::fmt::Write as _;
use std::sync::Arc;

use seckill_payments::IntentStatus;
use warp::http::{header, HeaderValue, StatusCode};
use warp::reply::Response;
use warp::{Filter, Rejection, Reply};

use crate::body;
use crate::failure::Failure;
use crate::state::{Outcome, State};
use crate::sync::lock;

/// Stripe's zero-decimal currencies: their amounts are whole units.
const ZERO_DECIMAL: &[&str] =
    &["bif", "clp", "djf", "gnf", "jpy", "kmf", "krw", "mga", "pyg", "rwf", "ugx", "vnd", "vuv", "xaf", "xof", "xpf"];

/// The page and its two actions.
pub(crate) fn routes(state: Arc<State>) -> impl Filter<Extract = (Response,), Error = Rejection> + Clone {
    let with_state = warp::any().map(move || Arc::clone(&state));
    let page = warp::path!("checkout" / String).and(warp::get()).and(with_state.clone()).map(page);
    let pay = warp::path!("checkout" / String / "pay")
        .and(warp::post())
        .and(body::form())
        .and(with_state.clone())
        .map(|id: String, _: Vec<(String, String)>, state: Arc<State>| settle(&state, &id, Outcome::Pay));
    let decline = warp::path!("checkout" / String / "decline")
        .and(warp::post())
        .and(body::form())
        .and(with_state)
        .map(|id: String, _: Vec<(String, String)>, state: Arc<State>| settle(&state, &id, Outcome::Decline));
    page.or(pay).unify().or(decline).unify()
}

fn page(id: String, state: Arc<State>) -> Response {
    let intent = match lock(&state.ledger).intent(&id) {
        Ok(intent) => intent,
        Err(failure) => return failure_page(&failure),
    };
    let mut body = String::new();
    let _ = write!(
        body,
        "<p>Order <span id=\"order\">{}</span></p>\n<p>Amount <span id=\"amount\">{}</span> \
         <span id=\"currency\">{}</span></p>\n",
        escape(intent.order_id().unwrap_or("-")),
        display_amount(intent.amount, &intent.currency),
        escape(&intent.currency.to_ascii_uppercase()),
    );
    if intent.status == IntentStatus::RequiresPaymentMethod {
        // Relative actions (`<id>/pay` from `/checkout/<id>`), so the page
        // works behind a proxy that serves it under a path prefix.
        let id = escape(&intent.id);
        let _ = write!(
            body,
            "<form method=\"post\" action=\"{id}/pay\"><button id=\"pay\" type=\"submit\">Pay</button></form>\n\
             <form method=\"post\" action=\"{id}/decline\"><button id=\"decline\" type=\"submit\">Decline</button></form>\n"
        );
    } else {
        let _ = writeln!(body, "<p id=\"status\">This payment is {}.</p>", intent.status.as_str());
    }
    html(StatusCode::OK, "Sandbox checkout", &body)
}

fn settle(state: &State, id: &str, outcome: Outcome) -> Response {
    // Read before paying: a paid intent has no `next_action` left.
    let return_url =
        lock(&state.ledger).intent(id).ok().and_then(|intent| intent.next_action?.redirect_to_url?.return_url);
    let intent = match state.settle(id, outcome) {
        Ok(intent) => intent,
        Err(failure) => return failure_page(&failure),
    };
    let redirect_status = match outcome {
        Outcome::Pay => "succeeded",
        Outcome::Decline => "failed",
    };
    if let Some(return_url) = return_url {
        let separator = if return_url.contains('?') { '&' } else { '?' };
        let location = format!("{return_url}{separator}payment_intent={}&redirect_status={redirect_status}", intent.id);
        if let Ok(location) = HeaderValue::from_str(&location) {
            let mut response = warp::reply::with_status("", StatusCode::SEE_OTHER).into_response();
            response.headers_mut().insert(header::LOCATION, location);
            return response;
        }
    }
    let message = match outcome {
        Outcome::Pay => "Payment succeeded.",
        Outcome::Decline => "Payment declined.",
    };
    html(StatusCode::OK, "Sandbox checkout", &format!("<p id=\"result\">{message}</p>\n"))
}

fn failure_page(failure: &Failure) -> Response {
    html(failure.status, "Sandbox checkout", &format!("<p id=\"error\">{}</p>\n", escape(&failure.message)))
}

fn html(status: StatusCode, title: &str, body: &str) -> Response {
    let page = format!(
        "<!doctype html>\n<html lang=\"en\">\n<head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>{title}</title></head>\n\
         <body>\n<main>\n<h1>{title}</h1>\n{body}</main>\n</body>\n</html>\n"
    );
    warp::reply::with_status(warp::reply::html(page), status).into_response()
}

/// `1999` `eur` as `19.99`; zero-decimal currencies as they are.
fn display_amount(amount: u64, currency: &str) -> String {
    if ZERO_DECIMAL.contains(&currency) {
        amount.to_string()
    } else {
        format!("{}.{:02}", amount / 100, amount % 100)
    }
}

/// Escapes text for HTML content and attribute values.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amounts_and_text_are_shown_safely() {
        assert_eq!(display_amount(1999, "eur"), "19.99");
        assert_eq!(display_amount(5, "usd"), "0.05");
        assert_eq!(display_amount(500, "jpy"), "500");
        assert_eq!(escape("<a href=\"x\">'&'</a>"), "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;");
    }
}
