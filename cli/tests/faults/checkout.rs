//! Paying at the sandbox as a buyer would: on a checkout session (the
//! platform's, or a second one opened at the provider for the same order,
//! as a buyer with two tabs might), then reading back the payment intent
//! the session made, whose id is the payment's id in the log.

use reqwest::StatusCode;
use serde_json::Value;

use crate::cluster::SANDBOX_KEY;

/// The parameters of a checkout session paying `amount` for `order`, as the
/// platform opens one (the order in the session's and its intent's
/// metadata).
pub fn session_form(voucher: &str, order: &str, amount: u64) -> Vec<(&'static str, String)> {
    let expires = chrono::Utc::now().timestamp() + 31 * 60;
    vec![
        ("mode", "payment".to_owned()),
        ("line_items[0][price_data][currency]", "eur".to_owned()),
        ("line_items[0][price_data][unit_amount]", amount.to_string()),
        ("line_items[0][price_data][product_data][name]", "Voucher".to_owned()),
        ("line_items[0][quantity]", "1".to_owned()),
        ("client_reference_id", order.to_owned()),
        ("metadata[order_id]", order.to_owned()),
        ("metadata[voucher_id]", voucher.to_owned()),
        ("payment_intent_data[metadata][order_id]", order.to_owned()),
        ("payment_intent_data[metadata][voucher_id]", voucher.to_owned()),
        ("success_url", "http://127.0.0.1:9/sale".to_owned()),
        ("cancel_url", "http://127.0.0.1:9/sale".to_owned()),
        ("expires_at", expires.to_string()),
    ]
}

/// Opens a second session for `order` at the sandbox: its id.
pub async fn another_session(
    http: &reqwest::Client,
    sandbox: &str,
    voucher: &str,
    order: &str,
    amount: u64,
) -> Option<String> {
    let response = http
        .post(format!("{sandbox}/v1/checkout/sessions"))
        .bearer_auth(SANDBOX_KEY)
        .form(&session_form(voucher, order, amount))
        .send()
        .await
        .ok()?;
    if response.status() != StatusCode::OK {
        return None;
    }
    let session: Value = response.json().await.ok()?;
    session["id"].as_str().map(str::to_owned)
}

/// Pays `session` now: the intent it made (its charge expanded) when the
/// payment succeeded, None when the sandbox refused (the session closed).
pub async fn pay_session(http: &reqwest::Client, sandbox: &str, session: &str) -> Option<Value> {
    let paid = http.post(format!("{sandbox}/sandbox/checkout/sessions/{session}/pay")).send().await.ok()?;
    if paid.status() != StatusCode::OK {
        return None;
    }
    let read: Value = http
        .get(format!("{sandbox}/v1/checkout/sessions/{session}"))
        .query(&[("expand[]", "payment_intent.latest_charge")])
        .bearer_auth(SANDBOX_KEY)
        .send()
        .await
        .ok()?
        .json()
        .await
        .ok()?;
    let intent = read["payment_intent"].clone();
    (intent["status"] == "succeeded").then_some(intent)
}

/// The payment's id (`pi_…`): what the log and the view name.
pub fn intent_id(intent: &Value) -> &str {
    intent["id"].as_str().expect("an intent has an id")
}
