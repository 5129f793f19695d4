//! What the payment provider holds for a sale, for `audit --payments-url`:
//! every payment the log names, retrieved by id, and every intent of each
//! of its orders, found by searching the provider by order (so a payment
//! the log never heard of shows up).
//!
//! The calls are made here, at most [`MAX_CALLS_IN_FLIGHT`] at a time, and
//! their answers kept as plain [`ProviderFigures`]; the rule
//! (`provider_agrees`) is a pure function of the log and those figures.

use std::collections::BTreeMap;
use std::time::Duration;

use seckill_core::ids::OrderId;
use seckill_core::money::Currency;
use seckill_payments::{ChargeRef, IntentStatus, PaymentIntent, Provider, ProviderError, ProviderSettings};
use tokio::task::JoinSet;

use crate::sale::VoucherLog;
use crate::AnalyticsError;

/// Most provider calls in flight at once: an audit must not look like an
/// attack to the provider's rate limits.
pub const MAX_CALLS_IN_FLIGHT: usize = 8;
/// How long one call may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// Attempts of a call the provider refused for a passing reason (rate
/// limited, failing, unreachable).
const ATTEMPTS: u32 = 3;
/// First pause before a retry; doubles after each.
const FIRST_RETRY: Duration = Duration::from_millis(250);

/// One intent as the provider answered it: the fields the audit compares.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProviderIntent {
    /// `pi_…`: the log's `payment_id`.
    pub id: String,
    /// The order its metadata names.
    pub order_id: Option<String>,
    /// `succeeded`, `canceled`, `requires_payment_method`, …
    pub status: String,
    /// Minor units.
    pub amount: u64,
    /// None when the provider's code is not a currency.
    pub currency: Option<Currency>,
    /// `latest_charge.amount_refunded`; None without an expanded charge.
    pub amount_refunded: Option<u64>,
}

impl ProviderIntent {
    /// Whether the provider took the money.
    pub fn succeeded(&self) -> bool {
        self.status == IntentStatus::Succeeded.as_str()
    }
}

impl From<&PaymentIntent> for ProviderIntent {
    fn from(intent: &PaymentIntent) -> Self {
        let amount_refunded = match &intent.latest_charge {
            Some(ChargeRef::Expanded(charge)) => Some(charge.amount_refunded),
            Some(ChargeRef::Id(_)) => None,
            None => Some(0),
        };
        Self {
            id: intent.id.clone(),
            order_id: intent.order_id().map(str::to_owned),
            status: intent.status.as_str().to_owned(),
            amount: intent.amount,
            currency: Currency::parse(&intent.currency).ok(),
            amount_refunded,
        }
    }
}

/// The provider's answers about one sale.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProviderFigures {
    /// Every payment id the log names, as retrieved; None: the provider
    /// does not know it.
    pub retrieved: BTreeMap<String, Option<ProviderIntent>>,
    /// Every intent found by searching each order of the sale.
    pub by_order: BTreeMap<OrderId, Vec<ProviderIntent>>,
}

/// A provider the audit asks.
#[derive(Clone, Debug)]
pub struct ProviderSource {
    provider: Provider,
}

/// One call to make.
enum Call {
    Retrieve(String),
    Search(OrderId),
}

impl ProviderSource {
    /// The Stripe-shaped provider at `base_url` (`https://api.stripe.com`,
    /// or a sandbox), authenticated with `api_key`.
    pub fn connect(base_url: &str, api_key: &str) -> Result<Self, AnalyticsError> {
        let settings =
            ProviderSettings { base_url: base_url.to_owned(), api_key: api_key.to_owned(), timeout: CALL_TIMEOUT };
        let provider = Provider::new(settings).map_err(provider_error("the payment provider's settings"))?;
        Ok(Self { provider })
    }

