//! The test switches: faults a real provider shows now and then (late,
//! repeated, lost or reordered webhooks, an outage of refunds) and the
//! provider's own timing (search lag, bank debits and refunds that settle
//! later, saved answers to idempotency keys), turned on at will so the
//! platform's tests can show it copes with each.

use serde::{Deserialize, Serialize};
use tokio::time::{Duration, Instant};

use crate::ledger::Method;
use crate::SandboxConfig;

/// Longest delay or outage a switch sets: an hour, past any test.
const MAX_SWITCH_MS: u64 = 3_600_000;
/// Stripe's lifetime of an idempotency key, and the longest allowed.
pub(crate) const DAY_MS: u64 = 86_400_000;
/// Most event types an endpoint is subscribed to by name.
const MAX_ENABLED_EVENTS: usize = 256;

/// The switches in force.
#[derive(Debug, Clone)]
pub(crate) struct Switches {
    /// Wait before each delivery's first attempt.
    pub(crate) webhook_delay_ms: u64,
    /// Deliver every event twice (same event id), as providers may.
    pub(crate) duplicate_webhooks: bool,
    /// How many of the next events are never delivered.
    pub(crate) drop_webhooks: u32,
    /// Hold queued events briefly and deliver each batch newest first.
    pub(crate) reorder_webhooks: bool,
    /// The event types the endpoint is subscribed to (`*`: all), as a
    /// Stripe webhook endpoint's `enabled_events`.
    pub(crate) enabled_events: Vec<String>,
    /// Until when every refund call fails with `500`.
    pub(crate) fail_refunds_until: Option<Instant>,
    /// How long a refund call's answer is held back after the refund is
    /// made: a caller that dies meanwhile never learns it was (the refund
    /// worker killed mid-refund).
    pub(crate) refund_answer_delay_ms: u64,
    /// How long a change to an intent takes to reach search: Stripe's
    /// search is eventually consistent.
    pub(crate) search_lag_ms: u64,
    /// Save failed answers under their idempotency key too, as Stripe
    /// does, so a retry under the key gets the failure again.
    pub(crate) replay_failures: bool,
    /// How long an idempotency key is remembered.
    pub(crate) idempotency_ttl_ms: u64,
    /// Checkout is paid by a bank debit: the session completes unpaid and
    /// the money settles `async_settle_ms` later.
    pub(crate) async_payments: bool,
    /// Such a debit fails instead of settling.
    pub(crate) async_payments_fail: bool,
    pub(crate) async_settle_ms: u64,
    /// How long a refund stays `pending` (0: refunds succeed at once).
    pub(crate) pending_refunds_ms: u64,
    /// A pending refund fails instead of succeeding.
    pub(crate) fail_pending_refunds: bool,
}

impl Default for Switches {
    fn default() -> Self {
        Self {
            webhook_delay_ms: 0,
            duplicate_webhooks: false,
            drop_webhooks: 0,
            reorder_webhooks: false,
            enabled_events: vec!["*".to_owned()],
            fail_refunds_until: None,
            refund_answer_delay_ms: 0,
            search_lag_ms: 2_000,
            replay_failures: true,
            idempotency_ttl_ms: DAY_MS,
            async_payments: false,
            async_payments_fail: false,
            async_settle_ms: 2_000,
            pending_refunds_ms: 0,
            fail_pending_refunds: false,
        }
    }
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
    enabled_events: Option<Vec<String>>,
    /// From now; 0 ends an outage.
    fail_refunds_for_ms: Option<u64>,
    refund_answer_delay_ms: Option<u64>,
    search_lag_ms: Option<u64>,
    replay_failures: Option<bool>,
    idempotency_ttl_ms: Option<u64>,
    async_payments: Option<bool>,
    async_payments_fail: Option<bool>,
    async_settle_ms: Option<u64>,
    pending_refunds_ms: Option<u64>,
    fail_pending_refunds: Option<bool>,
}

/// The switches as `GET /sandbox/settings` shows them.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct SwitchesView {
    webhook_delay_ms: u64,
    duplicate_webhooks: bool,
    drop_webhooks: u32,
    reorder_webhooks: bool,
    enabled_events: Vec<String>,
    /// What is left of the refund outage.
    fail_refunds_for_ms: u64,
    refund_answer_delay_ms: u64,
    search_lag_ms: u64,
    replay_failures: bool,
    idempotency_ttl_ms: u64,
    async_payments: bool,
    async_payments_fail: bool,
    async_settle_ms: u64,
    pending_refunds_ms: u64,
    fail_pending_refunds: bool,
}

impl Switches {
    /// The defaults, with the ones `config` starts with.
    pub(crate) fn new(config: &SandboxConfig) -> Self {
        Self {
            search_lag_ms: config.search_lag_ms.min(MAX_SWITCH_MS),
            enabled_events: config.enabled_events.clone(),
            pending_refunds_ms: config.pending_refunds_ms.min(MAX_SWITCH_MS),
            ..Self::default()
        }
    }

