//! The admission state the log implies, for rebuilding Redis after a data
//! loss (`seckill reconcile`, through `restore.lua`).
//!
//! Folding is order-independent: events may come from both topics in any
//! interleaving and more than once. An order holds its units from its
//! acceptance until it fails or is cancelled; whatever holds units counts
//! against the stock and its user's limit.

use std::collections::{BTreeMap, HashMap, HashSet};

use seckill_core::event::{Event, OrderAccepted, VoucherCreated};
use seckill_core::{Envelope, OrderId, UserId, VoucherId};
use uuid::Uuid;

use crate::draw_history::DrawHistory;
use crate::room_history::RoomHistory;

/// What the log (and the outbox) say about one voucher's admission state:
/// what `restore.lua` rebuilds Redis from, together with what landed in
/// Redis since.
#[derive(Clone, Debug, PartialEq)]
pub struct VoucherAdmission {
    pub voucher_id: VoucherId,
    /// Units for sale in all (initial plus additions).
    pub stock: u64,
    pub begins_ms: i64,
    pub ends_ms: i64,
    pub limit: u32,
    pub hold_seconds: u32,
    /// Price of one unit (0: free) and its currency.
    pub price: u64,
    pub currency: Option<seckill_core::money::Currency>,
    /// A queue-mode sale's waiting room: orders need an entry token.
    pub queue: Option<seckill_core::queue::QueueSettings>,
    /// A draw sale's settings: orders need a win.
    pub draw: Option<seckill_core::draw::DrawSettings>,
    /// What the log says of the draw (empty for other sales): what a draw
    /// Redis lost is rebuilt from.
    pub draw_history: DrawHistory,
    /// What the log says of the waiting room (empty for other sales): what
    /// a room Redis lost before its reveal is rebuilt from.
    pub room_history: RoomHistory,
    /// The proof of work each order, join or entry needs (0: none).
    pub challenge_bits: u32,
    /// Buckets the gate splits the stock into.
    pub shards: u32,
    pub paused: bool,
    /// The newest update whose settings apply, if any.
    pub settings_version: Option<Uuid>,
    /// Every update id applied (so following the log never applies one twice).
    pub updates: Vec<Uuid>,
    /// Every order known, holding units or not, by id (oldest first).
    pub orders: Vec<OrderAccepted>,
    /// Orders whose units went back (failed or cancelled).
    pub released: Vec<OrderId>,
}

impl VoucherAdmission {
    /// The sale's mode, as the admission scripts read it.
    pub fn mode(&self) -> &'static str {
        if self.queue.is_some() {
            "queue"
        } else if self.draw.is_some() {
            "draw"
        } else {
            "fcfs"
        }
    }

    /// The orders holding units: known and not given back.
    pub fn holding(&self) -> impl Iterator<Item = &OrderAccepted> {
        let released: HashSet<OrderId> = self.released.iter().copied().collect();
        self.orders.iter().filter(move |order| !released.contains(&order.order_id))
    }

    /// Units held per user.
    pub fn bought(&self) -> BTreeMap<UserId, u64> {
        let mut bought: BTreeMap<UserId, u64> = BTreeMap::new();
        for order in self.holding() {
            let units = bought.entry(order.user_id.clone()).or_default();
            *units = units.saturating_add(u64::from(order.quantity));
        }
        bought
    }

    /// Units not held by any order.
    pub fn remaining(&self) -> u64 {
        self.stock.saturating_sub(self.holding().map(|order| u64::from(order.quantity)).sum())
    }
}

#[derive(Debug, Default)]
struct VoucherFold {
    definition: Option<VoucherCreated>,
    added: HashMap<Uuid, u64>,
    /// The update whose pause and end apply: the newest that set either.
    settings: Option<Uuid>,
    paused: bool,
    ends_ms: Option<i64>,
    orders: HashMap<OrderId, OrderAccepted>,
    released: HashSet<OrderId>,
    draw: DrawHistory,
    room: RoomHistory,
}

