//! Checkout sessions (`checkout.session`): Stripe's hosted page for one
//! payment. A session is `open` until the buyer pays (`complete`) or it
//! passes its `expires_at` or is expired by a call (`expired`); only an
//! open session can be paid or expired. Its payment intent is made when
//! the buyer pays, as Stripe does since 2022-08-01: paid at once by card
//! (`payment_status: paid`), or by a bank debit that completes the session
//! `unpaid` and settles later (`checkout.session.async_payment_*`).

use std::collections::BTreeMap;

use seckill_payments::types::{CheckoutSession, IntentRef, SessionPaymentStatus, SessionStatus};
use seckill_payments::{IntentStatus, PaymentIntent};
use serde::Serialize;

use super::due::Task;
use super::intents::succeed;
use super::Ledger;
use crate::clock::Moment;
use crate::events::{collapsed, event};
use crate::failure::Failure;
use crate::ids::new_id;

/// What a create call asks for, once its parameters are read and checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SessionRequest {
    /// Unit amount times quantity, within Stripe's bounds.
    pub(crate) amount_total: u64,
    /// Lowercase ISO 4217.
    pub(crate) currency: String,
    /// The line item's product name, shown on the page.
    pub(crate) product_name: String,
    pub(crate) success_url: String,
    pub(crate) cancel_url: Option<String>,
    pub(crate) client_reference_id: Option<String>,
    pub(crate) metadata: BTreeMap<String, String>,
    /// `payment_intent_data[metadata]`: the intent's, once it is made.
    pub(crate) intent_metadata: BTreeMap<String, String>,
    /// Unix seconds, already checked against the creation time.
    pub(crate) expires_at: i64,
}

/// A session and what the sandbox keeps beside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SessionRecord {
    /// Its intent, once there is one, as an id.
    pub(crate) session: CheckoutSession,
    pub(crate) product_name: String,
    pub(crate) success_url: String,
    pub(crate) cancel_url: Option<String>,
    intent_metadata: BTreeMap<String, String>,
}

impl SessionRecord {
    /// The session as the API answers it and events carry it.
    pub(crate) fn object(&self) -> SessionObject {
        SessionObject {
            session: self.session.clone(),
            mode: "payment",
            amount_subtotal: self.session.amount_total,
            success_url: self.success_url.clone(),
            cancel_url: self.cancel_url.clone(),
        }
    }
}

/// A session in Stripe's shape: the shared fields and the ones only the
/// sandbox's answers carry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct SessionObject {
    #[serde(flatten)]
    pub(crate) session: CheckoutSession,
    mode: &'static str,
    amount_subtotal: Option<u64>,
    success_url: String,
    cancel_url: Option<String>,
}

/// What of a session's intent an answer carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Expansion {
    /// Its id.
    Id,
    /// The intent, its charge expanded (`expand[]=payment_intent`).
    Intent,
}

/// How the buyer pays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Method {
    /// The money is taken at once.
    Card,
    /// The money settles `settle_ms` later, or fails to.
    BankDebit { settle_ms: u64, fail: bool },
}

impl Ledger {
    /// Opens a session for `request`.
    pub(crate) fn create_session(&mut self, request: SessionRequest, now: Moment) -> Result<SessionObject, Failure> {
        self.ensure_room()?;
        let id = new_id("cs_test");
        let session = CheckoutSession {
            object: "checkout.session".to_owned(),
            status: SessionStatus::Open,
            payment_status: SessionPaymentStatus::Unpaid,
            url: Some(self.checkout_url(&id)),
            client_reference_id: request.client_reference_id,
            metadata: request.metadata,
            amount_total: Some(request.amount_total),
            currency: Some(request.currency),
            created: now.secs(),
            expires_at: request.expires_at,
            payment_intent: None,
            livemode: false,
            id,
        };
        let record = SessionRecord {
            session,
            product_name: request.product_name,
            success_url: request.success_url,
            cancel_url: request.cancel_url,
            intent_metadata: request.intent_metadata,
        };
        let id = record.session.id.clone();
        self.due.schedule(Moment::from_secs(record.session.expires_at), Task::ExpireSession(id.clone()));
        self.session_index.insert(id, self.sessions.len());
        self.sessions.push(record.clone());
        Ok(record.object())
    }

