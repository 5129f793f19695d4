//! Persistent stock in redb.

use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use redb::{Database, ReadableDatabase, ReadableTable, Table, TableDefinition};
use seckill_core::decision::{OrderRecord, SaleWindow, StockLevel};
use seckill_core::event::{CancelReason, OrderRequest};
use seckill_core::{OrderId, UserId, VoucherId};
use uuid::Uuid;

use super::{blocking, open_database, read_json};
use crate::stock::MAX_EXPIRED_PAGE;
use crate::stock::MAX_PENDING_REFUNDS_PAGE;
use crate::stock_rules::{apply_input, Outcomes, StockState};
use crate::{Decided, DueHold, HoldCursor, PendingRefund, StockInput, StockStore, StoreError};

/// voucher id → JSON [`StockLevel`].
const LEVELS: TableDefinition<&str, &[u8]> = TableDefinition::new("stock_levels");
/// voucher id → JSON [`SaleWindow`]: the end and pauses orders are judged by.
const WINDOWS: TableDefinition<&str, &[u8]> = TableDefinition::new("sale_windows");
/// order id → the order's [`OrderRecord`]: its outcomes, emitted again on
/// redelivery, and the state the cancel and confirm rules read.
const OUTCOMES: TableDefinition<&str, &[u8]> = TableDefinition::new("order_outcomes");
/// (voucher id, user id) → units held by the user's created orders.
const HELD: TableDefinition<(&str, &str), u64> = TableDefinition::new("held_units");
/// (voucher id, "<user id>|<Idempotency-Key>") → the order id the key first
/// came with (a later order under it is a duplicate).
const KEYED: TableDefinition<(&str, &str), &str> = TableDefinition::new("keyed_orders");
/// Ids of the voucher updates already applied.
const UPDATES: TableDefinition<&str, ()> = TableDefinition::new("applied_updates");
/// (hold deadline in Unix ms, order id) → voucher id: created orders that
/// expire unless confirmed, in deadline order.
const HOLDS: TableDefinition<(i64, &str), &str> = TableDefinition::new("holds");
/// (next check in Unix ms, refund id) → JSON [`PendingRefund`]: refunds
/// the provider holds `pending`, in the order they are next checked.
const PENDING_REFUNDS: TableDefinition<(i64, &str), &[u8]> = TableDefinition::new("pending_refunds");

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
        txn.open_table(WINDOWS)?;
        txn.open_table(OUTCOMES)?;
        txn.open_table(HELD)?;
        txn.open_table(KEYED)?;
        txn.open_table(UPDATES)?;
        txn.open_table(HOLDS)?;
        txn.open_table(PENDING_REFUNDS)?;
        txn.commit()?;
        Ok(Self { db })
    }
}

/// The tables of one write transaction.
struct Tables<'txn> {
    levels: Table<'txn, &'static str, &'static [u8]>,
    windows: Table<'txn, &'static str, &'static [u8]>,
    outcomes: Table<'txn, &'static str, &'static [u8]>,
    held: Table<'txn, (&'static str, &'static str), u64>,
    keyed: Table<'txn, (&'static str, &'static str), &'static str>,
    updates: Table<'txn, &'static str, ()>,
    holds: Table<'txn, (i64, &'static str), &'static str>,
}