/// Folds events into the admission state of every voucher they mention.
#[derive(Debug, Default)]
pub struct Ledger {
    vouchers: HashMap<VoucherId, VoucherFold>,
}

impl Ledger {
    /// Takes one event into account; duplicates change nothing.
    pub fn apply(&mut self, envelope: &Envelope) {
        let fold = self.vouchers.entry(envelope.event.voucher_id()).or_default();
        match &envelope.event {
            Event::VoucherCreated(definition) => fold.definition = Some(definition.clone()),
            Event::VoucherUpdated(update) => {
                fold.added.insert(envelope.event_id, update.add_stock);
                let newer = fold.settings.is_none_or(|newest| envelope.event_id > newest);
                if newer && (update.paused.is_some() || update.ends_at.is_some()) {
                    if let Some(paused) = update.paused {
                        fold.paused = paused;
                    }
                    if let Some(ends_at) = update.ends_at {
                        fold.ends_ms = Some(ends_at.timestamp_millis());
                    }
                    fold.settings = Some(envelope.event_id);
                }
            }
            Event::OrderAccepted(order) => {
                fold.orders.insert(order.order_id, order.clone());
            }
            Event::OrderCreated(created) => {
                fold.orders.insert(created.order.order_id, created.order.clone());
            }
            Event::OrderPaid(confirmed) => {
                fold.orders.insert(confirmed.order.order_id, confirmed.order.clone());
            }
            Event::OrderFailed(failed) => {
                fold.orders.insert(failed.order.order_id, failed.order.clone());
                fold.released.insert(failed.order.order_id);
            }
            Event::OrderCancelled(cancelled) => {
                fold.orders.insert(cancelled.order.order_id, cancelled.order.clone());
                fold.released.insert(cancelled.order.order_id);
            }
            Event::CancelRequested(_)
            | Event::ConfirmRequested(_)
            | Event::PaymentReceived(_)
            | Event::CheckoutOpened(_)
            | Event::RefundRequested(_)
            | Event::PaymentRefunded(_) => {}
            Event::QueueSeedCommitted(_)
            | Event::QueueJoined(_)
            | Event::QueueSeedRevealed(_)
            | Event::QueueEntryIssued(_)
            | Event::QueuePlaceExpired(_)
            | Event::QueueEntryUsed(_) => fold.room.apply(envelope.event_id, &envelope.event),
            // A restored draw's windows (and a restored room's entry tokens)
            // end where the log says: as granted, moved by the stalls
            // (lua/draw_restore.lua and lua/queue_restore.lua start the
            // window clock afresh, so the ends they are given include them).
            Event::WindowsExtended(_) => {
                fold.room.apply(envelope.event_id, &envelope.event);
                fold.draw.apply(envelope.event_id, &envelope.event);
            }
            Event::DrawSeedCommitted(_)
            | Event::DrawEntered(_)
            | Event::DrawSeedRevealed(_)
            | Event::DrawRanked(_)
            | Event::DrawWinnersSelected(_)
            | Event::DrawWinnerPromoted(_)
            | Event::DrawWinUsed(_) => fold.draw.apply(envelope.event_id, &envelope.event),
        }
    }

    /// The state of every voucher whose definition was seen.
    pub fn admissions(&self) -> Vec<VoucherAdmission> {
        let mut states: Vec<VoucherAdmission> = self.vouchers.values().filter_map(VoucherFold::admission).collect();
        states.sort_by_key(|state| state.voucher_id);
        states
    }
}

