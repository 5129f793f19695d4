//! Reading `POST /v1/checkout/sessions` with Stripe's rules: the
//! parameters the platform sends and no others, one line item with inline
//! price data, `mode=payment`, an `expires_at` 30 minutes to 24 hours away.

use crate::clock::Moment;
use crate::failure::Failure;
use crate::ledger::{SessionRequest, MAX_AMOUNT};
use crate::params::Params;

use super::intents::{currency, is_http_url};

/// The parameters accepted (and `expand[]`).
pub(super) const ACCEPTED: &[&str] = &[
    "mode",
    CURRENCY,
    UNIT_AMOUNT,
    PRODUCT_NAME,
    QUANTITY,
    "success_url",
    "cancel_url",
    "client_reference_id",
    "metadata[*]",
    "payment_intent_data[metadata][*]",
    "expires_at",
];

const CURRENCY: &str = "line_items[0][price_data][currency]";
const UNIT_AMOUNT: &str = "line_items[0][price_data][unit_amount]";
const PRODUCT_NAME: &str = "line_items[0][price_data][product_data][name]";
const QUANTITY: &str = "line_items[0][quantity]";
/// Stripe's bound on `client_reference_id`.
const MAX_REFERENCE_CHARS: usize = 200;
/// The latest a session may expire after its creation: 24 hours.
const MAX_LIFETIME_SECONDS: i64 = 24 * 60 * 60;
/// Stripe's soonest: 30 minutes.
const STRIPE_MIN_LIFETIME_SECONDS: i64 = 30 * 60;

/// The session `params` ask for, created at `now`, lasting at least
/// `min_lifetime` seconds (Stripe's 30 minutes, unless a test lowered it).
pub(super) fn read(params: &Params, now: Moment, min_lifetime: i64) -> Result<SessionRequest, Failure> {
    match params.required("mode")? {
        "payment" => {}
        "setup" | "subscription" => {
            return Err(Failure::param("parameter_invalid", "mode", "The sandbox supports mode=payment only."))
        }
        other => {
            return Err(Failure::param(
                "parameter_invalid",
                "mode",
                format!("Invalid mode: {other}; must be one of payment, setup, or subscription"),
            ))
        }
    }
    let currency = currency(params, CURRENCY)?;
    let unit_amount = integer(params, UNIT_AMOUNT)?;
    let quantity = integer(params, QUANTITY)?;
    if quantity == 0 {
        return Err(Failure::param(
            "parameter_invalid_integer",
            QUANTITY,
            "This value must be greater than or equal to 1.",
        ));
    }
    let amount_total = unit_amount.checked_mul(quantity).filter(|total| *total <= MAX_AMOUNT).ok_or_else(|| {
        Failure::invalid(
            "amount_too_large",
            format!("The Checkout Session's total amount due must be no more than {MAX_AMOUNT}."),
        )
    })?;
    if amount_total == 0 {
        return Err(Failure::invalid(
            "amount_too_small",
            "The Checkout Session's total amount due must be greater than 0.",
        ));
    }
    let product_name = params.required(PRODUCT_NAME)?;
    if product_name.trim().is_empty() {
        return Err(Failure::param("parameter_invalid_empty", PRODUCT_NAME, "The product name cannot be empty."));
    }
    let client_reference_id = params.get("client_reference_id").filter(|reference| !reference.is_empty());
    if client_reference_id.is_some_and(|reference| reference.chars().count() > MAX_REFERENCE_CHARS) {
        return Err(Failure::param(
            "parameter_invalid",
            "client_reference_id",
            format!("client_reference_id can have up to {MAX_REFERENCE_CHARS} characters."),
        ));
    }
    Ok(SessionRequest {
        amount_total,
        currency,
        product_name: product_name.to_owned(),
        success_url: url(params, "success_url")?.ok_or_else(|| {
            Failure::param("parameter_missing", "success_url", "Missing required param: success_url.")
        })?,
        cancel_url: url(params, "cancel_url")?,
        client_reference_id: client_reference_id.map(str::to_owned),
        metadata: params.metadata()?,
        intent_metadata: params.map("payment_intent_data[metadata]")?,
        expires_at: expires_at(params, now, min_lifetime)?,
    })
}

/// A required whole number.
fn integer(params: &Params, name: &str) -> Result<u64, Failure> {
    params
        .required(name)?
        .parse()
        .map_err(|_| Failure::param("parameter_invalid_integer", name, format!("Invalid integer: {name}")))
}

/// An optional http(s) URL.
fn url(params: &Params, name: &str) -> Result<Option<String>, Failure> {
    match params.get(name) {
        Some(url) if !is_http_url(url) => Err(Failure::param("url_invalid", name, "Not a valid URL")),
        url => Ok(url.map(str::to_owned)),
    }
}

