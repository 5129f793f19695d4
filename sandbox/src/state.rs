//! What every route shares: the books, the switches and the webhook queue.

use std::sync::{Arc, Mutex};

use crate::clock::Moment;
use crate::ledger::Ledger;
use crate::switches::Switches;
use crate::sync::lock;
use crate::webhooks::Webhooks;

/// Changes come due that one call makes before its own, at most: the
/// ticker makes the rest.
const DUE_PER_CALL: usize = 1_000;

/// The sandbox's shared state.
#[derive(Debug)]
pub(crate) struct State {
    pub(crate) ledger: Mutex<Ledger>,
    pub(crate) switches: Arc<Mutex<Switches>>,
    pub(crate) webhooks: Webhooks,
    /// The key callers of `/v1` must present.
    pub(crate) api_key: String,
    /// The shortest lifetime a session may ask for, in seconds.
    pub(crate) min_session_seconds: i64,
}

impl State {
    /// Runs `action` on the books at `now`, after the changes due by then
    /// (an expiry, a debit settling), and queues the events announced once
    /// the books are unlocked: delivery never holds them up.
    pub(crate) fn with_ledger<R>(&self, action: impl FnOnce(&mut Ledger, Moment) -> R) -> R {
        let now = Moment::now();
        let (result, events) = {
            let mut ledger = lock(&self.ledger);
            ledger.run_due(now, DUE_PER_CALL);
            let result = action(&mut ledger, now);
            (result, ledger.take_events())
        };
        for event in events {
            self.webhooks.enqueue(event);
        }
        result
    }

    /// The switches in force (a copy, so the books are never locked while
    /// the switches are).
    pub(crate) fn switches(&self) -> Switches {
        lock(&self.switches).clone()
    }
}
