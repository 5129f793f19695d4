//! The pages' HTML: one layout, amounts as a buyer reads them, escaping.

use warp::http::{header, HeaderValue, StatusCode};
use warp::reply::Response;
use warp::Reply;

use crate::failure::Failure;

/// Stripe's zero-decimal currencies: their amounts are whole units.
const ZERO_DECIMAL: &[&str] =
    &["bif", "clp", "djf", "gnf", "jpy", "kmf", "krw", "mga", "pyg", "rwf", "ugx", "vnd", "vuv", "xaf", "xof", "xpf"];

/// The title of every page.
const TITLE: &str = "Sandbox checkout";

/// A page with `body` inside the layout.
pub(super) fn page(status: StatusCode, body: &str) -> Response {
    let page = format!(
        "<!doctype html>\n<html lang=\"en\">\n<head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>{TITLE}</title></head>\n\
         <body>\n<main>\n<h1>{TITLE}</h1>\n{body}</main>\n</body>\n</html>\n"
    );
    warp::reply::with_status(warp::reply::html(page), status).into_response()
}

/// The order and amount, as both pages show them.
pub(super) fn summary(order_id: Option<&str>, amount: u64, currency: &str) -> String {
    format!(
        "<p>Order <span id=\"order\">{}</span></p>\n<p>Amount <span id=\"amount\">{}</span> \
         <span id=\"currency\">{}</span></p>\n",
        escape(order_id.unwrap_or("-")),
        display_amount(amount, currency),
        escape(&currency.to_ascii_uppercase()),
    )
}

/// The two buttons. Relative actions (`<id>/pay` from `/checkout/<id>`),
/// so the page works behind a proxy that serves it under a path prefix.
pub(super) fn buttons(id: &str) -> String {
    let id = escape(id);
    format!(
        "<form method=\"post\" action=\"{id}/pay\"><button id=\"pay\" type=\"submit\">Pay</button></form>\n\
         <form method=\"post\" action=\"{id}/decline\"><button id=\"decline\" type=\"submit\">Decline</button></form>\n"
    )
}

/// A line saying what became of the payment.
pub(super) fn result(message: &str) -> Response {
    page(StatusCode::OK, &format!("<p id=\"result\">{}</p>\n", escape(message)))
}

/// The refusal, as a page with its status.
pub(super) fn failure(failure: &Failure) -> Response {
    page(failure.status, &format!("<p id=\"error\">{}</p>\n", escape(&failure.message)))
}

/// `303` to `location`, or None if it cannot be a header.
pub(super) fn redirect(location: &str) -> Option<Response> {
    let location = HeaderValue::from_str(location).ok()?;
    let mut response = warp::reply::with_status("", StatusCode::SEE_OTHER).into_response();
    response.headers_mut().insert(header::LOCATION, location);
    Some(response)
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
pub(super) fn escape(text: &str) -> String {
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
        assert!(redirect("http://shop/\n").is_none());
    }
}
