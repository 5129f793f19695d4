//! The provider's JSON, shaped like Stripe's: a provider answers these and
//! the sandbox produces them, so both sides share one definition.
//!
//! Only the fields the platform reads are typed; serde ignores the rest, so
//! a real provider's richer objects decode too. Fields a provider may omit
//! default, and an unknown intent status decodes as
//! [`IntentStatus::Unknown`] rather than failing a whole webhook.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Metadata key naming the platform's order an intent pays for.
pub const ORDER_ID_KEY: &str = "order_id";
/// Metadata key naming the voucher of that order.
pub const VOUCHER_ID_KEY: &str = "voucher_id";

/// One attempt to collect an amount: the platform creates one per order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PaymentIntent {
    /// `pi_…`.
    pub id: String,
    /// Always `"payment_intent"`.
    pub object: String,
    /// In the currency's smallest unit (cents).
    pub amount: u64,
    /// What the provider actually took: the amount a payment is judged
    /// by (0 until it succeeds).
    #[serde(default)]
    pub amount_received: u64,
    /// Lowercase ISO 4217 code, as Stripe writes it.
    pub currency: String,
    pub status: IntentStatus,
    /// Carries the order and voucher ids, so an event alone names its order.
    #[serde(default)]
    pub metadata: BTreeMap<String, String>,
    /// Unix seconds.
    pub created: i64,
    /// Unix seconds, once canceled.
    #[serde(default)]
    pub canceled_at: Option<i64>,
    /// The charge that paid it; an object when requested expanded.
    #[serde(default)]
    pub latest_charge: Option<ChargeRef>,
    /// Where the buyer must go to pay, while they must.
    #[serde(default)]
    pub next_action: Option<NextAction>,
    /// Whether the live or the test mode of the account made it.
    #[serde(default)]
    pub livemode: bool,
}

impl PaymentIntent {
    /// The platform's order id from the metadata.
    pub fn order_id(&self) -> Option<&str> {
        self.metadata.get(ORDER_ID_KEY).map(String::as_str)
    }

    /// The voucher id from the metadata.
    pub fn voucher_id(&self) -> Option<&str> {
        self.metadata.get(VOUCHER_ID_KEY).map(String::as_str)
    }

    /// The page the buyer is sent to, while the intent awaits payment.
    pub fn checkout_url(&self) -> Option<&str> {
        self.next_action.as_ref()?.redirect_to_url.as_ref().map(|redirect| redirect.url.as_str())
    }

    /// When the provider took the money (unix seconds): the expanded
    /// charge's creation, the time a hold's deadline is judged against.
    pub fn paid_at(&self) -> Option<i64> {
        match self.latest_charge.as_ref()? {
            ChargeRef::Expanded(charge) => Some(charge.created),
            ChargeRef::Id(_) => None,
        }
    }
}

/// A hosted checkout page for one order (`checkout.session`): the
/// platform creates one per order and sends the buyer to its `url`; the
/// payment intent exists once the buyer pays (Stripe creates it then).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckoutSession {
    /// `cs_…`.
    pub id: String,
    /// Always `"checkout.session"`.
    pub object: String,
    /// `open` while it can be paid, then `complete` or `expired`.
    pub status: SessionStatus,
    /// `paid` once the money is taken; `unpaid` while an asynchronous
    /// method (a bank debit) is still settling.
    pub payment_status: SessionPaymentStatus,
    /// The hosted page, while the session is open.
    #[serde(default)]
    pub url: Option<String>,
    /// The platform's order id.
    #[serde(default)]
    pub client_reference_id: Option<String>,
    #[serde(default)]
    pub metadata: BTreeMap<String, String>,
    /// Total in the currency's smallest unit.
    #[serde(default)]
    pub amount_total: Option<u64>,
    /// Lowercase ISO 4217.
    #[serde(default)]
    pub currency: Option<String>,
    /// Unix seconds.
    pub created: i64,
    /// Unix seconds: after this the provider expires it unpaid.
    pub expires_at: i64,
    /// The intent paying it, once there is one; an object when expanded.
    #[serde(default)]
    pub payment_intent: Option<IntentRef>,
    #[serde(default)]
    pub livemode: bool,
}