impl StockState for Tables<'_> {
    fn level(&self, voucher: VoucherId) -> Result<Option<StockLevel>, StoreError> {
        read_json(&self.levels, &voucher.to_string())
    }

    fn put_level(&mut self, voucher: VoucherId, level: &StockLevel) -> Result<(), StoreError> {
        self.levels.insert(voucher.to_string().as_str(), serde_json::to_vec(level)?.as_slice())?;
        Ok(())
    }

    fn window(&self, voucher: VoucherId) -> Result<Option<SaleWindow>, StoreError> {
        read_json(&self.windows, &voucher.to_string())
    }

    fn put_window(&mut self, voucher: VoucherId, window: &SaleWindow) -> Result<(), StoreError> {
        self.windows.insert(voucher.to_string().as_str(), serde_json::to_vec(window)?.as_slice())?;
        Ok(())
    }

    fn order(&self, _voucher: VoucherId, order: OrderId) -> Result<Option<OrderRecord>, StoreError> {
        match self.outcomes.get(order.to_string().as_str())? {
            Some(raw) => OrderRecord::decode(raw.value()).map(Some).map_err(StoreError::Corrupt),
            None => Ok(None),
        }
    }

    fn put_order(&mut self, _voucher: VoucherId, order: OrderId, record: &OrderRecord) -> Result<(), StoreError> {
        self.outcomes.insert(order.to_string().as_str(), record.encode().as_slice())?;
        Ok(())
    }

    fn held(&self, voucher: VoucherId, user: &UserId) -> Result<u64, StoreError> {
        let voucher = voucher.to_string();
        Ok(self.held.get((voucher.as_str(), user.as_str()))?.map(|units| units.value()).unwrap_or(0))
    }

    fn put_held(&mut self, voucher: VoucherId, user: &UserId, units: u64) -> Result<(), StoreError> {
        let voucher = voucher.to_string();
        if units == 0 {
            self.held.remove((voucher.as_str(), user.as_str()))?;
        } else {
            self.held.insert((voucher.as_str(), user.as_str()), units)?;
        }
        Ok(())
    }

    fn keyed_order(&self, voucher: VoucherId, user: &UserId, key: &str) -> Result<Option<OrderId>, StoreError> {
        let (voucher, field) = (voucher.to_string(), format!("{user}|{key}"));
        match self.keyed.get((voucher.as_str(), field.as_str()))? {
            Some(order) => {
                order.value().parse().map(Some).map_err(|e| StoreError::Corrupt(format!("keyed order: {e}")))
            }
            None => Ok(None),
        }
    }

    fn put_keyed_order(
        &mut self,
        voucher: VoucherId,
        user: &UserId,
        key: &str,
        order: OrderId,
    ) -> Result<(), StoreError> {
        let (voucher, field) = (voucher.to_string(), format!("{user}|{key}"));
        self.keyed.insert((voucher.as_str(), field.as_str()), order.to_string().as_str())?;
        Ok(())
    }

    fn update_applied(&self, _voucher: VoucherId, update: Uuid) -> Result<bool, StoreError> {
        Ok(self.updates.get(update.to_string().as_str())?.is_some())
    }

    fn mark_update(&mut self, _voucher: VoucherId, update: Uuid) -> Result<(), StoreError> {
        self.updates.insert(update.to_string().as_str(), ())?;
        Ok(())
    }

    fn hold(
        &mut self,
        deadline: DateTime<Utc>,
        order: OrderId,
        voucher: VoucherId,
        keep: bool,
    ) -> Result<(), StoreError> {
        let order = order.to_string();
        let key = (deadline.timestamp_millis(), order.as_str());
        if keep {
            self.holds.insert(key, voucher.to_string().as_str())?;
        } else {
            self.holds.remove(key)?;
        }
        Ok(())
    }
}

#[async_trait]
impl StockStore for EmbeddedStockStore {
    async fn apply(&self, batch: Vec<StockInput>) -> Result<Vec<Decided>, StoreError> {
        blocking(&self.db, move |db| {
            let txn = db.begin_write()?;
            let mut decided = Outcomes::default();
            {
                let mut tables = Tables {
                    levels: txn.open_table(LEVELS)?,
                    windows: txn.open_table(WINDOWS)?,
                    outcomes: txn.open_table(OUTCOMES)?,
                    held: txn.open_table(HELD)?,
                    keyed: txn.open_table(KEYED)?,
                    updates: txn.open_table(UPDATES)?,
                    holds: txn.open_table(HOLDS)?,
                };
                for input in batch {
                    apply_input(&mut tables, input, &mut decided)?;
                }
            }
            txn.commit()?;
            Ok(decided.into_vec())
        })
        .await
    }

