//! Everything the processor decided about one order.
//!
//! The record keeps each outcome as first decided (the decision, then a
//! confirmation and a cancellation), not only the latest, so a redelivered
//! input emits the order's whole history again, in order: a crash after
//! the store commit but before the outcomes were acknowledged can then
//! never leave an outcome out of the log.

use serde::{Deserialize, Serialize};

use crate::event::{Event, OrderRequest};
use crate::Envelope;

/// Most requests one order holds back while its acceptance is on its way:
/// one of each kind (a cancel, a confirm). A second request of a kind
/// already waiting would be decided as a repeat of the first, so it is not
/// kept, and no request of the other kind is ever turned away for room.
pub const MAX_PARKED: usize = 2;

/// A cancel or confirm request about an order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "request", rename_all = "snake_case")]
pub enum Request {
    Cancel(OrderRequest),
    Confirm(OrderRequest),
}

impl Request {
    /// Whether `self` and `other` are the same kind of request.
    pub fn same_kind(&self, other: &Self) -> bool {
        std::mem::discriminant(self) == std::mem::discriminant(other)
    }
}

/// One order's outcomes, as stored by the processor.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OrderRecord {
    /// `OrderCreated` or `OrderFailed`; None until the acceptance arrives.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<Envelope>,
    /// `OrderConfirmed`, once confirmed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confirmed: Option<Envelope>,
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
}

impl OrderRecord {
    /// Reads a stored record. Stores written before records existed kept
    /// only the latest outcome envelope; such a value reads as a record
    /// holding that one outcome.
    pub fn decode(bytes: &[u8]) -> Result<Self, String> {
        if let Ok(record) = serde_json::from_slice::<Self>(bytes) {
            if record.decision.is_some() || record.confirmed.is_some() || record.cancelled.is_some() {
                return Ok(record);
            }
            if !record.parked.is_empty() {
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
            Event::OrderConfirmed(_) => Self { confirmed: Some(latest), ..Self::default() },
            Event::OrderCancelled(_) => Self { cancelled: Some(latest), ..Self::default() },
            _ => Self { decision: Some(latest), ..Self::default() },
        }
    }

    /// Whether the order's acceptance was decided.
    pub fn is_decided(&self) -> bool {
        self.decision.is_some() || self.confirmed.is_some() || self.cancelled.is_some()
    }

    /// The outcome the order stands at.
    pub fn latest(&self) -> Option<&Envelope> {
        self.cancelled.as_ref().or(self.confirmed.as_ref()).or(self.decision.as_ref())
    }

    /// Every outcome, in the order they were decided: a cancellation can
    /// follow a confirmation (a refund), never the other way round.
    pub fn history(&self) -> impl Iterator<Item = &Envelope> {
        [&self.decision, &self.confirmed, &self.cancelled].into_iter().flatten()
    }
}

#[cfg(test)]
mod tests {
    use chrono::Utc;

    use super::*;
    use crate::event::{OrderAccepted, OrderConfirmed, OrderCreated};
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
        }));
        let confirmed = Envelope::new(Event::OrderConfirmed(OrderConfirmed { order, confirmed_at: Utc::now() }));
        let record =
            OrderRecord { decision: Some(created.clone()), confirmed: Some(confirmed.clone()), ..Default::default() };
        let back = OrderRecord::decode(&record.encode()).expect("reads back");
        assert_eq!(back, record);
        assert_eq!(back.history().collect::<Vec<_>>(), vec![&created, &confirmed]);
        assert_eq!(back.latest(), Some(&confirmed));
    }

    #[test]
    fn a_latest_outcome_stored_before_records_reads_as_a_record() {
        let order = order();
        let confirmed = Envelope::new(Event::OrderConfirmed(OrderConfirmed { confirmed_at: order.accepted_at, order }));
        let record = OrderRecord::decode(&confirmed.encode()).expect("reads");
        assert!(record.is_decided());
        assert_eq!(record.latest(), Some(&confirmed));
        assert!(OrderRecord::decode(b"{}").is_err(), "an empty object is not a record");
    }
}
