//! Events as Stripe sends them: `data.object` is the object as it is after
//! the change, with nothing expanded (a charge or an intent it names is an
//! id, whatever the API answers expand), and the envelope carries the API
//! version the objects are shaped by.

use seckill_payments::{ChargeRef, Event, EventData, PaymentIntent};
use serde::Serialize;

use crate::ids::new_id;

/// The Stripe API version whose object shapes the sandbox answers and sends.
pub(crate) const API_VERSION: &str = "2024-06-20";

/// An event of `kind` about `object`, dated `created` (unix seconds).
pub(crate) fn event(kind: &str, created: i64, object: &impl Serialize) -> Event {
    Event {
        id: new_id("evt"),
        object: "event".to_owned(),
        kind: kind.to_owned(),
        created,
        data: EventData { object: serde_json::to_value(object).expect("the sandbox's objects serialize") },
        livemode: false,
    }
}

/// An intent as events carry it: its charge as an id.
pub(crate) fn collapsed(intent: &PaymentIntent) -> PaymentIntent {
    let mut intent = intent.clone();
    if let Some(ChargeRef::Expanded(charge)) = &intent.latest_charge {
        intent.latest_charge = Some(ChargeRef::Id(charge.id.clone()));
    }
    intent
}

/// An event as delivered: Stripe's envelope fields the shared type leaves
/// out (receivers that read them find them).
#[derive(Debug, Serialize)]
pub(crate) struct Delivered<'a> {
    #[serde(flatten)]
    event: &'a Event,
    api_version: &'static str,
    /// Endpoints still to be told, as Stripe counts them: the sandbox has one.
    pending_webhooks: u32,
    /// The API request that caused it; the sandbox does not say (null), as
    /// Stripe does for changes nobody asked for.
    request: Request,
}

#[derive(Debug, Serialize)]
struct Request {
    id: Option<String>,
    idempotency_key: Option<String>,
}

impl<'a> Delivered<'a> {
    pub(crate) fn new(event: &'a Event) -> Self {
        Self {
            event,
            api_version: API_VERSION,
            pending_webhooks: 1,
            request: Request { id: None, idempotency_key: None },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_envelope_names_the_api_version() {
        let event = event("refund.updated", 5, &serde_json::json!({"id": "re_1"}));
        let wire = serde_json::to_value(Delivered::new(&event)).expect("serializes");
        assert_eq!(wire["api_version"], API_VERSION);
        assert_eq!(wire["type"], "refund.updated");
        assert_eq!(wire["livemode"], false);
        assert_eq!(wire["data"]["object"]["id"], "re_1");
        let decoded: Event = serde_json::from_value(wire).expect("the shared type reads it");
        assert_eq!(decoded, event);
    }
}
