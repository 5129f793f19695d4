//! Payment intents. One starts `requires_payment_method`; paying makes it
//! `succeeded` with a charge (`created` = the moment paid) and
//! `amount_received`, declining leaves it open, cancelling makes it
//! `canceled`. `succeeded` and `canceled` are final: neither can be paid,
//! declined or cancelled again. A checkout session's intent is made when
//! the buyer pays, already `succeeded` (or `processing` for a bank debit).

use std::collections::BTreeMap;

use seckill_payments::{Charge, ChargeRef, IntentStatus, NextAction, PaymentIntent, RedirectToUrl};

use super::Ledger;
use crate::clock::Moment;
use crate::events::{collapsed, event};
use crate::failure::Failure;
use crate::ids::new_id;

/// What a create call asks for, once its parameters are read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct IntentRequest {
    pub(crate) amount: u64,
    /// Lowercase ISO 4217.
    pub(crate) currency: String,
    pub(crate) metadata: BTreeMap<String, String>,
    pub(crate) return_url: Option<String>,
}

impl Ledger {
    /// Creates an intent awaiting payment at its checkout page.
    pub(crate) fn create_intent(&mut self, request: IntentRequest, now: Moment) -> Result<PaymentIntent, Failure> {
        self.ensure_room()?;
        let id = new_id("pi");
        let intent = PaymentIntent {
            object: "payment_intent".to_owned(),
            amount: request.amount,
            amount_received: 0,
            currency: request.currency,
            status: IntentStatus::RequiresPaymentMethod,
            metadata: request.metadata,
            created: now.secs(),
            canceled_at: None,
            latest_charge: None,
            next_action: Some(NextAction {
                kind: "redirect_to_url".to_owned(),
                redirect_to_url: Some(RedirectToUrl { url: self.checkout_url(&id), return_url: request.return_url }),
            }),
            livemode: false,
            id,
        };
        Ok(self.insert_intent(intent, now))
    }

    /// Files a new intent (room already checked).
    pub(super) fn insert_intent(&mut self, intent: PaymentIntent, now: Moment) -> PaymentIntent {
        let position = self.intents.len();
        if let Some(order_id) = intent.order_id() {
            self.by_order.entry(order_id.to_owned()).or_default().push(position);
        }
        self.intent_index.insert(intent.id.clone(), position);
        let mut versions = super::search_index::Versions::default();
        versions.record(now, intent.clone());
        self.search.push(versions);
        self.intents.push(intent.clone());
        intent
    }

    /// The intent as it is now.
    pub(crate) fn intent(&self, id: &str) -> Result<PaymentIntent, Failure> {
        self.intent_index
            .get(id)
            .map(|position| self.intents[*position].clone())
            .ok_or_else(|| Failure::missing("payment_intent", id))
    }

    /// Applies `change` to the intent; if it succeeds the new version is
    /// on its way to search.
    pub(super) fn change_intent<R>(
        &mut self,
        id: &str,
        now: Moment,
        change: impl FnOnce(&mut PaymentIntent) -> Result<R, Failure>,
    ) -> Result<R, Failure> {
        let position = *self.intent_index.get(id).ok_or_else(|| Failure::missing("payment_intent", id))?;
        let intent = &mut self.intents[position];
        let changed = change(intent)?;
        self.search[position].record(now, intent.clone());
        Ok(changed)
    }

    /// Cancels an open intent; a final one is refused, as Stripe does.
    pub(crate) fn cancel(&mut self, id: &str, now: Moment) -> Result<PaymentIntent, Failure> {
        self.change_intent(id, now, |intent| {
            if intent.status.is_final() {
                return Err(unexpected_state(intent, "cancel"));
            }
            intent.status = IntentStatus::Canceled;
            intent.canceled_at = Some(now.secs());
            intent.next_action = None;
            Ok(intent.clone())
        })
    }

    /// The buyer pays: the intent succeeds with a charge made `now`.
    pub(crate) fn pay(&mut self, id: &str, now: Moment) -> Result<PaymentIntent, Failure> {
        let intent = self.change_intent(id, now, |intent| {
            if intent.status != IntentStatus::RequiresPaymentMethod {
                return Err(unexpected_state(intent, "pay"));
            }
            succeed(intent, now);
            Ok(intent.clone())
        })?;
        // Dated as the charge, so the receiver can judge the payment's time
        // from the event alone.
        self.announce(event("payment_intent.succeeded", now.secs(), &collapsed(&intent)));
        Ok(intent)
    }

    /// The buyer's payment is declined: the intent stays open for another
    /// try, and the failure is announced.
    pub(crate) fn decline(&mut self, id: &str, now: Moment) -> Result<PaymentIntent, Failure> {
        let intent = self.intent(id)?;
        if intent.status != IntentStatus::RequiresPaymentMethod {
            return Err(unexpected_state(&intent, "decline"));
        }
        self.announce(event("payment_intent.payment_failed", now.secs(), &collapsed(&intent)));
        Ok(intent)
    }

