//! The calls the platform makes to a Stripe-shaped provider.
//!
//! Requests are form-encoded with a bearer key, as Stripe's API wants, and
//! pinned to one API version ([`STRIPE_VERSION`]) so every answer has the
//! shape [`crate::types`] reads whatever the account's default version is.
//! Every call that creates something carries an `Idempotency-Key`, so a
//! retry after a lost answer returns the first result instead of paying or
//! refunding twice. `expire_checkout` and `refund` resolve the provider's
//! "already done" refusals into the final object, so the caller learns the
//! outcome whatever happened before (a buyer who paid just before the
//! session was expired, a refund made by an earlier attempt).
//!
//! The buyer pays on a Stripe Checkout Session: a hosted page, so the sale
//! page needs no Stripe.js. Stripe creates the session's payment intent
//! only when the buyer pays, so the session, not an intent, is the object
//! the platform creates, records and closes.

use std::fmt;
use std::time::Duration;

use reqwest::{RequestBuilder, Url};
use serde::de::DeserializeOwned;

use crate::types::{CheckoutSession, ErrorBody, List, PaymentIntent, Refund, SessionStatus, ORDER_ID_KEY};

/// The Stripe API version every call is pinned to (`Stripe-Version`):
/// `latest_charge`, sessions whose intent exists only once paid, and the
/// event shapes the platform reads are those of this version.
pub const STRIPE_VERSION: &str = "2024-06-20";
/// Stripe's largest amount in a currency's smallest unit (eight digits):
/// a charge above it is refused, so an order above it could never be paid.
pub const MAX_AMOUNT: u64 = 99_999_999;
/// The soonest a Checkout Session may expire by itself, after its
/// creation: 30 minutes. A shorter payment window is closed by the
/// platform expiring the session ([`Provider::expire_checkout`]).
pub const MIN_SESSION_SECONDS: i64 = 30 * 60;
/// The latest a Checkout Session may expire, after its creation: 24 hours.
pub const MAX_SESSION_SECONDS: i64 = 24 * 60 * 60;
/// The expansion that gives a session's intent and its charge, whose
/// `created` is the payment's time and `amount_received` its amount.
const SESSION_EXPAND: &str = "payment_intent.latest_charge";
/// Refusal code for refunding a charge a refund already covers.
const ALREADY_REFUNDED: &str = "charge_already_refunded";
/// Pages of one order's search read at most: an order has one intent, a
/// few if its checkout was restarted, so more is a provider gone wrong.
const MAX_SEARCH_PAGES: usize = 5;
/// Largest answer read: a page of 100 intents is well below it, and a
/// broken provider cannot make us buffer without end.
const MAX_RESPONSE_BYTES: usize = 1024 * 1024;

/// Where the provider is and how we authenticate.
#[derive(Clone)]
pub struct ProviderSettings {
    /// `https://api.stripe.com` or the sandbox's address; `/v1/…` is
    /// appended.
    pub base_url: String,
    /// The secret key, sent as a bearer token.
    pub api_key: String,
    /// How long one call may take, connecting included.
    pub timeout: Duration,
}

impl fmt::Debug for ProviderSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProviderSettings")
            .field("base_url", &self.base_url)
            .field("api_key", &"[redacted]")
            .field("timeout", &self.timeout)
            .finish()
    }
}

/// The hosted checkout the platform opens for one order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewCheckout {
    /// One unit's price, in the currency's smallest unit.
    pub unit_amount: u64,
    /// Units bought.
    pub quantity: u32,
    /// ISO 4217; sent lowercased.
    pub currency: String,
    /// What the buyer sees on the page: the voucher's title.
    pub title: String,
    pub order_id: String,
    pub voucher_id: String,
    /// Where the page sends the buyer after paying; Stripe replaces
    /// `{CHECKOUT_SESSION_ID}` in it.
    pub success_url: String,
    /// Where the page's back link goes.
    pub cancel_url: String,
    /// Unix seconds: when the provider expires the session by itself,
    /// between [`MIN_SESSION_SECONDS`] and [`MAX_SESSION_SECONDS`] from now.
    pub expires_at: i64,
}

