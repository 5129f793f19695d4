//! The sandbox's books: every intent, charge and refund, in memory, with
//! Stripe's rules on what may happen to each. Pure state: the clock is
//! passed in, and each change that a provider announces returns the event
//! to deliver.
//!
//! An intent starts `requires_payment_method`; paying makes it `succeeded`
//! with a charge (`created` = the moment paid), declining leaves it open,
//! cancelling makes it `canceled`. `succeeded` and `canceled` are final:
//! neither can be paid, declined or cancelled again. A succeeded intent can
//! be refunded once, in full.

use std::collections::{BTreeMap, HashMap};

use seckill_payments::{
    Charge, ChargeRef, Event, EventData, IntentStatus, NextAction, PaymentIntent, RedirectToUrl, Refund,
};

use crate::failure::Failure;
use crate::idempotency::Replays;

/// Stripe's largest amount (eight digits in the smallest unit).
pub(crate) const MAX_AMOUNT: u64 = 99_999_999;

/// What a create call asks for, once its parameters are read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct IntentRequest {
    pub(crate) amount: u64,
    /// Lowercase ISO 4217.
    pub(crate) currency: String,
    pub(crate) metadata: BTreeMap<String, String>,
    pub(crate) return_url: Option<String>,
}

/// Every object the sandbox holds.
#[derive(Debug)]
pub(crate) struct Ledger {
    /// Bound on intents plus refunds.
    max_objects: usize,
    /// `<public_url>/checkout/`: intents' checkout URLs are this plus the id.
    checkout_base: String,
    /// In creation order, for audits.
    intents: Vec<PaymentIntent>,
    intent_index: HashMap<String, usize>,
    /// Positions in `intents` of each order's intents, for search.
    by_order: HashMap<String, Vec<usize>>,
    refunds: Vec<Refund>,
    /// Position in `refunds` of each refunded intent's refund (one each).
    refund_index: HashMap<String, usize>,
    /// Idempotency keys, kept with the books so a key's check and its
    /// effect happen under one lock.
    pub(crate) replays: Replays,
}

impl Ledger {
    /// Empty books holding at most `max_objects`, with checkout pages under
    /// `public_url`.
    pub(crate) fn new(max_objects: usize, public_url: &str) -> Self {
        Self {
            max_objects,
            checkout_base: format!("{}/checkout/", public_url.trim_end_matches('/')),
            intents: Vec::new(),
            intent_index: HashMap::new(),
            by_order: HashMap::new(),
            refunds: Vec::new(),
            refund_index: HashMap::new(),
            replays: Replays::new(max_objects),
        }
    }

    fn ensure_room(&self) -> Result<(), Failure> {
        if self.intents.len() + self.refunds.len() >= self.max_objects {
            return Err(Failure::rate_limited(format!(
                "The sandbox holds its limit of {} objects (max_objects); restart it to start afresh.",
                self.max_objects
            )));
        }
        Ok(())
    }

    /// Creates an intent awaiting payment at its checkout page.
    pub(crate) fn create_intent(&mut self, request: IntentRequest, now: i64) -> Result<PaymentIntent, Failure> {
        self.ensure_room()?;
        let id = new_id("pi");
        let intent = PaymentIntent {
            object: "payment_intent".to_owned(),
            amount: request.amount,
            currency: request.currency,
            status: IntentStatus::RequiresPaymentMethod,
            metadata: request.metadata,
            created: now,
            canceled_at: None,
            latest_charge: None,
            next_action: Some(NextAction {
                kind: "redirect_to_url".to_owned(),
                redirect_to_url: Some(RedirectToUrl {
                    url: format!("{}{id}", self.checkout_base),
                    return_url: request.return_url,
                }),
            }),
            id,
        };
        let position = self.intents.len();
        if let Some(order_id) = intent.order_id() {
            self.by_order.entry(order_id.to_owned()).or_default().push(position);
        }
        self.intent_index.insert(intent.id.clone(), position);
        self.intents.push(intent.clone());
        Ok(intent)
    }

    /// The intent as it is now.
    pub(crate) fn intent(&self, id: &str) -> Result<PaymentIntent, Failure> {
        self.intent_index
            .get(id)
            .map(|position| self.intents[*position].clone())
            .ok_or_else(|| Failure::missing("payment_intent", id))
    }

    fn intent_mut(&mut self, id: &str) -> Result<&mut PaymentIntent, Failure> {
        match self.intent_index.get(id) {
            Some(position) => Ok(&mut self.intents[*position]),
            None => Err(Failure::missing("payment_intent", id)),
        }
    }