impl CheckoutSession {
    /// The platform's order id, from the metadata (or the reference).
    pub fn order_id(&self) -> Option<&str> {
        self.metadata.get(ORDER_ID_KEY).or(self.client_reference_id.as_ref()).map(String::as_str)
    }

    /// The voucher id from the metadata.
    pub fn voucher_id(&self) -> Option<&str> {
        self.metadata.get(VOUCHER_ID_KEY).map(String::as_str)
    }

    /// The paying intent's id, expanded or not.
    pub fn payment_intent_id(&self) -> Option<&str> {
        match self.payment_intent.as_ref()? {
            IntentRef::Id(id) => Some(id),
            IntentRef::Expanded(intent) => Some(&intent.id),
        }
    }

    /// The paying intent, when it was expanded.
    pub fn expanded_intent(&self) -> Option<&PaymentIntent> {
        match self.payment_intent.as_ref()? {
            IntentRef::Expanded(intent) => Some(intent),
            IntentRef::Id(_) => None,
        }
    }
}

/// Where a checkout session is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionStatus {
    Open,
    Complete,
    Expired,
    /// A status this version does not know; treated as still open.
    #[serde(other)]
    Unknown,
}

impl SessionStatus {
    /// The name Stripe gives the status.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Open => "open",
            Self::Complete => "complete",
            Self::Expired => "expired",
            Self::Unknown => "unknown",
        }
    }
}

/// Whether a session's money is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionPaymentStatus {
    Paid,
    Unpaid,
    NoPaymentRequired,
    /// A status this version does not know; treated as not paid.
    #[serde(other)]
    Unknown,
}

/// An intent as an id or, when expanded, the object.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum IntentRef {
    Expanded(Box<PaymentIntent>),
    Id(String),
}

/// Where an intent is in its life. Only `Succeeded` means paid; `Canceled`
/// means it can never be paid.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IntentStatus {
    RequiresPaymentMethod,
    RequiresConfirmation,
    RequiresAction,
    Processing,
    RequiresCapture,
    Canceled,
    Succeeded,
    /// A status this version does not know; treated as not paid.
    #[serde(other)]
    Unknown,
}

impl IntentStatus {
    /// Whether nothing can change the intent any more.
    pub fn is_final(self) -> bool {
        matches!(self, Self::Canceled | Self::Succeeded)
    }

    /// The name Stripe gives the status, for messages and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::RequiresPaymentMethod => "requires_payment_method",
            Self::RequiresConfirmation => "requires_confirmation",
            Self::RequiresAction => "requires_action",
            Self::Processing => "processing",
            Self::RequiresCapture => "requires_capture",
            Self::Canceled => "canceled",
            Self::Succeeded => "succeeded",
            Self::Unknown => "unknown",
        }
    }
}

/// A charge as an id or, when expanded, the object.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ChargeRef {
    Expanded(Charge),
    Id(String),
}

/// Money taken for an intent.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Charge {
    /// `ch_…`.
    pub id: String,
    /// Always `"charge"`.
    #[serde(default)]
    pub object: String,
    pub amount: u64,
    #[serde(default)]
    pub currency: String,
    /// The intent it pays; named in `charge.*` events.
    #[serde(default)]
    pub payment_intent: Option<String>,
    /// Unix seconds: when the payment was taken.
    pub created: i64,
    pub refunded: bool,
    pub amount_refunded: u64,
}

/// What the buyer must do next.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NextAction {
    /// `redirect_to_url` for a hosted checkout.
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub redirect_to_url: Option<RedirectToUrl>,
}

/// The hosted page to send the buyer to, and where it sends them back.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RedirectToUrl {
    pub url: String,
    #[serde(default)]
    pub return_url: Option<String>,
}

/// Money given back for a paid intent.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refund {
    /// `re_…`.
    pub id: String,
    /// Always `"refund"`.
    pub object: String,
    pub amount: u64,
    pub currency: String,
    /// The intent refunded; Stripe leaves it null for a refund of a
    /// charge made without one (never the platform's).
    #[serde(default)]
    pub payment_intent: Option<String>,
    /// `succeeded`, `pending`, `failed` or `canceled`.
    pub status: String,
    /// Unix seconds.
    pub created: i64,
}