    /// The session as it is at `now`, its intent as `expansion` asks.
    pub(crate) fn session(&mut self, id: &str, now: Moment, expansion: Expansion) -> Result<SessionObject, Failure> {
        let mut object = self.session_record(id, now)?.object();
        if expansion == Expansion::Intent {
            if let Some(IntentRef::Id(intent)) = &object.session.payment_intent {
                object.session.payment_intent = Some(IntentRef::Expanded(Box::new(self.intent(intent)?)));
            }
        }
        Ok(object)
    }

    /// The session and its page's details as they are at `now`.
    pub(crate) fn session_record(&mut self, id: &str, now: Moment) -> Result<SessionRecord, Failure> {
        let position = self.session_position(id, now)?;
        Ok(self.sessions[position].clone())
    }

    /// Expires an open session now, as `POST …/expire` does.
    pub(crate) fn expire_session(&mut self, id: &str, now: Moment) -> Result<SessionObject, Failure> {
        let position = self.session_position(id, now)?;
        let status = self.sessions[position].session.status;
        if status != SessionStatus::Open {
            return Err(Failure::refused(format!(
                "Only Checkout Sessions with a status in [\"open\"] can be expired. This Checkout Session has a \
                 status of `{}`.",
                status.as_str()
            )));
        }
        self.expire(position, now);
        Ok(self.sessions[position].object())
    }

    /// The buyer pays by `method`: the session's intent is made and the
    /// session completes.
    pub(crate) fn pay_session(&mut self, id: &str, now: Moment, method: Method) -> Result<SessionRecord, Failure> {
        let position = self.open_session(id, now)?;
        self.ensure_room()?;
        let record = &self.sessions[position];
        let mut intent = PaymentIntent {
            id: new_id("pi"),
            object: "payment_intent".to_owned(),
            amount: record.session.amount_total.unwrap_or_default(),
            amount_received: 0,
            currency: record.session.currency.clone().unwrap_or_default(),
            status: IntentStatus::Processing,
            metadata: record.intent_metadata.clone(),
            created: now.secs(),
            canceled_at: None,
            latest_charge: None,
            next_action: None,
            livemode: false,
        };
        let (payment_status, intent_event) = match method {
            Method::Card => {
                succeed(&mut intent, now);
                (SessionPaymentStatus::Paid, "payment_intent.succeeded")
            }
            Method::BankDebit { settle_ms, fail } => {
                self.due.schedule(now.after_ms(settle_ms), Task::SettleSession { id: id.to_owned(), fail });
                (SessionPaymentStatus::Unpaid, "payment_intent.processing")
            }
        };
        let intent = self.insert_intent(intent, now);
        let session = &mut self.sessions[position].session;
        session.status = SessionStatus::Complete;
        session.payment_status = payment_status;
        session.payment_intent = Some(IntentRef::Id(intent.id.clone()));
        session.url = None;
        self.announce(event(intent_event, now.secs(), &collapsed(&intent)));
        self.announce_session("checkout.session.completed", position, now);
        Ok(self.sessions[position].clone())
    }

    /// The buyer's payment is declined: the session stays open for another
    /// try; nothing is announced (no intent was made).
    pub(crate) fn decline_session(&mut self, id: &str, now: Moment) -> Result<SessionRecord, Failure> {
        let position = self.open_session(id, now)?;
        Ok(self.sessions[position].clone())
    }

    /// Expires the session if it is open and past its `expires_at`.
    pub(super) fn sweep_session(&mut self, id: &str, now: Moment) {
        if let Some(position) = self.session_index.get(id).copied() {
            self.sweep(position, now);
        }
    }

    /// A bank debit's outcome: the intent succeeds with its charge and the
    /// session is paid, or the intent wants another payment method and the
    /// session stays unpaid.
    pub(super) fn settle_session(&mut self, id: &str, fail: bool, now: Moment) {
        let Some(position) = self.session_index.get(id).copied() else {
            return;
        };
        let session = &self.sessions[position].session;
        let Some(IntentRef::Id(intent_id)) = session.payment_intent.clone() else {
            return;
        };
        if session.payment_status != SessionPaymentStatus::Unpaid {
            return;
        }
        let settled = self.change_intent(&intent_id, now, |intent| {
            if intent.status != IntentStatus::Processing {
                return Err(Failure::api_error("The debit was settled already."));
            }
            if fail {
                intent.status = IntentStatus::RequiresPaymentMethod;
            } else {
                succeed(intent, now);
            }
            Ok(intent.clone())
        });
        let Ok(intent) = settled else {
            return;
        };
        if fail {
            self.announce(event("payment_intent.payment_failed", now.secs(), &collapsed(&intent)));
            self.announce_session("checkout.session.async_payment_failed", position, now);
        } else {
            self.sessions[position].session.payment_status = SessionPaymentStatus::Paid;
            self.announce(event("payment_intent.succeeded", now.secs(), &collapsed(&intent)));
            self.announce_session("checkout.session.async_payment_succeeded", position, now);
        }
    }