    /// Cancels an open intent; a final one is refused, as Stripe does.
    pub(crate) fn cancel(&mut self, id: &str, now: i64) -> Result<PaymentIntent, Failure> {
        let intent = self.intent_mut(id)?;
        if intent.status.is_final() {
            return Err(unexpected_state(intent, "cancel"));
        }
        intent.status = IntentStatus::Canceled;
        intent.canceled_at = Some(now);
        intent.next_action = None;
        Ok(intent.clone())
    }

    /// The buyer pays: the intent succeeds with a charge made `now`.
    pub(crate) fn pay(&mut self, id: &str, now: i64) -> Result<(PaymentIntent, Event), Failure> {
        let intent = self.intent_mut(id)?;
        if intent.status != IntentStatus::RequiresPaymentMethod {
            return Err(unexpected_state(intent, "pay"));
        }
        intent.status = IntentStatus::Succeeded;
        intent.next_action = None;
        intent.latest_charge = Some(ChargeRef::Expanded(Charge {
            id: new_id("ch"),
            object: "charge".to_owned(),
            amount: intent.amount,
            currency: intent.currency.clone(),
            payment_intent: Some(intent.id.clone()),
            created: now,
            refunded: false,
            amount_refunded: 0,
        }));
        let intent = intent.clone();
        // Dated as the charge, so the receiver can judge the payment's time
        // from the event alone.
        let event = event("payment_intent.succeeded", now, &intent);
        Ok((intent, event))
    }

    /// The buyer's payment is declined: the intent stays open for another
    /// try, and the failure is announced.
    pub(crate) fn decline(&mut self, id: &str, now: i64) -> Result<(PaymentIntent, Event), Failure> {
        let intent = self.intent_mut(id)?;
        if intent.status != IntentStatus::RequiresPaymentMethod {
            return Err(unexpected_state(intent, "decline"));
        }
        let intent = intent.clone();
        let event = event("payment_intent.payment_failed", now, &intent);
        Ok((intent, event))
    }

    /// Refunds a succeeded intent in full, once; `amount`, when given, must
    /// be the whole amount.
    pub(crate) fn refund(&mut self, id: &str, amount: Option<u64>, now: i64) -> Result<(Refund, Event), Failure> {
        let intent = self.intent(id)?;
        let Some(ChargeRef::Expanded(charge)) =
            intent.latest_charge.as_ref().filter(|_| intent.status == IntentStatus::Succeeded)
        else {
            return Err(Failure::invalid(
                "payment_intent_unexpected_state",
                format!(
                    "PaymentIntent {id} has no successful charge to refund (its status is {}).",
                    intent.status.as_str()
                ),
            ));
        };
        if self.refund_index.contains_key(id) {
            return Err(Failure::invalid(
                "charge_already_refunded",
                format!("Charge {} has already been refunded.", charge.id),
            ));
        }
        if amount.is_some_and(|amount| amount != intent.amount) {
            return Err(Failure::param("parameter_invalid", "amount", "The sandbox refunds only the full amount."));
        }
        self.ensure_room()?;
        let refund = Refund {
            id: new_id("re"),
            object: "refund".to_owned(),
            amount: intent.amount,
            currency: intent.currency.clone(),
            payment_intent: intent.id.clone(),
            status: "succeeded".to_owned(),
            created: now,
        };
        self.refund_index.insert(intent.id.clone(), self.refunds.len());
        self.refunds.push(refund.clone());
        let stored = self.intent_mut(id)?;
        let Some(ChargeRef::Expanded(charge)) = stored.latest_charge.as_mut() else {
            return Err(Failure::api_error("The intent lost its charge."));
        };
        charge.refunded = true;
        charge.amount_refunded = charge.amount;
        let event = event("charge.refunded", now, &*charge);
        Ok((refund, event))
    }

    /// One page of an order's intents, oldest first, and whether more follow.
    pub(crate) fn intents_for_order(&self, order_id: &str, offset: usize, limit: usize) -> (Vec<PaymentIntent>, bool) {
        let positions = self.by_order.get(order_id).map(Vec::as_slice).unwrap_or_default();
        let page = positions.iter().skip(offset).take(limit).map(|position| self.intents[*position].clone()).collect();
        (page, positions.len() > offset.saturating_add(limit))
    }

    /// The refunds of one intent (none or one).
    pub(crate) fn refunds_for(&self, id: &str) -> Vec<Refund> {
        self.refund_index.get(id).map(|position| self.refunds[*position].clone()).into_iter().collect()
    }

    /// Every intent and refund, in creation order.
    pub(crate) fn snapshot(&self) -> (Vec<PaymentIntent>, Vec<Refund>) {
        (self.intents.clone(), self.refunds.clone())
    }
}

fn unexpected_state(intent: &PaymentIntent, action: &str) -> Failure {
    Failure::invalid(
        "payment_intent_unexpected_state",
        format!("You cannot {action} this PaymentIntent because it has a status of {}.", intent.status.as_str()),
    )
}