impl NewCheckout {
    /// What the buyer pays in all; None when it overflows.
    pub fn amount_total(&self) -> Option<u64> {
        self.unit_amount.checked_mul(u64::from(self.quantity))
    }
}

/// Why a call to the provider failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProviderError {
    #[error("the provider's settings are invalid: {0}")]
    Settings(String),
    #[error("could not reach the payment provider: {0}")]
    Transport(String),
    #[error("the payment provider refused the call ({status}{}): {message}", code.as_deref().map(|c| format!(", {c}")).unwrap_or_default())]
    Api { status: u16, code: Option<String>, message: String },
    #[error("the payment provider's answer could not be read: {0}")]
    Decode(String),
}

impl ProviderError {
    /// Whether the same call may succeed later: the provider was not
    /// reached or was failing, rate limited us, or was still working on
    /// the same idempotency key.
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Transport(_) => true,
            Self::Api { status, .. } => *status >= 500 || *status == 429 || *status == 409,
            Self::Settings(_) | Self::Decode(_) => false,
        }
    }

    /// The HTTP status of a refusal.
    pub fn status(&self) -> Option<u16> {
        match self {
            Self::Api { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// The provider's refusal code, if it gave one.
    pub fn code(&self) -> Option<&str> {
        match self {
            Self::Api { code, .. } => code.as_deref(),
            _ => None,
        }
    }
}

/// A client of one provider account; cheap to clone (one connection pool).
#[derive(Clone)]
pub struct Provider {
    http: reqwest::Client,
    base: Url,
    api_key: String,
}

impl fmt::Debug for Provider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Provider").field("base", &self.base.as_str()).field("api_key", &"[redacted]").finish()
    }
}

impl Provider {
    /// A client for `settings`; fails on a base URL that is not http(s).
    pub fn new(settings: ProviderSettings) -> Result<Self, ProviderError> {
        let base = Url::parse(&settings.base_url)
            .map_err(|error| ProviderError::Settings(format!("base_url `{}`: {error}", settings.base_url)))?;
        if !matches!(base.scheme(), "http" | "https") || base.cannot_be_a_base() {
            return Err(ProviderError::Settings(format!("base_url `{}` is not an http(s) URL", settings.base_url)));
        }
        let http = reqwest::Client::builder()
            .timeout(settings.timeout)
            .build()
            .map_err(|error| ProviderError::Settings(describe(&error)))?;
        Ok(Self { http, base, api_key: settings.api_key })
    }

    /// Whether the key is a live-mode key (`sk_live_…`, `rk_live_…`):
    /// events and objects of the other mode are not this platform's.
    pub fn livemode(&self) -> bool {
        is_live_key(&self.api_key)
    }

    /// Opens the hosted checkout paying for one order; the same
    /// `idempotency_key` returns the session created first (for 24 hours,
    /// Stripe's memory: the caller keeps its own record beyond that).
    pub async fn create_checkout(
        &self,
        request: &NewCheckout,
        idempotency_key: &str,
    ) -> Result<CheckoutSession, ProviderError> {
        let form = vec![
            ("mode", "payment".to_owned()),
            ("line_items[0][price_data][currency]", request.currency.to_ascii_lowercase()),
            ("line_items[0][price_data][unit_amount]", request.unit_amount.to_string()),
            ("line_items[0][price_data][product_data][name]", request.title.clone()),
            ("line_items[0][quantity]", request.quantity.to_string()),
            ("client_reference_id", request.order_id.clone()),
            // Stripe's form encoding of map entries: `metadata[<key>]` (the
            // keys are `ORDER_ID_KEY` and `VOUCHER_ID_KEY`); the intent
            // Stripe creates when the buyer pays carries them too, so a
            // payment alone names its order.
            ("metadata[order_id]", request.order_id.clone()),
            ("metadata[voucher_id]", request.voucher_id.clone()),
            ("payment_intent_data[metadata][order_id]", request.order_id.clone()),
            ("payment_intent_data[metadata][voucher_id]", request.voucher_id.clone()),
            ("success_url", request.success_url.clone()),
            ("cancel_url", request.cancel_url.clone()),
            ("expires_at", request.expires_at.to_string()),
        ];
        let call = self.http.post(self.url(&["v1", "checkout", "sessions"])).form(&form);
        self.call(call.header("Idempotency-Key", idempotency_key)).await
    }