    /// What the provider holds for `log`'s payments and orders (nothing is
    /// asked for a sale that takes no money). Fails on the first call that
    /// fails after its retries, other than "no such payment".
    pub async fn figures(&self, log: &VoucherLog) -> Result<ProviderFigures, AnalyticsError> {
        let mut figures = ProviderFigures::default();
        if !log.takes_payments() {
            return Ok(figures);
        }
        let mut orders: Vec<OrderId> = log
            .orders
            .iter()
            .filter(|(_, order)| order.amount > 0)
            .map(|(id, _)| *id)
            .chain(log.payments.values().filter_map(|payment| payment.order_id))
            .collect();
        orders.sort_unstable();
        orders.dedup();
        let mut calls = log.payments.keys().cloned().map(Call::Retrieve).chain(orders.into_iter().map(Call::Search));
        let mut in_flight: JoinSet<Result<Answer, (String, ProviderError)>> = JoinSet::new();
        loop {
            while in_flight.len() < MAX_CALLS_IN_FLIGHT {
                let Some(call) = calls.next() else { break };
                let provider = self.provider.clone();
                in_flight.spawn(async move { ask(&provider, call).await });
            }
            // Dropping the set on an error aborts the calls still running.
            match in_flight.join_next().await {
                None => break,
                Some(Ok(Ok(answer))) => figures.record(answer),
                Some(Ok(Err((what, error)))) => return Err(provider_error(what)(error)),
                Some(Err(error)) => return Err(AnalyticsError::Task(error.to_string())),
            }
        }
        Ok(figures)
    }
}

/// What one call found.
enum Answer {
    Retrieved(String, Option<ProviderIntent>),
    Found(OrderId, Vec<ProviderIntent>),
}

impl ProviderFigures {
    fn record(&mut self, answer: Answer) {
        match answer {
            Answer::Retrieved(id, intent) => {
                self.retrieved.insert(id, intent);
            }
            Answer::Found(order, intents) => {
                self.by_order.insert(order, intents);
            }
        }
    }
}

/// Makes `call`, retrying passing refusals; a payment the provider does
/// not know is an answer (None), not an error.
async fn ask(provider: &Provider, call: Call) -> Result<Answer, (String, ProviderError)> {
    let mut pause = FIRST_RETRY;
    let mut attempt = 1;
    loop {
        let result = match &call {
            Call::Retrieve(id) => match provider.retrieve(id).await {
                Ok(intent) => Ok(Answer::Retrieved(id.clone(), Some(ProviderIntent::from(&intent)))),
                Err(ProviderError::Api { status: 404, .. }) => Ok(Answer::Retrieved(id.clone(), None)),
                Err(error) => Err((format!("retrieving payment {id}"), error)),
            },
            Call::Search(order) => match provider.intents_for_order(&order.to_string()).await {
                Ok(intents) => Ok(Answer::Found(*order, intents.iter().map(ProviderIntent::from).collect())),
                Err(error) => Err((format!("searching the payments of order {order}"), error)),
            },
        };
        match result {
            Err((_, error)) if error.is_retryable() && attempt < ATTEMPTS => {
                tracing::debug!(%error, attempt, "Provider call failed; retrying.");
                tokio::time::sleep(pause).await;
                pause *= 2;
                attempt += 1;
            }
            result => return result,
        }
    }
}

/// Maps a provider's error to one naming what was being done.
fn provider_error(what: impl Into<String>) -> impl FnOnce(ProviderError) -> AnalyticsError {
    let what = what.into();
    move |error| AnalyticsError::Live { what, reason: error.to_string() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intents_keep_what_the_audit_compares() {
        let json = serde_json::json!({
            "id": "pi_1", "object": "payment_intent", "amount": 1250, "currency": "eur", "status": "succeeded",
            "metadata": {"order_id": "o-1"}, "created": 1,
            "latest_charge": {"id": "ch_1", "amount": 1250, "created": 2, "refunded": true, "amount_refunded": 1250}
        });
        let intent: PaymentIntent = serde_json::from_value(json).expect("an intent");
        let kept = ProviderIntent::from(&intent);
        assert!(kept.succeeded());
        assert_eq!(kept.currency, Some(Currency::parse("EUR").expect("valid")));
        assert_eq!((kept.amount, kept.amount_refunded, kept.order_id.as_deref()), (1250, Some(1250), Some("o-1")));
        let collapsed = PaymentIntent { latest_charge: Some(ChargeRef::Id("ch_1".to_owned())), ..intent.clone() };
        assert_eq!(ProviderIntent::from(&collapsed).amount_refunded, None, "unknown without the charge");
        let unpaid = PaymentIntent { latest_charge: None, status: IntentStatus::Canceled, ..intent };
        let unpaid = ProviderIntent::from(&unpaid);
        assert!(!unpaid.succeeded());
        assert_eq!(unpaid.amount_refunded, Some(0));
    }
}
