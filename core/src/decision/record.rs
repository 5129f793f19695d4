//! Everything the processor decided about one order.
//!
//! The record keeps each outcome as first decided (the decision, then a
//! confirmation and a cancellation), not only the latest, so a redelivered
//! input emits the order's whole history again, in order: a crash after
//! the store commit but before the outcomes were acknowledged can then
//! never leave an outcome out of the log.

use serde::{Deserialize, Serialize};

pub use crate::event::MAX_CHECKOUTS;
use crate::event::{Event, OrderRequest, PaymentReceived};
use crate::Envelope;

/// Most requests one order holds back while its acceptance is on its way:
/// one cancel, one confirm, and a few payments. A second request of a kind
/// already waiting would be decided as a repeat of the first, so it is not
/// kept (payments are told apart by their id). A payment needs its order
/// created first (the ingress asks the provider for one only then), so
/// parked payments are a corner case: past the bound, a payment is
/// refunded at once rather than kept.
pub const MAX_PARKED: usize = 6;

/// A request about an order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "request", rename_all = "snake_case")]
pub enum Request {
    Cancel(OrderRequest),
    Confirm(OrderRequest),
    Pay(PaymentReceived),
}

impl Request {
    /// Whether deciding `other` after `self` would only repeat `self`: the
    /// same kind of request (for payments, the same payment).
    pub fn same_kind(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Pay(a), Self::Pay(b)) => a.payment_id == b.payment_id,
            _ => std::mem::discriminant(self) == std::mem::discriminant(other),
        }
    }
}

/// One order's outcomes, as stored by the processor.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OrderRecord {
    /// `OrderCreated` or `OrderFailed`; None until the acceptance arrives.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<Envelope>,
    /// `OrderPaid`, once paid (`confirmed` in stores written before
    /// payments).
    #[serde(default, skip_serializing_if = "Option::is_none", alias = "confirmed")]
    pub paid: Option<Envelope>,
    /// `OrderCancelled`, once cancelled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancelled: Option<Envelope>,
    /// Requests that reached the processor before the order did. The
    /// ingress publishes a request directly while the acceptance travels
    /// through the Redis outbox, so an owner who cancels right after the
    /// `202` can overtake their own order; the request waits here and is
    /// decided right after the order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parked: Vec<Request>,
    /// `RefundRequested` for every payment of the order that did not pay
    /// it (or was refunded by an admin), one per payment id: a payment
    /// reported again finds its refund here and is not refunded twice.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refunds: Vec<Envelope>,
    /// The provider's checkout sessions opened for the order (`cs_…`),
    /// oldest first, at most [`MAX_CHECKOUTS`]: what is closed when the
    /// order closes, and reconciled by id before it expires.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checkouts: Vec<String>,
}

impl OrderRecord {
    /// Reads a stored record. Stores written before records existed kept
    /// only the latest outcome envelope; such a value reads as a record
    /// holding that one outcome.
    pub fn decode(bytes: &[u8]) -> Result<Self, String> {
        if let Ok(record) = serde_json::from_slice::<Self>(bytes) {
            if record.is_decided() {
                return Ok(record);
            }
            if !record.parked.is_empty() || !record.checkouts.is_empty() {
                return Ok(record);
            }
        }
        let latest = Envelope::decode(bytes).map_err(|e| format!("unreadable order record: {e}"))?;
        Ok(Self::from_latest(latest))
    }

    /// The stored bytes.
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("records serialize: every field is plain data")
    }

    fn from_latest(latest: Envelope) -> Self {
        match latest.event {
            Event::OrderPaid(_) => Self { paid: Some(latest), ..Self::default() },
            Event::OrderCancelled(_) => Self { cancelled: Some(latest), ..Self::default() },
            _ => Self { decision: Some(latest), ..Self::default() },
        }
    }

    /// Whether the order's acceptance was decided.
    pub fn is_decided(&self) -> bool {
        self.decision.is_some() || self.paid.is_some() || self.cancelled.is_some()
    }

    /// Whether the payment `payment_id` paid this order.
    pub fn paid_by(&self, payment_id: &str) -> bool {
        matches!(self.paid.as_ref().map(|e| &e.event),
            Some(Event::OrderPaid(paid)) if paid.payment_id.as_deref() == Some(payment_id))
    }

    /// Whether a refund of `payment_id` was requested.
    pub fn refunded(&self, payment_id: &str) -> bool {
        self.refunds
            .iter()
            .any(|refund| matches!(&refund.event, Event::RefundRequested(r) if r.payment_id == payment_id))
    }

    /// The outcome the order stands at.
    /// Records a checkout session opened for the order; false when it was
    /// known already or the record holds its bound.
    pub fn add_checkout(&mut self, session_id: &str) -> bool {
        if self.checkouts.iter().any(|known| known == session_id) || self.checkouts.len() >= MAX_CHECKOUTS {
            return false;
        }
        self.checkouts.push(session_id.to_owned());
        true
    }

    pub fn latest(&self) -> Option<&Envelope> {
        self.cancelled.as_ref().or(self.paid.as_ref()).or(self.decision.as_ref())
    }

    /// Every outcome, in the order they were decided: a cancellation can
    /// follow a payment (a refund), never the other way round; refund
    /// requests come last (none of the order's statuses depends on them).
    pub fn history(&self) -> impl Iterator<Item = &Envelope> {
        [&self.decision, &self.paid, &self.cancelled].into_iter().flatten().chain(&self.refunds)
    }
}

#[cfg(test)]
mod tests {
    use chrono::Utc;

    use super::*;
    use crate::event::{OrderAccepted, OrderCreated, OrderPaid};
    use crate::ids::{UserId, VoucherId};

    fn order() -> OrderAccepted {
        OrderAccepted::now(VoucherId::generate(), UserId::parse("u").expect("valid"), 1)
    }

    #[test]
    fn a_record_round_trips_and_lists_its_history_in_order() {
        let order = order();
        let created = Envelope::new(Event::OrderCreated(OrderCreated {
            order: order.clone(),
            decided_at: order.accepted_at,
            remaining: 0,
            pay_by: None,
        }));
        let confirmed = Envelope::new(Event::OrderPaid(OrderPaid { order, paid_at: Utc::now(), payment_id: None }));
        let record =
            OrderRecord { decision: Some(created.clone()), paid: Some(confirmed.clone()), ..Default::default() };
        let back = OrderRecord::decode(&record.encode()).expect("reads back");
        assert_eq!(back, record);
        assert_eq!(back.history().collect::<Vec<_>>(), vec![&created, &confirmed]);
        assert_eq!(back.latest(), Some(&confirmed));
    }

    #[test]
    fn a_latest_outcome_stored_before_records_reads_as_a_record() {
        let order = order();
        let confirmed =
            Envelope::new(Event::OrderPaid(OrderPaid { paid_at: order.accepted_at, order, payment_id: None }));
        let record = OrderRecord::decode(&confirmed.encode()).expect("reads");
        assert!(record.is_decided());
        assert_eq!(record.latest(), Some(&confirmed));
        assert!(OrderRecord::decode(b"{}").is_err(), "an empty object is not a record");
    }
}