    /// The session as the provider has it now, its intent and charge
    /// expanded once there is one.
    pub async fn retrieve_checkout(&self, id: &str) -> Result<CheckoutSession, ProviderError> {
        let call = self.http.get(self.url(&["v1", "checkout", "sessions", id])).query(&[("expand[]", SESSION_EXPAND)]);
        self.call(call).await
    }

    /// Expires an open session, so it can never be paid, and returns its
    /// final state: `expired`, or `complete` when the buyer paid first.
    pub async fn expire_checkout(&self, id: &str) -> Result<CheckoutSession, ProviderError> {
        let call = self
            .http
            .post(self.url(&["v1", "checkout", "sessions", id, "expire"]))
            .form(&[("expand[]", SESSION_EXPAND)]);
        match self.call::<CheckoutSession>(call).await {
            // Refused because it is no longer open (paid, or expired by
            // itself): reading it now gives the state it will keep.
            Err(error) if error.status() == Some(400) => {
                let session = self.retrieve_checkout(id).await?;
                if session.status == SessionStatus::Open {
                    return Err(error);
                }
                tracing::debug!(
                    session = id,
                    status = session.status.as_str(),
                    "Session was already closed when expired."
                );
                Ok(session)
            }
            result => result,
        }
    }

    /// The intent as the provider has it now, with its charge expanded.
    pub async fn retrieve(&self, id: &str) -> Result<PaymentIntent, ProviderError> {
        let call = self.http.get(self.url(&["v1", "payment_intents", id])).query(&[("expand[]", "latest_charge")]);
        self.call(call).await
    }

    /// Every intent created for `order_id` (normally one), charges
    /// expanded; stops after a few pages.
    pub async fn intents_for_order(&self, order_id: &str) -> Result<Vec<PaymentIntent>, ProviderError> {
        let query = format!("metadata['{ORDER_ID_KEY}']:'{}'", quote(order_id));
        let mut found = Vec::new();
        let mut page: Option<String> = None;
        for _ in 0..MAX_SEARCH_PAGES {
            let mut params = vec![
                ("query", query.clone()),
                ("limit", "100".to_owned()),
                ("expand[]", "data.latest_charge".to_owned()),
            ];
            if let Some(page) = page.take() {
                params.push(("page", page));
            }
            let call = self.http.get(self.url(&["v1", "payment_intents", "search"])).query(&params);
            let list: List<PaymentIntent> = self.call(call).await?;
            found.extend(list.data);
            match list.next_page {
                Some(next) if list.has_more => page = Some(next),
                _ => return Ok(found),
            }
        }
        tracing::warn!(order_id, pages = MAX_SEARCH_PAGES, "Searching an order's intents stopped at the page bound.");
        Ok(found)
    }

    /// Refunds the whole of a succeeded intent and returns the refund; when
    /// an earlier call (under any key) already refunded it, returns that
    /// refund.
    pub async fn refund(&self, payment_intent: &str, idempotency_key: &str) -> Result<Refund, ProviderError> {
        let call = self
            .http
            .post(self.url(&["v1", "refunds"]))
            .form(&[("payment_intent", payment_intent)])
            .header("Idempotency-Key", idempotency_key);
        match self.call::<Refund>(call).await {
            Err(error) if error.code() == Some(ALREADY_REFUNDED) => match self.live_refund(payment_intent).await? {
                Some(refund) => Ok(refund),
                None => Err(error),
            },
            result => result,
        }
    }

    /// Every refund of a payment (newest first, as Stripe lists them).
    pub async fn refunds_of(&self, payment_intent: &str) -> Result<Vec<Refund>, ProviderError> {
        let call =
            self.http.get(self.url(&["v1", "refunds"])).query(&[("payment_intent", payment_intent), ("limit", "100")]);
        let refunds: List<Refund> = self.call(call).await?;
        Ok(refunds.data)
    }

    /// The payment's refund that is done or under way (`succeeded` or
    /// `pending`), if any: the one a new refund must not repeat.
    pub async fn live_refund(&self, payment_intent: &str) -> Result<Option<Refund>, ProviderError> {
        let mut refunds = self.refunds_of(payment_intent).await?;
        let live = refunds.iter().position(|refund| !matches!(refund.status.as_str(), "failed" | "canceled"));
        Ok(live.map(|index| refunds.swap_remove(index)))
    }

