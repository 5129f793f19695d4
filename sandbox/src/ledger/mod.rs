//! The sandbox's books: every intent, charge, refund and checkout session,
//! in memory, with Stripe's rules on what may happen to each. Pure state:
//! the clock is passed in, and each change a provider announces leaves its
//! event in an outbox the caller drains ([`Ledger::take_events`]) and
//! delivers once the books are unlocked.
//!
//! Changes that happen later by themselves (a session expiring, a bank
//! debit settling, a pending refund ending) wait in a timer queue, run by
//! [`Ledger::run_due`] before every call and from a ticker.

mod attempts;
mod audit;
mod due;
mod intents;
mod refunds;
mod search_index;
mod sessions;

use std::collections::HashMap;

use seckill_payments::{Event, PaymentIntent};

pub(crate) use attempts::Attempt;
pub(crate) use audit::Audit;
pub(crate) use intents::IntentRequest;
pub(crate) use refunds::{RefundRecord, RefundTiming};
pub(crate) use sessions::{Expansion, Method, SessionRecord, SessionRequest};

use crate::clock::Moment;
use crate::failure::Failure;
use crate::idempotency::Replays;

/// Stripe's largest amount (eight digits in the smallest unit).
pub(crate) const MAX_AMOUNT: u64 = 99_999_999;

/// Every object the sandbox holds.
#[derive(Debug)]
pub(crate) struct Ledger {
    /// Bound on intents, refunds and sessions together.
    max_objects: usize,
    /// `<public_url>/checkout/`: checkout pages are this plus the id.
    checkout_base: String,
    /// In creation order, for audits.
    intents: Vec<PaymentIntent>,
    intent_index: HashMap<String, usize>,
    /// Positions in `intents` of each order's intents, for search.
    by_order: HashMap<String, Vec<usize>>,
    /// What search shows of each intent, by position in `intents`.
    search: Vec<search_index::Versions>,
    refunds: Vec<RefundRecord>,
    refund_index: HashMap<String, usize>,
    /// Positions in `refunds` of each intent's refunds.
    refunds_by_intent: HashMap<String, Vec<usize>>,
    /// Each intent's refund calls, for audits.
    refund_attempts: HashMap<String, attempts::RefundAttempts>,
    sessions: Vec<SessionRecord>,
    session_index: HashMap<String, usize>,
    /// Changes that happen by themselves later.
    due: due::Due,
    /// Events announced and not yet taken for delivery.
    outbox: Vec<Event>,
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
            search: Vec::new(),
            refunds: Vec::new(),
            refund_index: HashMap::new(),
            refunds_by_intent: HashMap::new(),
            refund_attempts: HashMap::new(),
            sessions: Vec::new(),
            session_index: HashMap::new(),
            due: due::Due::default(),
            outbox: Vec::new(),
            replays: Replays::new(max_objects),
        }
    }

    /// Refuses a new object past `max_objects`, as a rate limit (`429`).
    fn ensure_room(&self) -> Result<(), Failure> {
        if self.intents.len() + self.refunds.len() + self.sessions.len() >= self.max_objects {
            return Err(Failure::rate_limited(format!(
                "The sandbox holds its limit of {} objects (max_objects); restart it to start afresh.",
                self.max_objects
            )));
        }
        Ok(())
    }

    fn announce(&mut self, event: Event) {
        self.outbox.push(event);
    }

    /// The events announced since the last call, oldest first.
    pub(crate) fn take_events(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.outbox)
    }

    /// Makes the changes due by `now`, at most `budget` of them (the rest
    /// wait for the next call); returns how many ran.
    pub(crate) fn run_due(&mut self, now: Moment, budget: usize) -> usize {
        let mut ran = 0;
        while ran < budget {
            let Some(task) = self.due.pop(now) else {
                break;
            };
            match task {
                due::Task::ExpireSession(id) => self.sweep_session(&id, now),
                due::Task::SettleSession { id, fail } => self.settle_session(&id, fail, now),
                due::Task::SettleRefund { id, fail } => self.settle_refund(&id, fail, now),
            }
            ran += 1;
        }
        ran
    }

    /// The checkout page of `id`.
    fn checkout_url(&self, id: &str) -> String {
        format!("{}{id}", self.checkout_base)
    }
}