    /// The session's position, once expired if its time has come.
    fn session_position(&mut self, id: &str, now: Moment) -> Result<usize, Failure> {
        let position = *self.session_index.get(id).ok_or_else(|| Failure::missing("checkout.session", id))?;
        self.sweep(position, now);
        Ok(position)
    }

    /// The session's position, if it can still be paid.
    fn open_session(&mut self, id: &str, now: Moment) -> Result<usize, Failure> {
        let position = self.session_position(id, now)?;
        let status = self.sessions[position].session.status;
        if status != SessionStatus::Open {
            return Err(Failure::conflict(format!(
                "This Checkout Session can no longer be paid: its status is {}.",
                status.as_str()
            )));
        }
        Ok(position)
    }

    fn sweep(&mut self, position: usize, now: Moment) {
        let session = &self.sessions[position].session;
        if session.status == SessionStatus::Open && now >= Moment::from_secs(session.expires_at) {
            self.expire(position, now);
        }
    }

    fn expire(&mut self, position: usize, now: Moment) {
        let session = &mut self.sessions[position].session;
        session.status = SessionStatus::Expired;
        session.url = None;
        self.announce_session("checkout.session.expired", position, now);
    }

    fn announce_session(&mut self, kind: &str, position: usize, now: Moment) {
        let object = self.sessions[position].object();
        self.announce(event(kind, now.secs(), &object));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: Moment = Moment::from_secs(1_700_000_000);

    fn request() -> SessionRequest {
        SessionRequest {
            amount_total: 2_000,
            currency: "eur".to_owned(),
            product_name: "Voucher".to_owned(),
            success_url: "http://shop/ok?s={CHECKOUT_SESSION_ID}".to_owned(),
            cancel_url: Some("http://shop/cancel".to_owned()),
            client_reference_id: Some("o1".to_owned()),
            metadata: BTreeMap::from([("order_id".to_owned(), "o1".to_owned())]),
            intent_metadata: BTreeMap::from([("order_id".to_owned(), "o1".to_owned())]),
            expires_at: NOW.secs() + 1_800,
        }
    }

    fn kinds(ledger: &mut Ledger) -> Vec<String> {
        ledger.take_events().into_iter().map(|event| event.kind).collect()
    }

    #[test]
    fn paying_makes_the_intent_and_completes_the_session() {
        let mut ledger = Ledger::new(10, "http://sandbox");
        let created = ledger.create_session(request(), NOW).expect("created");
        let id = created.session.id.clone();
        assert!(id.starts_with("cs_test_"));
        assert_eq!(created.session.url, Some(format!("http://sandbox/checkout/{id}")));
        assert_eq!((created.session.status, created.session.payment_intent.clone()), (SessionStatus::Open, None));
        let paid = ledger.pay_session(&id, NOW.after_ms(5_000), Method::Card).expect("paid");
        assert_eq!(
            (paid.session.status, paid.session.payment_status),
            (SessionStatus::Complete, SessionPaymentStatus::Paid)
        );
        assert_eq!(paid.session.url, None);
        let intent = ledger.intent(paid.session.payment_intent_id().expect("an intent")).expect("filed");
        assert_eq!((intent.status, intent.amount_received), (IntentStatus::Succeeded, 2_000));
        assert_eq!((intent.order_id(), intent.paid_at()), (Some("o1"), Some(NOW.secs() + 5)));
        let events = ledger.take_events();
        assert_eq!(events[1].kind, "checkout.session.completed");
        let announced = events[1].checkout_session().expect("a session");
        assert_eq!(announced.payment_intent, Some(IntentRef::Id(intent.id.clone())));
        let expanded = ledger.session(&id, NOW, Expansion::Intent).expect("read");
        assert_eq!(expanded.session.expanded_intent(), Some(&intent));
        let again = ledger.pay_session(&id, NOW, Method::Card).expect_err("paid already");
        assert_eq!(again.status, warp::http::StatusCode::CONFLICT);
        let expire = ledger.expire_session(&id, NOW).expect_err("complete");
        assert_eq!((expire.status.as_u16(), expire.code), (400, None));
        assert!(ledger.take_events().is_empty());
    }

    #[test]
    fn a_session_expires_at_its_time_once() {
        let mut ledger = Ledger::new(10, "http://sandbox");
        let id = ledger.create_session(request(), NOW).expect("created").session.id;
        ledger.decline_session(&id, NOW).expect("declined, still open");
        let just_before = Moment::from_secs(NOW.secs() + 1_800).before_ms(1);
        assert_eq!(ledger.session(&id, just_before, Expansion::Id).expect("read").session.status, SessionStatus::Open);
        assert_eq!(ledger.run_due(just_before, 10), 0);
        assert_eq!(ledger.run_due(Moment::from_secs(NOW.secs() + 1_800), 10), 1);
        assert_eq!(kinds(&mut ledger), ["checkout.session.expired"]);
        let late = Moment::from_secs(NOW.secs() + 2_000);
        let refused = ledger.pay_session(&id, late, Method::Card).expect_err("expired");
        assert_eq!(refused.status, warp::http::StatusCode::CONFLICT);
        assert!(ledger.take_events().is_empty());
    }

    #[test]
    fn a_read_past_expires_at_expires_it_before_the_ticker() {
        let mut ledger = Ledger::new(10, "http://sandbox");
        let id = ledger.create_session(request(), NOW).expect("created").session.id;
        let late = Moment::from_secs(NOW.secs() + 1_800);
        let read = ledger.session(&id, late, Expansion::Id).expect("read");
        assert_eq!((read.session.status, read.session.url), (SessionStatus::Expired, None));
        assert_eq!(kinds(&mut ledger), ["checkout.session.expired"]);
        ledger.run_due(late, 10);
        assert!(ledger.take_events().is_empty(), "expired once");
        let refused = ledger.expire_session(&id, late).expect_err("expired already");
        assert!(refused.message.contains("status of `expired`"), "{}", refused.message);
    }

    #[test]
    fn a_bank_debit_completes_unpaid_then_settles_or_fails() {
        for fail in [false, true] {
            let mut ledger = Ledger::new(10, "http://sandbox");
            let id = ledger.create_session(request(), NOW).expect("created").session.id;
            let paid = ledger.pay_session(&id, NOW, Method::BankDebit { settle_ms: 2_000, fail }).expect("paid");
            assert_eq!(paid.session.payment_status, SessionPaymentStatus::Unpaid);
            let intent_id = paid.session.payment_intent_id().expect("an intent").to_owned();
            let processing = ledger.intent(&intent_id).expect("filed");
            assert_eq!((processing.status, processing.amount_received), (IntentStatus::Processing, 0));
            assert_eq!(kinds(&mut ledger), ["payment_intent.processing", "checkout.session.completed"]);
            ledger.run_due(NOW.after_ms(2_000), 10);
            let settled = ledger.session(&id, NOW, Expansion::Intent).expect("read");
            let intent = settled.session.expanded_intent().expect("expanded").clone();
            if fail {
                assert_eq!(settled.session.payment_status, SessionPaymentStatus::Unpaid);
                assert_eq!((intent.status, intent.amount_received), (IntentStatus::RequiresPaymentMethod, 0));
                assert_eq!(
                    kinds(&mut ledger),
                    ["payment_intent.payment_failed", "checkout.session.async_payment_failed"]
                );
            } else {
                assert_eq!(settled.session.payment_status, SessionPaymentStatus::Paid);
                assert_eq!((intent.amount_received, intent.paid_at()), (2_000, Some(NOW.secs() + 2)));
                assert_eq!(
                    kinds(&mut ledger),
                    ["payment_intent.succeeded", "checkout.session.async_payment_succeeded"]
                );
            }
        }
    }

    #[test]
    fn sessions_count_toward_the_bound() {
        let mut ledger = Ledger::new(1, "http://sandbox");
        let id = ledger.create_session(request(), NOW).expect("created").session.id;
        let refused = ledger.pay_session(&id, NOW, Method::Card).expect_err("no room for the intent");
        assert_eq!(refused.status, warp::http::StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(ledger.session(&id, NOW, Expansion::Id).expect("read").session.status, SessionStatus::Open);
        assert_eq!(ledger.session("cs_nope", NOW, Expansion::Id).expect_err("missing").code, Some("resource_missing"));
    }
}
