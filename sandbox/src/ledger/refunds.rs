//! Refunds, in full, of a succeeded intent's charge. A refund is made
//! `succeeded` at once, or `pending` and settled later (the
//! `pending_refunds_ms` switch). As at Stripe, the charge counts a pending
//! refund as refunded (`charge.refunded` is announced when the refund is
//! made), a second refund is refused while one is pending or succeeded
//! (`charge_already_refunded`), and a refund that fails gives the amount
//! back to the charge, which can then be refunded again.

use seckill_payments::{ChargeRef, IntentStatus, Refund};
use serde::Serialize;

use super::due::Task;
use super::Ledger;
use crate::clock::Moment;
use crate::events::event;
use crate::failure::Failure;
use crate::ids::new_id;

/// Stripe's refund statuses the sandbox uses.
const SUCCEEDED: &str = "succeeded";
const PENDING: &str = "pending";
const FAILED: &str = "failed";

/// A refund as Stripe answers it: the shared fields and the ones only
/// the sandbox's answers carry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct RefundRecord {
    #[serde(flatten)]
    pub(crate) refund: Refund,
    /// The charge refunded.
    pub(crate) charge: String,
    /// Why it failed, once it has (`unknown`: the bank did not say).
    pub(crate) failure_reason: Option<String>,
}

impl RefundRecord {
    /// Whether it refunds or will refund the charge: not failed.
    fn is_live(&self) -> bool {
        matches!(self.refund.status.as_str(), SUCCEEDED | PENDING)
    }
}

/// When a new refund settles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RefundTiming {
    /// 0: at once; else it is `pending` this long.
    pub(crate) pending_ms: u64,
    /// A pending refund ends `failed` rather than `succeeded`.
    pub(crate) fail: bool,
}

#[cfg(test)]
impl RefundTiming {
    /// Refunds succeed at once.
    pub(crate) const AT_ONCE: Self = Self { pending_ms: 0, fail: false };
}

impl Ledger {
    /// Refunds a succeeded intent in full; `amount`, when given, must be
    /// the whole amount.
    pub(crate) fn refund(
        &mut self,
        id: &str,
        amount: Option<u64>,
        now: Moment,
        timing: RefundTiming,
    ) -> Result<RefundRecord, Failure> {
        let intent = self.intent(id)?;
        let Some(ChargeRef::Expanded(charge)) =
            intent.latest_charge.as_ref().filter(|_| intent.status == IntentStatus::Succeeded)
        else {
            return Err(Failure::invalid(
                "payment_intent_unexpected_state",
                format!(
                    "PaymentIntent {id} has no successful charge to refund (its status is {}).",
                    intent.status.as_str()
                ),
            ));
        };
        if self.refunds_for(id).iter().any(RefundRecord::is_live) {
            return Err(Failure::invalid(
                "charge_already_refunded",
                format!("Charge {} has already been refunded.", charge.id),
            ));
        }
        if amount.is_some_and(|amount| amount != intent.amount) {
            return Err(Failure::param("parameter_invalid", "amount", "The sandbox refunds only the full amount."));
        }
        self.ensure_room()?;
        let record = RefundRecord {
            refund: Refund {
                id: new_id("re"),
                object: "refund".to_owned(),
                amount: intent.amount,
                currency: intent.currency.clone(),
                payment_intent: Some(intent.id.clone()),
                status: if timing.pending_ms == 0 { SUCCEEDED } else { PENDING }.to_owned(),
                created: now.secs(),
            },
            charge: charge.id.clone(),
            failure_reason: None,
        };
        let position = self.refunds.len();
        self.refund_index.insert(record.refund.id.clone(), position);
        self.refunds_by_intent.entry(intent.id.clone()).or_default().push(position);
        self.refunds.push(record.clone());
        if timing.pending_ms > 0 {
            let task = Task::SettleRefund { id: record.refund.id.clone(), fail: timing.fail };
            self.due.schedule(now.after_ms(timing.pending_ms), task);
        }
        self.set_refunded(id, now, true)?;
        Ok(record)
    }

    /// A pending refund ends: `succeeded`, or `failed` giving the amount
    /// back to the charge. Announced as `refund.updated` (and
    /// `refund.failed`), the refund as `data.object`.
    pub(super) fn settle_refund(&mut self, id: &str, fail: bool, now: Moment) {
        let Some(record) = self.refund_index.get(id).and_then(|position| self.refunds.get_mut(*position)) else {
            return;
        };
        if record.refund.status != PENDING {
            return;
        }
        record.refund.status = if fail { FAILED } else { SUCCEEDED }.to_owned();
        if fail {
            record.failure_reason = Some("unknown".to_owned());
        }
        let record = record.clone();
        if fail {
            if let Err(failure) =
                self.set_refunded(record.refund.payment_intent.as_deref().unwrap_or_default(), now, false)
            {
                tracing::warn!(refund = id, error = %failure.message, "A failed refund's charge could not be restored.");
            }
            self.announce(event("refund.failed", now.secs(), &record));
        }
        self.announce(event("refund.updated", now.secs(), &record));
    }