    /// One page of an order's intents as search shows them when changes up
    /// to `cutoff` have reached it, oldest first, and whether more follow.
    pub(crate) fn intents_for_order(
        &mut self,
        order_id: &str,
        cutoff: Moment,
        offset: usize,
        limit: usize,
    ) -> (Vec<PaymentIntent>, bool) {
        let positions = self.by_order.get(order_id).map(Vec::as_slice).unwrap_or_default();
        let found: Vec<PaymentIntent> =
            positions.iter().filter_map(|position| self.search.get_mut(*position)?.as_of(cutoff).cloned()).collect();
        let more = found.len() > offset.saturating_add(limit);
        (found.into_iter().skip(offset).take(limit).collect(), more)
    }
}

/// Takes the money now: `succeeded`, with a charge dated `now`.
pub(super) fn succeed(intent: &mut PaymentIntent, now: Moment) {
    intent.status = IntentStatus::Succeeded;
    intent.amount_received = intent.amount;
    intent.next_action = None;
    intent.latest_charge = Some(ChargeRef::Expanded(Charge {
        id: new_id("ch"),
        object: "charge".to_owned(),
        amount: intent.amount,
        currency: intent.currency.clone(),
        payment_intent: Some(intent.id.clone()),
        created: now.secs(),
        refunded: false,
        amount_refunded: 0,
    }));
}

fn unexpected_state(intent: &PaymentIntent, action: &str) -> Failure {
    Failure::invalid(
        "payment_intent_unexpected_state",
        format!("You cannot {action} this PaymentIntent because it has a status of {}.", intent.status.as_str()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: Moment = Moment::from_secs(1_700_000_000);

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
        assert_eq!(intent.amount_received, 0);
        let paid = ledger.pay(&intent.id, NOW.after_ms(7_000)).expect("paid");
        assert_eq!((paid.status, paid.amount_received), (IntentStatus::Succeeded, 1_500));
        assert_eq!(paid.paid_at(), Some(NOW.secs() + 7));
        let events = ledger.take_events();
        assert_eq!((events[0].kind.as_str(), events[0].created), ("payment_intent.succeeded", NOW.secs() + 7));
        let announced = events[0].payment_intent().expect("intent");
        assert_eq!(announced, collapsed(&paid), "events carry the charge as an id, as Stripe's do");
        assert!(matches!(announced.latest_charge, Some(ChargeRef::Id(_))));
        for refused in [ledger.pay(&intent.id, NOW).map(|_| ()), ledger.cancel(&intent.id, NOW).map(|_| ())] {
            assert_eq!(refused.expect_err("final").code, Some("payment_intent_unexpected_state"));
        }
        assert!(ledger.take_events().is_empty());
    }

    #[test]
    fn a_canceled_intent_cannot_be_paid_and_a_decline_leaves_it_open() {
        let mut ledger = Ledger::new(10, "http://sandbox");
        let intent = ledger.create_intent(request("o1"), NOW).expect("created");
        let declined = ledger.decline(&intent.id, NOW).expect("declined");
        assert_eq!(declined.status, IntentStatus::RequiresPaymentMethod);
        assert_eq!(ledger.take_events()[0].kind, "payment_intent.payment_failed");
        let canceled = ledger.cancel(&intent.id, NOW.after_ms(1_000)).expect("canceled");
        assert_eq!((canceled.status, canceled.canceled_at), (IntentStatus::Canceled, Some(NOW.secs() + 1)));
        assert_eq!(ledger.pay(&intent.id, NOW).expect_err("canceled").code, Some("payment_intent_unexpected_state"));
        assert_eq!(ledger.intent("pi_nope").expect_err("missing").code, Some("resource_missing"));
    }

    #[test]
    fn search_pages_through_an_orders_intents_as_of_its_lag() {
        let mut ledger = Ledger::new(3, "http://sandbox");
        let first = ledger.create_intent(request("o1"), NOW).expect("created");
        ledger.create_intent(request("o2"), NOW).expect("created");
        let third = ledger.create_intent(request("o1"), NOW.after_ms(100)).expect("created");
        assert_eq!(ledger.intents_for_order("o1", NOW.after_ms(99), 0, 10), (vec![first.clone()], false), "too new");
        assert_eq!(ledger.intents_for_order("o1", NOW.after_ms(100), 0, 1), (vec![first], true));
        assert_eq!(ledger.intents_for_order("o1", NOW.after_ms(100), 1, 1), (vec![third], false));
        assert_eq!(ledger.intents_for_order("o3", NOW, 0, 10), (vec![], false));
        let refused = ledger.create_intent(request("o4"), NOW).expect_err("full");
        assert_eq!(refused.status, warp::http::StatusCode::TOO_MANY_REQUESTS);
    }
}