    /// One refund as the provider has it now (`pending` turns
    /// `succeeded` or `failed`).
    pub async fn retrieve_refund(&self, id: &str) -> Result<Refund, ProviderError> {
        self.call(self.http.get(self.url(&["v1", "refunds", id]))).await
    }

    fn url(&self, segments: &[&str]) -> Url {
        let mut url = self.base.clone();
        // `new` refused URLs that cannot be a base, the only failure here.
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty().extend(segments);
        }
        url
    }

    async fn call<T: DeserializeOwned>(&self, request: RequestBuilder) -> Result<T, ProviderError> {
        let request = request.bearer_auth(&self.api_key).header("Stripe-Version", STRIPE_VERSION);
        let mut response = request.send().await.map_err(|e| transport(&e))?;
        let status = response.status();
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| transport(&e))? {
            if body.len() + chunk.len() > MAX_RESPONSE_BYTES {
                return Err(ProviderError::Decode(format!("answer larger than {MAX_RESPONSE_BYTES} bytes")));
            }
            body.extend_from_slice(&chunk);
        }
        if status.is_success() {
            return serde_json::from_slice(&body).map_err(|error| ProviderError::Decode(error.to_string()));
        }
        Err(match serde_json::from_slice::<ErrorBody>(&body) {
            Ok(refusal) => {
                ProviderError::Api { status: status.as_u16(), code: refusal.error.code, message: refusal.error.message }
            }
            Err(_) => ProviderError::Api {
                status: status.as_u16(),
                code: None,
                message: String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned(),
            },
        })
    }
}

/// Whether a secret or restricted key is a live-mode one.
fn is_live_key(key: &str) -> bool {
    key.starts_with("sk_live_") || key.starts_with("rk_live_")
}

/// Escapes a value for a quoted string of Stripe's search language.
fn quote(value: &str) -> String {
    value.replace('\\', "\\\\").replace('\'', "\\'")
}

fn transport(error: &reqwest::Error) -> ProviderError {
    ProviderError::Transport(describe(error))
}

/// The error and its causes: reqwest's own message omits them.
fn describe(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_transient_failures_are_retryable() {
        let api = |status, code: Option<&str>| ProviderError::Api {
            status,
            code: code.map(str::to_owned),
            message: String::new(),
        };
        assert!(ProviderError::Transport("reset".to_owned()).is_retryable());
        assert!(api(500, None).is_retryable());
        assert!(api(429, Some("rate_limit")).is_retryable());
        assert!(api(409, Some("idempotency_key_in_use")).is_retryable());
        assert!(!api(400, Some(ALREADY_REFUNDED)).is_retryable());
        assert!(!api(401, None).is_retryable());
        assert!(!ProviderError::Decode("eof".to_owned()).is_retryable());
    }

    #[test]
    fn paths_are_appended_to_the_base_and_keys_never_print() {
        let settings = ProviderSettings {
            base_url: "http://127.0.0.1:8090/".to_owned(),
            api_key: "sk_test_secret".to_owned(),
            timeout: Duration::from_secs(1),
        };
        let provider = Provider::new(settings.clone()).expect("valid");
        assert_eq!(
            provider.url(&["v1", "payment_intents", "pi_1"]).as_str(),
            "http://127.0.0.1:8090/v1/payment_intents/pi_1"
        );
        assert!(!format!("{provider:?}{settings:?}").contains("sk_test_secret"));
        let bad = ProviderSettings { base_url: "mailto:x@y".to_owned(), ..settings };
        assert!(matches!(Provider::new(bad), Err(ProviderError::Settings(_))));
    }

    #[test]
    fn the_mode_is_the_keys() {
        assert!(is_live_key("sk_live_abc") && is_live_key("rk_live_abc"));
        assert!(!is_live_key("sk_test_abc") && !is_live_key("sandbox-key"));
    }

    #[test]
    fn search_values_are_quoted() {
        assert_eq!(quote(r"it's a\b"), r"it\'s a\\b");
    }
}