    /// Marks the intent's charge refunded in full (or no longer) and, when
    /// refunded, announces `charge.refunded` with the charge.
    fn set_refunded(&mut self, id: &str, now: Moment, refunded: bool) -> Result<(), Failure> {
        let charge = self.change_intent(id, now, |intent| {
            let Some(ChargeRef::Expanded(charge)) = intent.latest_charge.as_mut() else {
                return Err(Failure::api_error("The intent lost its charge."));
            };
            charge.refunded = refunded;
            charge.amount_refunded = if refunded { charge.amount } else { 0 };
            Ok(charge.clone())
        })?;
        if refunded {
            self.announce(event("charge.refunded", now.secs(), &charge));
        }
        Ok(())
    }

    /// One refund as it is now.
    pub(crate) fn refund_by_id(&self, id: &str) -> Result<RefundRecord, Failure> {
        self.refund_index
            .get(id)
            .and_then(|position| self.refunds.get(*position).cloned())
            .ok_or_else(|| Failure::missing("refund", id))
    }

    /// The refunds of one intent, oldest first.
    pub(crate) fn refunds_for(&self, id: &str) -> Vec<RefundRecord> {
        let positions = self.refunds_by_intent.get(id).map(Vec::as_slice).unwrap_or_default();
        positions.iter().filter_map(|position| self.refunds.get(*position).cloned()).collect()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::ledger::IntentRequest;

    const NOW: Moment = Moment::from_secs(1_700_000_000);

    fn paid(ledger: &mut Ledger) -> String {
        let request =
            IntentRequest { amount: 1_500, currency: "eur".to_owned(), metadata: BTreeMap::new(), return_url: None };
        let intent = ledger.create_intent(request, NOW).expect("created");
        ledger.pay(&intent.id, NOW).expect("paid");
        ledger.take_events();
        intent.id
    }

    fn kinds(ledger: &mut Ledger) -> Vec<String> {
        ledger.take_events().into_iter().map(|event| event.kind).collect()
    }

    #[test]
    fn a_paid_intent_is_refunded_once_in_full() {
        let mut ledger = Ledger::new(10, "http://sandbox");
        let unpaid = ledger
            .create_intent(
                IntentRequest { amount: 5, currency: "eur".to_owned(), metadata: BTreeMap::new(), return_url: None },
                NOW,
            )
            .expect("created");
        assert!(ledger.refund(&unpaid.id, None, NOW, RefundTiming::AT_ONCE).is_err(), "not paid");
        let id = paid(&mut ledger);
        assert!(ledger.refund(&id, Some(1), NOW, RefundTiming::AT_ONCE).is_err(), "partial");
        let refund = ledger.refund(&id, None, NOW.after_ms(3_000), RefundTiming::AT_ONCE).expect("refunded");
        assert_eq!((refund.refund.amount, refund.refund.status.as_str()), (1_500, "succeeded"));
        let events = ledger.take_events();
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].kind, "charge.refunded");
        assert_eq!(events[0].data.object["refunded"], serde_json::json!(true));
        assert_eq!(events[0].data.object["id"], serde_json::json!(refund.charge));
        let twice = ledger.refund(&id, None, NOW, RefundTiming::AT_ONCE).expect_err("twice");
        assert_eq!(twice.code, Some("charge_already_refunded"));
        assert_eq!(ledger.refunds_for(&id), vec![refund]);
    }

    #[test]
    fn a_pending_refund_succeeds_later() {
        let mut ledger = Ledger::new(10, "http://sandbox");
        let id = paid(&mut ledger);
        let timing = RefundTiming { pending_ms: 500, fail: false };
        let refund = ledger.refund(&id, None, NOW, timing).expect("made");
        assert_eq!(refund.refund.status, "pending");
        assert_eq!(kinds(&mut ledger), ["charge.refunded"]);
        let again = ledger.refund(&id, None, NOW, RefundTiming::AT_ONCE).expect_err("pending covers it");
        assert_eq!(again.code, Some("charge_already_refunded"));
        assert_eq!(ledger.run_due(NOW.after_ms(499), 10), 0);
        assert_eq!(ledger.run_due(NOW.after_ms(500), 10), 1);
        let events = ledger.take_events();
        assert_eq!(events.iter().map(|event| event.kind.as_str()).collect::<Vec<_>>(), ["refund.updated"]);
        assert_eq!(events[0].refund().expect("a refund").status, "succeeded");
        assert_eq!(ledger.refunds_for(&id)[0].refund.status, "succeeded");
    }

    #[test]
    fn a_failed_refund_frees_the_charge_for_another() {
        let mut ledger = Ledger::new(10, "http://sandbox");
        let id = paid(&mut ledger);
        ledger.refund(&id, None, NOW, RefundTiming { pending_ms: 500, fail: true }).expect("made");
        ledger.take_events();
        ledger.run_due(NOW.after_ms(500), 10);
        let events = ledger.take_events();
        assert_eq!(
            events.iter().map(|event| event.kind.as_str()).collect::<Vec<_>>(),
            ["refund.failed", "refund.updated"]
        );
        assert_eq!(events[0].data.object["failure_reason"], "unknown");
        let Some(ChargeRef::Expanded(charge)) = ledger.intent(&id).expect("intent").latest_charge else {
            panic!("the charge is expanded");
        };
        assert_eq!((charge.refunded, charge.amount_refunded), (false, 0));
        let second = ledger.refund(&id, None, NOW.after_ms(600), RefundTiming::AT_ONCE).expect("refunded again");
        let statuses: Vec<String> = ledger.refunds_for(&id).into_iter().map(|record| record.refund.status).collect();
        assert_eq!(statuses, ["failed", "succeeded"]);
        assert_eq!(ledger.refunds_for(&id)[1], second);
    }
}
