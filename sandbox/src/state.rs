//! What every route shares: the books, the switches and the webhook queue.

use std::sync::{Arc, Mutex};

use seckill_payments::PaymentIntent;

use crate::failure::Failure;
use crate::ledger::Ledger;
use crate::switches::Switches;
use crate::sync::lock;
use crate::webhooks::Webhooks;

/// The sandbox's shared state.
#[derive(Debug)]
pub(crate) struct State {
    pub(crate) ledger: Mutex<Ledger>,
    pub(crate) switches: Arc<Mutex<Switches>>,
    pub(crate) webhooks: Webhooks,
    /// The key callers of `/v1` must present.
    pub(crate) api_key: String,
}

/// Now, in Stripe's unit: unix seconds.
pub(crate) fn unix_now() -> i64 {
    chrono::Utc::now().timestamp()
}

/// What the buyer did at the checkout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    Pay,
    Decline,
}

impl State {
    /// Records the buyer's payment or decline now and queues its event
    /// (after the books are unlocked: delivery never holds them up).
    pub(crate) fn settle(&self, id: &str, outcome: Outcome) -> Result<PaymentIntent, Failure> {
        let settled = {
            let mut ledger = lock(&self.ledger);
            match outcome {
                Outcome::Pay => ledger.pay(id, unix_now()),
                Outcome::Decline => ledger.decline(id, unix_now()),
            }
        };
        let (intent, event) = settled?;
        tracing::debug!(intent = id, ?outcome, "Checkout settled.");
        self.webhooks.enqueue(event);
        Ok(intent)
    }
}
