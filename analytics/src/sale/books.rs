//! A voucher's books as the log tells them: units offered, sold, returned
//! and left, and who holds how many. The audit checks these against each
//! other and against the live stores; the report prints them.
//!
//! Definitions (orders counted once each, outcomes once per event id):
//! - `offered`: the definition's stock plus every added stock.
//! - `units_sold`: units of created orders minus units of cancelled ones.
//! - `units_left`: the persistent stock as the processor last reported it:
//!   the `remaining` of its last creation or cancellation (last in the order
//!   it read their requests on the sales topic), plus stock added after
//!   that request.
//! - `admission_left`: what the gate should have left: offered minus the
//!   units of every accepted order that neither failed nor was cancelled.
//! - `refunded`: orders an admin refunded (cancelled with reason
//!   `refunded`); the view counts them apart from `cancelled`.
//! - `paid_amount`, `refunded_amount`: what the orders ever paid owe, and
//!   the admin-refunded ones (the view's `revenue` is the difference).
//! - `returned_units`: units given back by cancellation events; a returned
//!   unit is either sold again (`resold_units`: units are interchangeable,
//!   so creations beyond the units ever offered are re-sales) or still left.

use std::collections::{BTreeMap, HashMap};

use chrono::{DateTime, Utc};
use seckill_core::event::CancelReason;
use seckill_core::ids::UserId;
use serde::Serialize;

use super::fold::{OutcomeKind, Position, VoucherLog};

/// The figures of one voucher.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Books {
    /// The definition's stock (0 without a definition).
    pub initial_stock: u64,
    /// Units added by updates.
    pub added_stock: u64,
    /// Initial plus added.
    pub offered: u64,
    /// Distinct orders the log mentions.
    pub orders: u64,
    /// Distinct orders with an `OrderAccepted`.
    pub accepted: u64,
    /// Orders ever created (whatever happened to them after), as `stats`
    /// and the view count them.
    pub created: u64,
    /// Orders the processor refused.
    pub failed: u64,
    /// Orders ever paid (free ones: claimed by their owner).
    pub paid: u64,
    /// Orders ever cancelled (admin refunds included).
    pub cancelled: u64,
    /// Orders an admin refunded.
    pub refunded: u64,
    /// Sum of the amounts of the orders ever paid, in minor units.
    pub paid_amount: u64,
    /// Sum of the amounts of the orders an admin refunded.
    pub refunded_amount: u64,
    /// Orders without a decision.
    pub pending: u64,
    /// Units of orders ever created.
    pub created_units: u64,
    /// Units of cancelled orders, once per order.
    pub cancelled_units: u64,
    /// Units of every distinct cancellation event.
    pub returned_units: u64,
    /// Created minus cancelled units.
    pub units_sold: u64,
    /// The persistent stock left per the processor's last decision; `None`
    /// without a definition.
    pub units_left: Option<u64>,
    /// What the gate should have left (negative: oversold).
    pub admission_left: i64,
    /// Units sold again after being returned (see [`VoucherLog::resale`]).
    pub resold_units: u64,
    /// Units never sold that should still be on the shelf.
    pub fresh_left: u64,
}

/// One change to the persistent stock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StockChange {
    /// Where the processor read its cause on the sales topic.
    pub request: Position,
    /// Where the outcome appeared on the orders topic (an update's own
    /// position for added stock).
    pub position: Position,
    /// When it happened (an update: when it was emitted).
    pub at: DateTime<Utc>,
    pub kind: ChangeKind,
    /// The persistent stock after it, as the processor reported it.
    pub remaining: Option<u64>,
}

/// What a change did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChangeKind {
    /// A creation took units; `first`: the order's first creation (a second
    /// creation of one order is a second decision, not a second sale).
    Take { units: u64, first: bool },
    /// A cancellation gave units back.
    Return(u64),
    /// An admin added stock.
    Add(u64),
}

/// Units sold again after being returned, walked in the processor's order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resale {
    /// Units never sold, left at the end.
    pub fresh_left: u64,
    /// Units sold again.
    pub resold: u64,
    /// Units given back by cancellation events.
    pub returned: u64,
    /// The running count of units sold again, at each increase.
    pub steps: Vec<(DateTime<Utc>, u64)>,
}