    async fn stock(&self, voucher: VoucherId) -> Result<Option<StockLevel>, StoreError> {
        blocking(&self.db, move |db| {
            let txn = db.begin_read()?;
            read_json(&txn.open_table(LEVELS)?, &voucher.to_string())
        })
        .await
    }

    async fn order_record(&self, _voucher: VoucherId, order: OrderId) -> Result<Option<OrderRecord>, StoreError> {
        blocking(&self.db, move |db| {
            let txn = db.begin_read()?;
            let outcomes = txn.open_table(OUTCOMES)?;
            match outcomes.get(order.to_string().as_str())? {
                Some(raw) => OrderRecord::decode(raw.value()).map(Some).map_err(StoreError::Corrupt),
                None => Ok(None),
            }
        })
        .await
    }

    async fn put_pending_refund(&self, refund: &PendingRefund) -> Result<(), StoreError> {
        let body = serde_json::to_vec(refund)?;
        let key = (refund.next_check.timestamp_millis(), refund.refund_id.clone());
        blocking(&self.db, move |db| {
            let txn = db.begin_write()?;
            txn.open_table(PENDING_REFUNDS)?.insert((key.0, key.1.as_str()), body.as_slice())?;
            txn.commit()?;
            Ok(())
        })
        .await
    }

    async fn due_pending_refunds(&self, now: DateTime<Utc>, limit: usize) -> Result<Vec<PendingRefund>, StoreError> {
        let limit = limit.min(MAX_PENDING_REFUNDS_PAGE);
        blocking(&self.db, move |db| {
            let txn = db.begin_read()?;
            let table = txn.open_table(PENDING_REFUNDS)?;
            let mut due = Vec::new();
            for entry in table.range((i64::MIN, "")..=(now.timestamp_millis(), "~"))?.take(limit) {
                let (_, body) = entry?;
                due.push(serde_json::from_slice(body.value())?);
            }
            Ok(due)
        })
        .await
    }

    async fn delete_pending_refund(&self, refund: &PendingRefund) -> Result<(), StoreError> {
        let key = (refund.next_check.timestamp_millis(), refund.refund_id.clone());
        blocking(&self.db, move |db| {
            let txn = db.begin_write()?;
            txn.open_table(PENDING_REFUNDS)?.remove((key.0, key.1.as_str()))?;
            txn.commit()?;
            Ok(())
        })
        .await
    }

    async fn expired(
        &self,
        now: DateTime<Utc>,
        after: Option<HoldCursor>,
        limit: usize,
    ) -> Result<Vec<DueHold>, StoreError> {
        let limit = limit.min(MAX_EXPIRED_PAGE);
        blocking(&self.db, move |db| {
            let txn = db.begin_read()?;
            let holds = txn.open_table(HOLDS)?;
            let after = after.map(|cursor| (cursor.deadline.timestamp_millis(), cursor.order_id.to_string()));
            let start = match &after {
                Some((deadline, order)) => Bound::Excluded((*deadline, order.as_str())),
                None => Bound::Unbounded,
            };
            let end = Bound::Included((now.timestamp_millis(), "~"));
            let mut due = Vec::new();
            for entry in holds.range::<(i64, &str)>((start, end))?.take(limit) {
                let (key, voucher) = entry?;
                let (deadline, order) = key.value();
                let corrupt = |what: &str| StoreError::Corrupt(format!("hold of order {order}: {what}"));
                let order_id: OrderId = order.parse().map_err(|_| corrupt("bad order id"))?;
                let deadline = DateTime::from_timestamp_millis(deadline).ok_or_else(|| corrupt("bad deadline"))?;
                due.push(DueHold {
                    request: OrderRequest {
                        order_id,
                        voucher_id: voucher.value().parse().map_err(|_| corrupt("bad voucher id"))?,
                        reason: Some(CancelReason::Expired),
                        requested_at: now,
                        settled_checkouts: None,
                    },
                    cursor: HoldCursor { deadline, order_id },
                });
            }
            Ok(due)
        })
        .await
    }
}
