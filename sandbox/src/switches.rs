//! The test switches: faults a real provider shows now and then (late,
//! repeated, lost or reordered webhooks, an outage of refunds), turned on
//! at will so the platform's tests can show it copes with each.

use serde::{Deserialize, Serialize};
use tokio::time::{Duration, Instant};

/// The switches in force.
#[derive(Debug, Clone, Default)]
pub(crate) struct Switches {
    /// Wait before each delivery's first attempt.
    pub(crate) webhook_delay_ms: u64,
    /// Deliver every event twice (same event id), as providers may.
    pub(crate) duplicate_webhooks: bool,
    /// How many of the next events are never delivered.
    pub(crate) drop_webhooks: u32,
    /// Hold queued events briefly and deliver each batch newest first.
    pub(crate) reorder_webhooks: bool,
    /// Until when every refund call fails with `500`.
    pub(crate) fail_refunds_until: Option<Instant>,
    /// How long a refund call's answer is held back after the refund is
    /// made: a caller that dies meanwhile never learns it was (the refund
    /// worker killed mid-refund).
    pub(crate) refund_answer_delay_ms: u64,
}

/// A `POST /sandbox/settings` body: the fields given replace the current
/// ones, the others stay.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SwitchesUpdate {
    webhook_delay_ms: Option<u64>,
    duplicate_webhooks: Option<bool>,
    drop_webhooks: Option<u32>,
    reorder_webhooks: Option<bool>,
    /// From now; 0 ends an outage.
    fail_refunds_for_ms: Option<u64>,
    refund_answer_delay_ms: Option<u64>,
}

/// The switches as `GET /sandbox/settings` shows them.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct SwitchesView {
    webhook_delay_ms: u64,
    duplicate_webhooks: bool,
    drop_webhooks: u32,
    reorder_webhooks: bool,
    /// What is left of the refund outage.
    fail_refunds_for_ms: u64,
    refund_answer_delay_ms: u64,
}

/// Longest delay or outage a switch sets: an hour, past any test.
const MAX_SWITCH_MS: u64 = 3_600_000;

impl Switches {
    /// Merges `update`, set at `now`.
    pub(crate) fn apply(&mut self, update: &SwitchesUpdate, now: Instant) {
        if let Some(delay) = update.webhook_delay_ms {
            self.webhook_delay_ms = delay.min(MAX_SWITCH_MS);
        }
        if let Some(duplicate) = update.duplicate_webhooks {
            self.duplicate_webhooks = duplicate;
        }
        if let Some(drop) = update.drop_webhooks {
            self.drop_webhooks = drop;
        }
        if let Some(reorder) = update.reorder_webhooks {
            self.reorder_webhooks = reorder;
        }
        if let Some(delay) = update.refund_answer_delay_ms {
            self.refund_answer_delay_ms = delay.min(MAX_SWITCH_MS);
        }
        if let Some(outage) = update.fail_refunds_for_ms {
            self.fail_refunds_until = (outage > 0).then(|| now + Duration::from_millis(outage.min(MAX_SWITCH_MS)));
        }
    }

    /// Whether refunds fail at `now`.
    pub(crate) fn refunds_failing(&self, now: Instant) -> bool {
        self.fail_refunds_until.is_some_and(|until| now < until)
    }

    /// Counts one event against `drop_webhooks`: true if it is to be lost.
    pub(crate) fn take_drop(&mut self) -> bool {
        if self.drop_webhooks == 0 {
            return false;
        }
        self.drop_webhooks -= 1;
        true
    }

    /// The switches as shown at `now`.
    pub(crate) fn view(&self, now: Instant) -> SwitchesView {
        let left = self.fail_refunds_until.map_or(Duration::ZERO, |until| until.saturating_duration_since(now));
        SwitchesView {
            webhook_delay_ms: self.webhook_delay_ms,
            duplicate_webhooks: self.duplicate_webhooks,
            drop_webhooks: self.drop_webhooks,
            reorder_webhooks: self.reorder_webhooks,
            fail_refunds_for_ms: u64::try_from(left.as_millis()).unwrap_or(u64::MAX),
            refund_answer_delay_ms: self.refund_answer_delay_ms,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn updates_merge_and_outages_end() {
        let now = Instant::now();
        let mut switches = Switches::default();
        let update: SwitchesUpdate =
            serde_json::from_str(r#"{"drop_webhooks": 2, "fail_refunds_for_ms": 100}"#).expect("valid");
        switches.apply(&update, now);
        let update: SwitchesUpdate = serde_json::from_str(r#"{"duplicate_webhooks": true}"#).expect("valid");
        switches.apply(&update, now);
        assert!(switches.duplicate_webhooks);
        assert!(switches.refunds_failing(now + Duration::from_millis(99)));
        assert!(!switches.refunds_failing(now + Duration::from_millis(100)));
        assert_eq!(switches.view(now).fail_refunds_for_ms, 100);
        assert!(switches.take_drop() && switches.take_drop() && !switches.take_drop());
        assert!(serde_json::from_str::<SwitchesUpdate>(r#"{"drop_webhook": 1}"#).is_err(), "typos are refused");
    }
}