impl VoucherFold {
    fn admission(&self) -> Option<VoucherAdmission> {
        let definition = self.definition.as_ref()?;
        let stock = definition.stock.saturating_add(self.added.values().sum());
        let mut orders: Vec<OrderAccepted> = self.orders.values().cloned().collect();
        orders.sort_by_key(|order| order.order_id);
        let mut released: Vec<OrderId> = self.released.iter().copied().collect();
        released.sort();
        let mut updates: Vec<Uuid> = self.added.keys().copied().collect();
        updates.sort();
        Some(VoucherAdmission {
            voucher_id: definition.voucher_id,
            stock,
            begins_ms: definition.begins_at.timestamp_millis(),
            ends_ms: self.ends_ms.unwrap_or_else(|| definition.ends_at.timestamp_millis()),
            limit: definition.per_user_limit,
            hold_seconds: definition.hold_seconds,
            price: definition.price,
            currency: definition.currency,
            queue: definition.queue.as_deref().cloned(),
            draw: definition.draw.clone(),
            draw_history: if definition.draw.is_some() { self.draw.clone() } else { DrawHistory::default() },
            room_history: if definition.queue.is_some() { self.room.clone() } else { RoomHistory::default() },
            challenge_bits: definition.challenge_bits,
            shards: definition.shards,
            paused: self.paused,
            settings_version: self.settings,
            updates,
            orders,
            released,
        })
    }
}

#[cfg(test)]
mod tests {
    use chrono::Utc;
    use seckill_core::event::{CancelReason, FailReason, OrderCancelled, OrderCreated, OrderFailed, VoucherUpdated};

    use super::*;

    #[test]
    fn holders_are_whoever_was_admitted_and_not_given_back() {
        let now = Utc::now();
        let voucher = VoucherCreated {
            voucher_id: VoucherId::generate(),
            stock: 5,
            per_user_limit: 2,
            begins_at: now,
            ends_at: now + chrono::Duration::hours(1),
            hold_seconds: 0,
            shards: 1,
            title: None,
            description: None,
            price: 0,
            currency: None,
            queue: None,
            draw: None,
            challenge_bits: 0,
        };
        let order = |user: &str, quantity| OrderAccepted {
            order_id: OrderId::generate(),
            voucher_id: voucher.voucher_id,
            user_id: UserId::parse(user).expect("valid"),
            quantity,
            accepted_at: now,
            amount: 0,
            currency: None,
            idempotency_key: None,
        };
        let (kept, pending, failed, cancelled) = (order("a", 2), order("b", 1), order("c", 1), order("d", 1));
        let add = Envelope::new(Event::VoucherUpdated(VoucherUpdated {
            voucher_id: voucher.voucher_id,
            paused: Some(true),
            ends_at: None,
            add_stock: 3,
        }));
        let events = vec![
            Envelope::new(Event::OrderCreated(OrderCreated {
                order: kept.clone(),
                decided_at: now,
                remaining: 3,
                pay_by: None,
            })),
            Envelope::new(Event::VoucherCreated(voucher.clone())),
            add.clone(),
            add,
            Envelope::new(Event::OrderAccepted(pending.clone())),
            Envelope::new(Event::OrderAccepted(failed.clone())),
            Envelope::new(Event::OrderFailed(OrderFailed {
                order: failed.clone(),
                decided_at: now,
                reason: FailReason::SoldOut,
            })),
            Envelope::new(Event::OrderCancelled(OrderCancelled {
                order: cancelled.clone(),
                cancelled_at: now,
                reason: CancelReason::Requested,
                remaining: 3,
            })),
            Envelope::new(Event::OrderAccepted(kept.clone())),
        ];
        let mut ledger = Ledger::default();
        for event in &events {
            ledger.apply(event);
        }
        let [state] = ledger.admissions().try_into().expect("one voucher");
        assert_eq!((state.stock, state.remaining(), state.paused), (8, 5, true));
        let bought = state.bought();
        assert_eq!(bought.len(), 2);
        assert_eq!(bought[&kept.user_id], 2);
        assert_eq!(bought[&pending.user_id], 1);
        assert_eq!(state.orders.len(), 4, "every order known, held or not");
        assert_eq!(state.released.len(), 2);
        assert_eq!(state.updates.len(), 1, "a duplicated update counts once");
    }
}