    /// Merges `update`, set at `now`; refuses (changing nothing) an
    /// `enabled_events` that is empty or too long.
    pub(crate) fn apply(&mut self, update: &SwitchesUpdate, now: Instant) -> Result<(), String> {
        if let Some(events) = &update.enabled_events {
            check_enabled_events(events)?;
            self.enabled_events.clone_from(events);
        }
        let capped = |ms: Option<u64>, cap: u64| ms.map(|ms| ms.min(cap));
        let keep = |target: &mut u64, value: Option<u64>| {
            if let Some(value) = value {
                *target = value;
            }
        };
        keep(&mut self.webhook_delay_ms, capped(update.webhook_delay_ms, MAX_SWITCH_MS));
        keep(&mut self.refund_answer_delay_ms, capped(update.refund_answer_delay_ms, MAX_SWITCH_MS));
        keep(&mut self.search_lag_ms, capped(update.search_lag_ms, MAX_SWITCH_MS));
        keep(&mut self.idempotency_ttl_ms, capped(update.idempotency_ttl_ms, DAY_MS));
        keep(&mut self.async_settle_ms, capped(update.async_settle_ms, MAX_SWITCH_MS));
        keep(&mut self.pending_refunds_ms, capped(update.pending_refunds_ms, MAX_SWITCH_MS));
        for (target, value) in [
            (&mut self.duplicate_webhooks, update.duplicate_webhooks),
            (&mut self.reorder_webhooks, update.reorder_webhooks),
            (&mut self.replay_failures, update.replay_failures),
            (&mut self.async_payments, update.async_payments),
            (&mut self.async_payments_fail, update.async_payments_fail),
            (&mut self.fail_pending_refunds, update.fail_pending_refunds),
        ] {
            if let Some(value) = value {
                *target = value;
            }
        }
        if let Some(drop) = update.drop_webhooks {
            self.drop_webhooks = drop;
        }
        if let Some(outage) = update.fail_refunds_for_ms {
            self.fail_refunds_until = (outage > 0).then(|| now + Duration::from_millis(outage.min(MAX_SWITCH_MS)));
        }
        Ok(())
    }

    /// Whether refunds fail at `now`.
    pub(crate) fn refunds_failing(&self, now: Instant) -> bool {
        self.fail_refunds_until.is_some_and(|until| now < until)
    }

    /// How a buyer pays at checkout now.
    pub(crate) fn payment_method(&self) -> Method {
        if self.async_payments {
            Method::BankDebit { settle_ms: self.async_settle_ms, fail: self.async_payments_fail }
        } else {
            Method::Card
        }
    }

    /// Whether the endpoint is subscribed to events of `kind`.
    pub(crate) fn enabled(&self, kind: &str) -> bool {
        self.enabled_events.iter().any(|enabled| enabled == "*" || enabled == kind)
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
            enabled_events: self.enabled_events.clone(),
            fail_refunds_for_ms: u64::try_from(left.as_millis()).unwrap_or(u64::MAX),
            refund_answer_delay_ms: self.refund_answer_delay_ms,
            search_lag_ms: self.search_lag_ms,
            replay_failures: self.replay_failures,
            idempotency_ttl_ms: self.idempotency_ttl_ms,
            async_payments: self.async_payments,
            async_payments_fail: self.async_payments_fail,
            async_settle_ms: self.async_settle_ms,
            pending_refunds_ms: self.pending_refunds_ms,
            fail_pending_refunds: self.fail_pending_refunds,
        }
    }
}

/// An endpoint's subscription: `*` or event types, at least one.
pub(crate) fn check_enabled_events(events: &[String]) -> Result<(), String> {
    if events.is_empty() || events.len() > MAX_ENABLED_EVENTS {
        return Err(format!("enabled_events must name 1 to {MAX_ENABLED_EVENTS} event types (or \"*\")"));
    }
    if events.iter().any(|kind| kind.is_empty() || kind.len() > 100 || kind.contains(char::is_whitespace)) {
        return Err("enabled_events entries must be event types such as checkout.session.completed".to_owned());
    }
    Ok(())
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
        switches.apply(&update, now).expect("applied");
        let update: SwitchesUpdate = serde_json::from_str(r#"{"duplicate_webhooks": true}"#).expect("valid");
        switches.apply(&update, now).expect("applied");
        assert!(switches.duplicate_webhooks);
        assert!(switches.refunds_failing(now + Duration::from_millis(99)));
        assert!(!switches.refunds_failing(now + Duration::from_millis(100)));
        assert_eq!(switches.view(now).fail_refunds_for_ms, 100);
        assert!(switches.take_drop() && switches.take_drop() && !switches.take_drop());
        assert!(serde_json::from_str::<SwitchesUpdate>(r#"{"drop_webhook": 1}"#).is_err(), "typos are refused");
    }

    #[test]
    fn the_provider_timings_default_to_stripes_and_are_capped() {
        let now = Instant::now();
        let mut switches = Switches::default();
        assert_eq!((switches.search_lag_ms, switches.idempotency_ttl_ms), (2_000, DAY_MS));
        assert!(switches.replay_failures && !switches.async_payments);
        let update: SwitchesUpdate = serde_json::from_str(
            r#"{"search_lag_ms": 0, "idempotency_ttl_ms": 999999999999, "async_payments": true, "pending_refunds_ms": 5}"#,
        )
        .expect("valid");
        switches.apply(&update, now).expect("applied");
        assert_eq!((switches.search_lag_ms, switches.idempotency_ttl_ms), (0, DAY_MS));
        assert!(switches.async_payments && !switches.async_payments_fail);
        assert_eq!(switches.pending_refunds_ms, 5);
    }

    #[test]
    fn the_endpoint_receives_only_the_enabled_events() {
        let now = Instant::now();
        let mut switches = Switches::default();
        assert!(switches.enabled("anything.at_all"));
        let update: SwitchesUpdate =
            serde_json::from_str(r#"{"enabled_events": ["checkout.session.completed"]}"#).expect("valid");
        switches.apply(&update, now).expect("applied");
        assert!(switches.enabled("checkout.session.completed") && !switches.enabled("payment_intent.succeeded"));
        let empty: SwitchesUpdate =
            serde_json::from_str(r#"{"enabled_events": [], "async_payments": true}"#).expect("valid");
        assert!(switches.apply(&empty, now).is_err());
        assert!(!switches.async_payments, "a refused update changes nothing");
    }
}
