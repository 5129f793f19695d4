//! Every call made to refund an intent, kept for audits: a test can tell
//! how many idempotency keys the platform used for one payment's refund
//! (one, if its retries are safe) and what each call was answered.

use serde::Serialize;

use super::Ledger;

/// Calls kept per intent at most; past it they are only counted.
const MAX_KEPT: usize = 100;

/// One refund call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Attempt {
    /// `null` for a call without one.
    pub(crate) idempotency_key: Option<String>,
    /// The HTTP status answered.
    pub(crate) status: u16,
    /// Whether the answer was a saved one replayed.
    pub(crate) replayed: bool,
}

/// The refund calls naming one intent.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub(crate) struct RefundAttempts {
    /// Every call, kept or not.
    pub(crate) total: u64,
    /// The distinct keys used, in first use order (at most 100).
    pub(crate) idempotency_keys: Vec<String>,
    /// The first 100 calls.
    pub(crate) calls: Vec<Attempt>,
}

impl Ledger {
    /// Records a refund call naming intent `id`; calls naming no intent of
    /// the sandbox are not kept (nothing could be refunded twice by them).
    pub(crate) fn record_refund_attempt(&mut self, id: &str, attempt: Attempt) {
        if !self.intent_index.contains_key(id) {
            return;
        }
        let attempts = self.refund_attempts.entry(id.to_owned()).or_default();
        attempts.total += 1;
        if let Some(key) = &attempt.idempotency_key {
            if attempts.idempotency_keys.len() < MAX_KEPT && !attempts.idempotency_keys.contains(key) {
                attempts.idempotency_keys.push(key.clone());
            }
        }
        if attempts.calls.len() < MAX_KEPT {
            attempts.calls.push(attempt);
        }
    }
}