/// A webhook: something happened to an object.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// `evt_…`: the same on every delivery of one event, so receivers
    /// deduplicate on it.
    pub id: String,
    /// Always `"event"`.
    pub object: String,
    /// `payment_intent.succeeded`, `charge.refunded`, …
    #[serde(rename = "type")]
    pub kind: String,
    /// Unix seconds.
    pub created: i64,
    pub data: EventData,
    #[serde(default)]
    pub livemode: bool,
}

impl Event {
    /// The intent a `payment_intent.*` event carries.
    pub fn payment_intent(&self) -> Result<PaymentIntent, serde_json::Error> {
        PaymentIntent::deserialize(&self.data.object)
    }

    /// The session a `checkout.session.*` event carries.
    pub fn checkout_session(&self) -> Result<CheckoutSession, serde_json::Error> {
        CheckoutSession::deserialize(&self.data.object)
    }

    /// The refund a `refund.*` event carries.
    pub fn refund(&self) -> Result<Refund, serde_json::Error> {
        Refund::deserialize(&self.data.object)
    }
}

/// The object an event is about, as it was when the event happened.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EventData {
    pub object: serde_json::Value,
}

/// A page of a list or a search.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct List<T> {
    /// `list`, or `search_result` for a search.
    pub object: String,
    pub data: Vec<T>,
    pub has_more: bool,
    /// A search's token for the next page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_page: Option<String>,
    /// The path listed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

/// The body of every refused call.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

/// What was wrong, in Stripe's terms.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorDetail {
    /// `invalid_request_error`, `api_error`, `idempotency_error`, …
    #[serde(rename = "type")]
    pub kind: String,
    /// A stable code to switch on, such as `payment_intent_unexpected_state`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    pub message: String,
    /// The request parameter at fault, if one is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub param: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stripe_intent_decodes_with_its_charge_expanded_or_not() {
        let json = serde_json::json!({
            "id": "pi_1", "object": "payment_intent", "amount": 1999, "currency": "eur",
            "status": "succeeded", "metadata": {"order_id": "o-1", "voucher_id": "7"},
            "created": 1_700_000_000, "canceled_at": null, "client_secret": "ignored",
            "latest_charge": {"id": "ch_1", "object": "charge", "amount": 1999, "created": 1_700_000_050,
                              "refunded": false, "amount_refunded": 0, "captured": true},
            "next_action": null
        });
        let intent: PaymentIntent = serde_json::from_value(json.clone()).expect("decodes");
        assert_eq!(intent.order_id(), Some("o-1"));
        assert_eq!(intent.voucher_id(), Some("7"));
        assert_eq!(intent.paid_at(), Some(1_700_000_050));
        assert_eq!(intent.status, IntentStatus::Succeeded);

        let mut collapsed = json;
        collapsed["latest_charge"] = serde_json::json!("ch_1");
        collapsed["status"] = serde_json::json!("requires_something_new");
        let intent: PaymentIntent = serde_json::from_value(collapsed).expect("decodes");
        assert_eq!(intent.latest_charge, Some(ChargeRef::Id("ch_1".to_owned())));
        assert_eq!(intent.paid_at(), None);
        assert_eq!(intent.status, IntentStatus::Unknown);
    }

    #[test]
    fn status_names_are_the_serialized_ones() {
        use IntentStatus::*;
        for status in [
            RequiresPaymentMethod,
            RequiresConfirmation,
            RequiresAction,
            Processing,
            RequiresCapture,
            Canceled,
            Succeeded,
        ] {
            assert_eq!(serde_json::to_value(status).expect("serializes"), status.as_str());
        }
    }

    #[test]
    fn an_event_carries_its_intent() {
        let json = serde_json::json!({
            "id": "evt_1", "object": "event", "type": "payment_intent.payment_failed", "created": 5,
            "livemode": false, "api_version": "2024-06-20",
            "data": {"object": {"id": "pi_1", "object": "payment_intent", "amount": 5, "currency": "usd",
                                "status": "requires_payment_method", "created": 4,
                                "next_action": {"type": "redirect_to_url",
                                                "redirect_to_url": {"url": "http://x/checkout/pi_1", "return_url": null}}}}
        });
        let event: Event = serde_json::from_value(json).expect("decodes");
        let intent = event.payment_intent().expect("an intent");
        assert_eq!(intent.checkout_url(), Some("http://x/checkout/pi_1"));
        assert!(intent.metadata.is_empty());
    }
}
