//! What Stripe's search shows of one intent. Search is eventually
//! consistent: a change reaches it some time after it is made (the
//! `search_lag_ms` switch), so until then search finds the intent as it
//! was before, or not at all if it is that new.

use std::collections::VecDeque;

use seckill_payments::PaymentIntent;

use crate::clock::Moment;

/// Changes still on their way at most; past it the oldest is shown early,
/// so an intent changed without end cannot grow its history without end.
const MAX_COMING: usize = 8;

/// The version search shows and the changes on their way, oldest first.
#[derive(Debug, Default)]
pub(super) struct Versions {
    shown: Option<PaymentIntent>,
    coming: VecDeque<(Moment, PaymentIntent)>,
}

impl Versions {
    /// Records the intent as changed `at`.
    pub(super) fn record(&mut self, at: Moment, intent: PaymentIntent) {
        if self.coming.len() >= MAX_COMING {
            self.shown = self.coming.pop_front().map(|(_, intent)| intent);
        }
        self.coming.push_back((at, intent));
    }

    /// The version search shows when changes made up to `cutoff` have
    /// reached it. Cutoffs move forward with the clock; a version once
    /// shown stays shown even if the lag is raised afterwards.
    pub(super) fn as_of(&mut self, cutoff: Moment) -> Option<&PaymentIntent> {
        while self.coming.front().is_some_and(|(at, _)| *at <= cutoff) {
            self.shown = self.coming.pop_front().map(|(_, intent)| intent);
        }
        self.shown.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn intent(status: &str) -> PaymentIntent {
        serde_json::from_value(serde_json::json!({
            "id": "pi_1", "object": "payment_intent", "amount": 5, "currency": "eur",
            "status": status, "created": 1
        }))
        .expect("an intent")
    }

    #[test]
    fn a_change_shows_once_the_lag_has_passed() {
        let created = Moment::from_secs(100);
        let mut versions = Versions::default();
        versions.record(created, intent("requires_payment_method"));
        versions.record(created.after_ms(500), intent("succeeded"));
        assert_eq!(versions.as_of(created.before_ms(1)), None, "too new to be found");
        let shown = versions.as_of(created.after_ms(499)).map(|intent| intent.status.as_str());
        assert_eq!(shown, Some("requires_payment_method"), "the payment not yet indexed");
        let shown = versions.as_of(created.after_ms(500)).map(|intent| intent.status.as_str());
        assert_eq!(shown, Some("succeeded"));
    }

    #[test]
    fn the_history_is_bounded() {
        let at = Moment::from_secs(100);
        let mut versions = Versions::default();
        for _ in 0..=MAX_COMING {
            versions.record(at, intent("processing"));
        }
        assert_eq!(versions.coming.len(), MAX_COMING);
        assert!(versions.shown.is_some());
    }
}
