//! Faults a test can switch on in the proxy: the server failing requests
//! from a chosen point on.

use std::sync::atomic::{AtomicI64, Ordering};

/// Shared by every connection of one proxy.
#[derive(Debug)]
pub(super) struct Faults {
    /// BATCH requests still let through before every further one fails;
    /// negative: none fails.
    batches_before_failure: AtomicI64,
}

impl Faults {
    pub(super) fn new() -> Self {
        Self { batches_before_failure: AtomicI64::new(-1) }
    }

    /// From now on, the first `passing` BATCH requests reach the server and
    /// every later one fails without reaching it.
    pub(super) fn fail_batches_after(&self, passing: u64) {
        self.batches_before_failure.store(i64::try_from(passing).unwrap_or(i64::MAX), Ordering::SeqCst);
    }

    /// Every request reaches the server again.
    pub(super) fn heal(&self) {
        self.batches_before_failure.store(-1, Ordering::SeqCst);
    }

    /// Whether this BATCH request fails instead of reaching the server.
    pub(super) fn batch_fails(&self) -> bool {
        let before = self
            .batches_before_failure
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |left| (left > 0).then(|| left - 1))
            .unwrap_or_else(|left| left);
        before == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_pass_until_the_budget_is_spent_then_fail_until_healed() {
        let faults = Faults::new();
        assert!(!faults.batch_fails(), "off by default");
        faults.fail_batches_after(2);
        assert_eq!(
            [faults.batch_fails(), faults.batch_fails(), faults.batch_fails(), faults.batch_fails()],
            [false, false, true, true]
        );
        faults.heal();
        assert!(!faults.batch_fails());
    }
}
