//! Persistent stock in redb.

use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use redb::{Database, ReadableDatabase, ReadableTable, Table, TableDefinition};
use seckill_core::decision::{self, FollowUp, StockLevel};
use seckill_core::event::{CancelReason, Event, OrderRequest};
use seckill_core::{Envelope, OrderId, VoucherId};

use super::{blocking, open_database};
use crate::stock::MAX_EXPIRED_PAGE;
use crate::{Decided, StockInput, StockStore, StoreError};

/// voucher id → JSON [`StockLevel`].
const LEVELS: TableDefinition<&str, &[u8]> = TableDefinition::new("stock_levels");
/// order id → the order's latest outcome envelope, emitted again on
/// redelivery and the state the cancel and confirm rules read.
const OUTCOMES: TableDefinition<&str, &[u8]> = TableDefinition::new("order_outcomes");
/// Ids of the voucher updates already applied.
const UPDATES: TableDefinition<&str, ()> = TableDefinition::new("applied_updates");
/// (hold deadline in Unix ms, order id) → voucher id: created orders that
/// expire unless confirmed, in deadline order.
const HOLDS: TableDefinition<(i64, &str), &str> = TableDefinition::new("holds");

/// The processor's stock in a local redb file.
#[derive(Debug, Clone)]
pub struct EmbeddedStockStore {
    db: Arc<Database>,
}

impl EmbeddedStockStore {
    /// Opens or creates the file at `path`.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        let db = open_database(path)?;
        let txn = db.begin_write()?;
        txn.open_table(LEVELS)?;
        txn.open_table(OUTCOMES)?;
        txn.open_table(UPDATES)?;
        txn.open_table(HOLDS)?;
        txn.commit()?;
        Ok(Self { db })
    }
}

/// The tables of one write transaction.
struct Tables<'txn> {
    levels: Table<'txn, &'static str, &'static [u8]>,
    outcomes: Table<'txn, &'static str, &'static [u8]>,
    updates: Table<'txn, &'static str, ()>,
    holds: Table<'txn, (i64, &'static str), &'static str>,
}

impl Tables<'_> {
    fn level(&self, voucher: VoucherId) -> Result<Option<StockLevel>, StoreError> {
        match self.levels.get(voucher.to_string().as_str())? {
            Some(raw) => Ok(Some(serde_json::from_slice(raw.value())?)),
            None => Ok(None),
        }
    }

    fn put_level(&mut self, voucher: VoucherId, level: &StockLevel) -> Result<(), StoreError> {
        self.levels.insert(voucher.to_string().as_str(), serde_json::to_vec(level)?.as_slice())?;
        Ok(())
    }

    fn latest(&self, order: OrderId) -> Result<Option<Envelope>, StoreError> {
        match self.outcomes.get(order.to_string().as_str())? {
            Some(raw) => Envelope::decode(raw.value()).map(Some).map_err(|e| StoreError::Corrupt(e.to_string())),
            None => Ok(None),
        }
    }

    fn put_latest(&mut self, order: OrderId, outcome: &Envelope) -> Result<(), StoreError> {
        self.outcomes.insert(order.to_string().as_str(), outcome.encode().as_slice())?;
        Ok(())
    }

    /// Adds or removes the hold of the order `created` describes.
    fn hold(&mut self, level: &StockLevel, created: &Envelope, keep: bool) -> Result<(), StoreError> {
        let Event::OrderCreated(created) = &created.event else { return Ok(()) };
        let Some(deadline) = level.hold_deadline(created) else { return Ok(()) };
        let order = created.order.order_id.to_string();
        let key = (deadline.timestamp_millis(), order.as_str());
        if keep {
            self.holds.insert(key, created.order.voucher_id.to_string().as_str())?;
        } else {
            self.holds.remove(key)?;
        }
        Ok(())
    }

    fn apply(&mut self, input: StockInput, decided: &mut Vec<Decided>) -> Result<(), StoreError> {
        match input {
            StockInput::Voucher(voucher) => {
                if self.level(voucher.voucher_id)?.is_none() {
                    let level = StockLevel {
                        stock: voucher.stock,
                        remaining: voucher.stock,
                        hold_seconds: voucher.hold_seconds,
                    };
                    self.put_level(voucher.voucher_id, &level)?;
                }
            }
            StockInput::Update { update_id, update } => {
                let id = update_id.to_string();
                if update.add_stock == 0 || self.updates.get(id.as_str())?.is_some() {
                    return Ok(());
                }
                // An update of a voucher this store never saw cannot add to
                // anything; it is still marked, so it never applies later.
                if let Some(mut level) = self.level(update.voucher_id)? {
                    level.add(update.add_stock);
                    self.put_level(update.voucher_id, &level)?;
                }
                self.updates.insert(id.as_str(), ())?;
            }
            StockInput::Order(order) => {
                if let Some(previous) = self.latest(order.order_id)? {
                    decided.push(Decided { outcome: previous, replayed: true });
                    return Ok(());
                }
                let mut level = self.level(order.voucher_id)?;
                let result = decision::decide(level.as_mut(), &order);
                let (order_id, voucher_id) = (order.order_id, order.voucher_id);
                let outcome = decision::outcome(order, result, Utc::now());
                if let (Ok(_), Some(level)) = (&result, level) {
                    self.put_level(voucher_id, &level)?;
                    self.hold(&level, &outcome, true)?;
                }
                self.put_latest(order_id, &outcome)?;
                decided.push(Decided { outcome, replayed: false });
            }
            StockInput::Cancel(request) => {
                let latest = self.latest(request.order_id)?;
                let mut level = self.level(request.voucher_id)?;
                match decision::cancel(level.as_mut(), latest.as_ref(), &request, Utc::now()) {
                    FollowUp::Apply(outcome) => {
                        let level = level.expect("a cancellation applies only to a known voucher");
                        self.put_level(request.voucher_id, &level)?;
                        if let Some(created) = &latest {
                            self.hold(&level, created, false)?;
                        }
                        self.put_latest(request.order_id, &outcome)?;
                        decided.push(Decided { outcome, replayed: false });
                    }
                    FollowUp::Repeat => {
                        decided.extend(latest.map(|outcome| Decided { outcome, replayed: true }));
                    }
                    FollowUp::Ignore(_) => {}
                }
            }
            StockInput::Confirm(request) => {
                let latest = self.latest(request.order_id)?;
                match decision::confirm(latest.as_ref(), Utc::now()) {
                    FollowUp::Apply(outcome) => {
                        if let (Some(level), Some(created)) = (self.level(request.voucher_id)?, &latest) {
                            self.hold(&level, created, false)?;
                        }
                        self.put_latest(request.order_id, &outcome)?;
                        decided.push(Decided { outcome, replayed: false });
                    }
                    FollowUp::Repeat => {
                        decided.extend(latest.map(|outcome| Decided { outcome, replayed: true }));
                    }
                    FollowUp::Ignore(_) => {}
                }
            }
        }
        Ok(())
    }
}