/// `<prefix>_<32 hex digits>`: unique, and ordered by creation like Stripe's.
pub(crate) fn new_id(prefix: &str) -> String {
    format!("{prefix}_{}", uuid::Uuid::now_v7().simple())
}

fn event(kind: &str, created: i64, object: &impl serde::Serialize) -> Event {
    Event {
        id: new_id("evt"),
        object: "event".to_owned(),
        kind: kind.to_owned(),
        created,
        data: EventData { object: serde_json::to_value(object).expect("the sandbox's objects serialize") },
        livemode: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_700_000_000;

    fn request(order: &str) -> IntentRequest {
        IntentRequest {
            amount: 1_500,
            currency: "eur".to_owned(),
            metadata: BTreeMap::from([("order_id".to_owned(), order.to_owned())]),
            return_url: Some("http://shop/return".to_owned()),
        }
    }

    #[test]
    fn paying_succeeds_once_with_a_charge_dated_now() {
        let mut ledger = Ledger::new(10, "http://sandbox/");
        let intent = ledger.create_intent(request("o1"), NOW).expect("created");
        assert_eq!(intent.checkout_url(), Some(format!("http://sandbox/checkout/{}", intent.id).as_str()));
        let (paid, event) = ledger.pay(&intent.id, NOW + 7).expect("paid");
        assert_eq!(paid.status, IntentStatus::Succeeded);
        assert_eq!(paid.paid_at(), Some(NOW + 7));
        assert_eq!((event.kind.as_str(), event.created), ("payment_intent.succeeded", NOW + 7));
        assert_eq!(event.payment_intent().expect("intent"), paid);
        for refused in [ledger.pay(&intent.id, NOW).map(|_| ()), ledger.cancel(&intent.id, NOW).map(|_| ())] {
            assert_eq!(refused.expect_err("final").code, Some("payment_intent_unexpected_state"));
        }
    }

    #[test]
    fn a_canceled_intent_cannot_be_paid_and_a_decline_leaves_it_open() {
        let mut ledger = Ledger::new(10, "http://sandbox");
        let intent = ledger.create_intent(request("o1"), NOW).expect("created");
        let (declined, event) = ledger.decline(&intent.id, NOW).expect("declined");
        assert_eq!(declined.status, IntentStatus::RequiresPaymentMethod);
        assert_eq!(event.kind, "payment_intent.payment_failed");
        let canceled = ledger.cancel(&intent.id, NOW + 1).expect("canceled");
        assert_eq!((canceled.status, canceled.canceled_at), (IntentStatus::Canceled, Some(NOW + 1)));
        assert_eq!(ledger.pay(&intent.id, NOW).expect_err("canceled").code, Some("payment_intent_unexpected_state"));
        assert_eq!(ledger.intent("pi_nope").expect_err("missing").code, Some("resource_missing"));
    }

    #[test]
    fn a_paid_intent_is_refunded_once_in_full() {
        let mut ledger = Ledger::new(10, "http://sandbox");
        let intent = ledger.create_intent(request("o1"), NOW).expect("created");
        assert!(ledger.refund(&intent.id, None, NOW).is_err(), "not paid yet");
        ledger.pay(&intent.id, NOW).expect("paid");
        assert!(ledger.refund(&intent.id, Some(1), NOW).is_err(), "partial");
        let (refund, event) = ledger.refund(&intent.id, None, NOW + 3).expect("refunded");
        assert_eq!((refund.amount, refund.status.as_str()), (1_500, "succeeded"));
        assert_eq!(event.kind, "charge.refunded");
        assert_eq!(event.data.object["refunded"], serde_json::json!(true));
        assert_eq!(ledger.refund(&intent.id, None, NOW).expect_err("twice").code, Some("charge_already_refunded"));
        assert_eq!(ledger.refunds_for(&intent.id), vec![refund]);
    }

    #[test]
    fn search_pages_through_an_orders_intents_and_objects_are_bounded() {
        let mut ledger = Ledger::new(3, "http://sandbox");
        let first = ledger.create_intent(request("o1"), NOW).expect("created");
        ledger.create_intent(request("o2"), NOW).expect("created");
        let third = ledger.create_intent(request("o1"), NOW).expect("created");
        assert_eq!(ledger.intents_for_order("o1", 0, 1), (vec![first], true));
        assert_eq!(ledger.intents_for_order("o1", 1, 1), (vec![third], false));
        assert_eq!(ledger.intents_for_order("o3", 0, 10), (vec![], false));
        let refused = ledger.create_intent(request("o4"), NOW).expect_err("full");
        assert_eq!(refused.status, warp::http::StatusCode::TOO_MANY_REQUESTS);
    }
}