impl VoucherLog {
    /// The voucher's figures.
    pub fn books(&self) -> Books {
        let offered = self.initial_stock().saturating_add(self.added_stock());
        let changes = self.stock_changes();
        let resale = self.resale(&changes);
        let mut books = Books {
            initial_stock: self.initial_stock(),
            added_stock: self.added_stock(),
            offered,
            orders: self.orders.len() as u64,
            accepted: self.orders.values().filter(|o| o.accepted.is_some()).count() as u64,
            created: 0,
            failed: 0,
            paid: 0,
            cancelled: 0,
            refunded: 0,
            paid_amount: 0,
            refunded_amount: 0,
            pending: 0,
            created_units: 0,
            cancelled_units: 0,
            returned_units: 0,
            units_sold: 0,
            units_left: self.units_left(&changes),
            admission_left: 0,
            resold_units: 0,
            fresh_left: 0,
        };
        let mut admitted_units = 0u64;
        for order in self.orders.values() {
            let units = u64::from(order.quantity);
            books.failed += u64::from(order.failed());
            books.pending += u64::from(order.decisions.is_empty());
            if order.creation().is_some() {
                books.created += 1;
                books.created_units += units;
            }
            if !order.paid.is_empty() {
                books.paid += 1;
                books.paid_amount = books.paid_amount.saturating_add(order.amount);
            }
            if !order.cancellations.is_empty() {
                books.cancelled += 1;
                books.cancelled_units += units;
            }
            if order.cancellations.iter().any(|c| c.kind == OutcomeKind::Cancelled(CancelReason::Refunded)) {
                books.refunded += 1;
                books.refunded_amount = books.refunded_amount.saturating_add(order.amount);
            }
            if order.holds_admission() {
                admitted_units += units;
            }
        }
        books.units_sold = books.created_units.saturating_sub(books.cancelled_units);
        books.admission_left = signed(offered) - signed(admitted_units);
        books.returned_units = resale.returned;
        books.resold_units = resale.resold;
        books.fresh_left = resale.fresh_left;
        books
    }

    /// Every change to the persistent stock the log shows, in the order
    /// the processor made them: by where it read their cause on the sales
    /// topic (an order's acceptance; the cancel request it acted on, or the
    /// acceptance for one that overtook its order; an update), then by
    /// where the outcome appeared on the orders topic. Outcomes
    /// whose cause is missing from the log cannot be placed and are left
    /// out (the audit reports the missing acceptance).
    pub fn stock_changes(&self) -> Vec<StockChange> {
        let mut changes = Vec::new();
        for (order_id, order) in &self.orders {
            let units = u64::from(order.quantity);
            let first_creation = order.creation().map(|creation| creation.event_id);
            for outcome in order.decisions.iter().chain(&order.cancellations) {
                let (request, kind) = match outcome.kind {
                    OutcomeKind::Created => {
                        (order.accepted, ChangeKind::Take { units, first: first_creation == Some(outcome.event_id) })
                    }
                    OutcomeKind::Cancelled(reason) => {
                        (self.cancellation_decided_at(order_id, reason), ChangeKind::Return(units))
                    }
                    OutcomeKind::Failed(_) | OutcomeKind::Paid => continue,
                };
                let Some(request) = request else { continue };
                changes.push(StockChange {
                    request,
                    position: outcome.position,
                    at: outcome.at,
                    kind,
                    remaining: outcome.remaining,
                });
            }
        }
        for update in self.updates.values().filter(|update| update.add_stock > 0) {
            changes.push(StockChange {
                request: update.position,
                position: update.position,
                at: update.emitted_at,
                kind: ChangeKind::Add(update.add_stock),
                remaining: None,
            });
        }
        changes.sort_by_key(|change| (change.request, change.position));
        changes
    }