#[async_trait]
impl StockStore for EmbeddedStockStore {
    async fn apply(&self, batch: Vec<StockInput>) -> Result<Vec<Decided>, StoreError> {
        blocking(&self.db, move |db| {
            let txn = db.begin_write()?;
            let mut decided = Vec::new();
            {
                let mut tables = Tables {
                    levels: txn.open_table(LEVELS)?,
                    outcomes: txn.open_table(OUTCOMES)?,
                    updates: txn.open_table(UPDATES)?,
                    holds: txn.open_table(HOLDS)?,
                };
                for input in batch {
                    tables.apply(input, &mut decided)?;
                }
            }
            txn.commit()?;
            Ok(decided)
        })
        .await
    }

    async fn stock(&self, voucher: VoucherId) -> Result<Option<StockLevel>, StoreError> {
        blocking(&self.db, move |db| {
            let txn = db.begin_read()?;
            let levels = txn.open_table(LEVELS)?;
            let level = levels.get(voucher.to_string().as_str())?;
            Ok(match level {
                Some(raw) => Some(serde_json::from_slice(raw.value())?),
                None => None,
            })
        })
        .await
    }

    async fn expired(&self, now: DateTime<Utc>, limit: usize) -> Result<Vec<OrderRequest>, StoreError> {
        let limit = limit.min(MAX_EXPIRED_PAGE);
        blocking(&self.db, move |db| {
            let txn = db.begin_read()?;
            let holds = txn.open_table(HOLDS)?;
            let mut due = Vec::new();
            for entry in holds.range((i64::MIN, "")..=(now.timestamp_millis(), "~"))?.take(limit) {
                let (key, voucher) = entry?;
                let (_, order) = key.value();
                let corrupt = |what: &str| StoreError::Corrupt(format!("hold of order {order}: {what}"));
                due.push(OrderRequest {
                    order_id: order.parse().map_err(|_| corrupt("bad order id"))?,
                    voucher_id: voucher.value().parse().map_err(|_| corrupt("bad voucher id"))?,
                    reason: Some(CancelReason::Expired),
                    requested_at: now,
                });
            }
            Ok(due)
        })
        .await
    }
}