/// `expires_at`, checked against the creation time as Stripe checks it;
/// 24 hours from `now` when not given.
fn expires_at(params: &Params, now: Moment, min_lifetime: i64) -> Result<i64, Failure> {
    let Some(expires_at) = params.get("expires_at") else {
        return Ok(now.secs() + MAX_LIFETIME_SECONDS);
    };
    let expires_at: i64 = expires_at
        .parse()
        .map_err(|_| Failure::param("parameter_invalid_integer", "expires_at", "Invalid integer: expires_at"))?;
    let lifetime = expires_at.saturating_sub(now.secs());
    if lifetime < min_lifetime {
        let at_least = if min_lifetime == STRIPE_MIN_LIFETIME_SECONDS {
            "30 minutes".to_owned()
        } else {
            format!("{min_lifetime} seconds (the sandbox's min_session_seconds)")
        };
        return Err(Failure::param(
            "parameter_invalid",
            "expires_at",
            format!("The `expires_at` timestamp must be at least {at_least} from Checkout Session creation."),
        ));
    }
    if lifetime > MAX_LIFETIME_SECONDS {
        return Err(Failure::param(
            "parameter_invalid",
            "expires_at",
            "The `expires_at` timestamp must be less than 24 hours from Checkout Session creation.",
        ));
    }
    Ok(expires_at)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: Moment = Moment::from_secs(1_700_000_000);

    fn params(changes: &[(&str, Option<&str>)]) -> Params {
        let mut pairs: Vec<(String, String)> = [
            ("mode", "payment"),
            (CURRENCY, "EUR"),
            (UNIT_AMOUNT, "1250"),
            (PRODUCT_NAME, "Voucher"),
            (QUANTITY, "2"),
            ("success_url", "https://shop.test/ok?session={CHECKOUT_SESSION_ID}"),
            ("cancel_url", "https://shop.test/back"),
            ("client_reference_id", "o-1"),
            ("metadata[order_id]", "o-1"),
            ("payment_intent_data[metadata][order_id]", "o-1"),
        ]
        .iter()
        .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
        .collect();
        for (name, value) in changes {
            pairs.retain(|(existing, _)| existing != name);
            if let Some(value) = value {
                pairs.push(((*name).to_owned(), (*value).to_owned()));
            }
        }
        Params::parse(pairs, ACCEPTED).expect("known names")
    }

    fn refusal(changes: &[(&str, Option<&str>)]) -> (Option<&'static str>, String) {
        let failure = read(&params(changes), NOW, 1_800).expect_err("refused");
        (failure.code, failure.message)
    }

    #[test]
    fn a_platform_session_is_read_with_a_day_by_default() {
        let request = read(&params(&[]), NOW, 1_800).expect("valid");
        assert_eq!((request.amount_total, request.currency.as_str()), (2_500, "eur"));
        assert_eq!(request.expires_at, NOW.secs() + 86_400);
        assert_eq!(request.client_reference_id.as_deref(), Some("o-1"));
        assert_eq!(request.intent_metadata.get("order_id").map(String::as_str), Some("o-1"));
        let at = (NOW.secs() + 1_800).to_string();
        assert_eq!(
            read(&params(&[("expires_at", Some(&at))]), NOW, 1_800).expect("valid").expires_at,
            NOW.secs() + 1_800
        );
    }

    #[test]
    fn stripes_bounds_are_kept() {
        let soon = (NOW.secs() + 1_799).to_string();
        let (code, message) = refusal(&[("expires_at", Some(&soon))]);
        assert_eq!(code, Some("parameter_invalid"));
        assert_eq!(message, "The `expires_at` timestamp must be at least 30 minutes from Checkout Session creation.");
        let late = (NOW.secs() + 86_401).to_string();
        assert!(refusal(&[("expires_at", Some(&late))]).1.contains("less than 24 hours"));
        assert_eq!(refusal(&[(UNIT_AMOUNT, Some("50000000"))]).0, Some("amount_too_large"));
        assert_eq!(refusal(&[(UNIT_AMOUNT, Some("0"))]).0, Some("amount_too_small"));
        assert_eq!(refusal(&[(QUANTITY, Some("0"))]).0, Some("parameter_invalid_integer"));
        assert_eq!(refusal(&[(UNIT_AMOUNT, Some(&u64::MAX.to_string()))]).0, Some("amount_too_large"));
        assert_eq!(refusal(&[("mode", Some("subscription"))]).0, Some("parameter_invalid"));
        assert_eq!(refusal(&[("mode", None)]).0, Some("parameter_missing"));
        assert_eq!(refusal(&[("success_url", None)]).0, Some("parameter_missing"));
        assert_eq!(refusal(&[("cancel_url", Some("javascript:alert(1)"))]).0, Some("url_invalid"));
        assert_eq!(refusal(&[(CURRENCY, Some("euro"))]).0, Some("parameter_invalid"));
        let request = read(&params(&[("expires_at", Some(&(NOW.secs() + 2).to_string()))]), NOW, 1);
        assert!(request.is_ok(), "a test may ask for a short session");
    }
}