    /// The persistent stock left, per the processor's last creation or
    /// cancellation plus the stock added after its request.
    fn units_left(&self, changes: &[StockChange]) -> Option<u64> {
        let definition = self.definition.as_ref()?;
        Some(changes.iter().fold(definition.stock, |left, change| match (change.kind, change.remaining) {
            (ChangeKind::Add(units), _) => left.saturating_add(units),
            (_, Some(remaining)) => remaining,
            (_, None) => left,
        }))
    }

    /// Which units were sold again after being returned, walking the
    /// changes in the processor's order: units are interchangeable, and a
    /// creation takes units never sold first, then returned ones. Each
    /// order's first creation takes units once; every cancellation event
    /// gives them back (a cancellation recorded twice returns them twice,
    /// which the audit then finds missing from the stock).
    pub fn resale(&self, changes: &[StockChange]) -> Resale {
        let mut resale = Resale { fresh_left: self.initial_stock(), resold: 0, returned: 0, steps: Vec::new() };
        for change in changes {
            match change.kind {
                ChangeKind::Take { units, first: true } => {
                    let fresh = units.min(resale.fresh_left);
                    resale.fresh_left -= fresh;
                    if fresh < units {
                        resale.resold += units - fresh;
                        resale.steps.push((change.at, resale.resold));
                    }
                }
                ChangeKind::Take { first: false, .. } => {}
                ChangeKind::Return(units) => resale.returned += units,
                ChangeKind::Add(units) => resale.fresh_left = resale.fresh_left.saturating_add(units),
            }
        }
        resale
    }

    /// Units each user holds at the end: created minus cancelled.
    pub fn units_held_per_user(&self) -> BTreeMap<UserId, u64> {
        let mut held: BTreeMap<UserId, u64> = BTreeMap::new();
        for order in self.orders.values() {
            if order.creation().is_some() && order.cancellations.is_empty() {
                *held.entry(order.user_id.clone()).or_default() += u64::from(order.quantity);
            }
        }
        held
    }

    /// Units each user holds at the gate: every accepted order that neither
    /// failed nor was cancelled, pending ones included (what Redis counts).
    pub fn units_admitted_per_user(&self) -> BTreeMap<UserId, u64> {
        let mut admitted: BTreeMap<UserId, u64> = BTreeMap::new();
        for order in self.orders.values().filter(|order| order.holds_admission()) {
            *admitted.entry(order.user_id.clone()).or_default() += u64::from(order.quantity);
        }
        admitted
    }

    /// The most units each user held at once, walking the sales topic in
    /// the processor's order: a created order holds its units from its
    /// acceptance to its cancellation request. Clocks play no part, so
    /// hosts whose clocks differ cannot make a user seem over the limit.
    pub fn peak_units_per_user(&self) -> HashMap<UserId, u64> {
        let mut steps: Vec<(Position, i64, &UserId)> = Vec::new();
        for (order_id, order) in &self.orders {
            let (Some(accepted), Some(_)) = (order.accepted, order.creation()) else { continue };
            let units = i64::from(order.quantity);
            steps.push((accepted, units, &order.user_id));
            if let Some(cancellation) = order.cancellation() {
                // Without its request in the log the release is placed at
                // the acceptance: a missing record must not invent a peak.
                let OutcomeKind::Cancelled(reason) = cancellation.kind else { continue };
                let released = self.cancellation_decided_at(order_id, reason).unwrap_or(accepted);
                steps.push((released, -units, &order.user_id));
            }
        }
        // At one position a release comes first.
        steps.sort_by_key(|&(position, units, _)| (position, units));
        let mut holding: HashMap<&UserId, i64> = HashMap::new();
        let mut peaks: HashMap<UserId, u64> = HashMap::new();
        for (_, units, user) in steps {
            let now = holding.entry(user).or_default();
            *now += units;
            let peak = peaks.entry(user.clone()).or_default();
            *peak = (*peak).max(u64::try_from(*now).unwrap_or(0));
        }
        peaks
    }
}

/// A unit count as a signed number, for differences that may go negative.
pub(crate) fn signed(units: u64) -> i64 {
    i64::try_from(units).unwrap_or(i64::MAX)
}
