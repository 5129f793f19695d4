//! The calls the platform makes to a Stripe-shaped provider.
//!
//! Requests are form-encoded with a bearer key, as Stripe's API wants;
//! every call that creates something carries an `Idempotency-Key`, so a
//! retry after a lost answer returns the first result instead of paying or
//! refunding twice. `cancel` and `refund` resolve the provider's "already
//! done" refusals into the final object, so the caller learns the outcome
//! whatever happened before (a payment that won the race with a cancel, a
//! refund made by an earlier attempt).

use std::fmt;
use std::time::Duration;

use reqwest::{RequestBuilder, Url};
use serde::de::DeserializeOwned;

use crate::types::{ErrorBody, List, PaymentIntent, Refund, ORDER_ID_KEY};

/// Refusal code for acting on an intent in a state that forbids it
/// (cancelling a succeeded one, paying a canceled one).
const UNEXPECTED_STATE: &str = "payment_intent_unexpected_state";
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

/// What the platform asks a provider to collect for one order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewIntent {
    /// In the currency's smallest unit.
    pub amount: u64,
    /// ISO 4217; sent lowercased.
    pub currency: String,
    pub order_id: String,
    pub voucher_id: String,
    /// Where the checkout sends the buyer back.
    pub return_url: Option<String>,
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

    /// Creates the intent paying for one order; the same `idempotency_key`
    /// returns the intent created first.
    pub async fn create_intent(
        &self,
        request: &NewIntent,
        idempotency_key: &str,
    ) -> Result<PaymentIntent, ProviderError> {
        let mut form = vec![
            ("amount", request.amount.to_string()),
            ("currency", request.currency.to_ascii_lowercase()),
            // Stripe's form encoding of map entries: `metadata[<key>]`.
            ("metadata[order_id]", request.order_id.clone()),
            ("metadata[voucher_id]", request.voucher_id.clone()),
            ("expand[]", "latest_charge".to_owned()),
        ];
        if let Some(return_url) = &request.return_url {
            form.push(("return_url", return_url.clone()));
        }
        let call = self.http.post(self.url(&["v1", "payment_intents"])).form(&form);
        self.call(call.header("Idempotency-Key", idempotency_key)).await
    }

    /// The intent as the provider has it now, with its charge expanded.
    pub async fn retrieve(&self, id: &str) -> Result<PaymentIntent, ProviderError> {
        let call = self.http.get(self.url(&["v1", "payment_intents", id])).query(&[("expand[]", "latest_charge")]);
        self.call(call).await
    }

    /// Cancels the intent, so it can never be paid, and returns its final
    /// state: `canceled`, or `succeeded` when the buyer paid first.
    pub async fn cancel(&self, id: &str) -> Result<PaymentIntent, ProviderError> {
        let call =
            self.http.post(self.url(&["v1", "payment_intents", id, "cancel"])).form(&[("expand[]", "latest_charge")]);
        match self.call(call).await {
            Err(error) if error.code() == Some(UNEXPECTED_STATE) => {
                // Already succeeded or already canceled: both final, so
                // reading it now gives the state it will keep.
                tracing::debug!(intent = id, "Intent was already final when cancelled; reading it.");
                self.retrieve(id).await
            }
            result => result,
        }
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
            Err(error) if error.code() == Some(ALREADY_REFUNDED) => {
                let call = self.http.get(self.url(&["v1", "refunds"])).query(&[("payment_intent", payment_intent)]);
                let refunds: List<Refund> = self.call(call).await?;
                let mut refunds = refunds.data;
                let live = refunds.iter().position(|refund| !matches!(refund.status.as_str(), "failed" | "canceled"));
                match live {
                    Some(index) => Ok(refunds.swap_remove(index)),
                    None => Err(error),
                }
            }
            result => result,
        }
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
        let mut response = request.bearer_auth(&self.api_key).send().await.map_err(|e| transport(&e))?;
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
        assert!(!api(400, Some(UNEXPECTED_STATE)).is_retryable());
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
    fn search_values_are_quoted() {
        assert_eq!(quote(r"it's a\b"), r"it\'s a\\b");
    }
}
