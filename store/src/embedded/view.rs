//! The order-status view in redb.

use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use redb::{Database, ReadableDatabase, ReadableTable, Table, TableDefinition};
use seckill_core::{Envelope, OrderId, UserId, VoucherId};
use uuid::Uuid;

use super::{blocking, open_database, read_json};
use crate::view::{OrderView, VoucherCounters, VoucherRecord, VoucherView, MAX_PAGE};
use crate::view_rules::{apply_event, ViewState};
use crate::{StoreError, ViewReader, ViewStore};

/// order id → JSON [`OrderView`].
const ORDERS: TableDefinition<&str, &[u8]> = TableDefinition::new("orders");
/// (user id, order id) → (); order ids are UUIDv7, so a user's range is in
/// time order.
const USER_ORDERS: TableDefinition<(&str, &str), ()> = TableDefinition::new("user_orders");
/// voucher id → JSON [`VoucherRecord`]; UUIDv7 keys list in creation order.
const VOUCHERS: TableDefinition<&str, &[u8]> = TableDefinition::new("vouchers");
/// Event ids of the voucher updates already applied.
const UPDATES: TableDefinition<&str, ()> = TableDefinition::new("applied_updates");
/// voucher id → JSON [`VoucherCounters`].
const COUNTERS: TableDefinition<&str, &[u8]> = TableDefinition::new("voucher_counters");

/// Sorts after every character of a hyphenated UUID.
const AFTER_ANY_ORDER_ID: &str = "~";

/// The projector's view in a local redb file.
#[derive(Debug, Clone)]
pub struct EmbeddedViewStore {
    db: Arc<Database>,
}

impl EmbeddedViewStore {
    /// Opens or creates the file at `path`.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        let db = open_database(path)?;
        let txn = db.begin_write()?;
        txn.open_table(ORDERS)?;
        txn.open_table(USER_ORDERS)?;
        txn.open_table(VOUCHERS)?;
        txn.open_table(COUNTERS)?;
        txn.open_table(UPDATES)?;
        txn.commit()?;
        Ok(Self { db })
    }
}

/// The tables of one write transaction.
struct Tables<'txn> {
    orders: Table<'txn, &'static str, &'static [u8]>,
    user_orders: Table<'txn, (&'static str, &'static str), ()>,
    vouchers: Table<'txn, &'static str, &'static [u8]>,
    counters: Table<'txn, &'static str, &'static [u8]>,
    updates: Table<'txn, &'static str, ()>,
}

impl ViewState for Tables<'_> {
    fn voucher(&self, voucher: VoucherId) -> Result<Option<VoucherRecord>, StoreError> {
        read_json(&self.vouchers, &voucher.to_string())
    }

    fn put_voucher(&mut self, record: &VoucherRecord) -> Result<(), StoreError> {
        let key = record.definition.voucher_id.to_string();
        self.vouchers.insert(key.as_str(), serde_json::to_vec(record)?.as_slice())?;
        Ok(())
    }

    fn update_applied(&self, _voucher: VoucherId, update: Uuid) -> Result<bool, StoreError> {
        Ok(self.updates.get(update.to_string().as_str())?.is_some())
    }

    fn mark_update(&mut self, _voucher: VoucherId, update: Uuid) -> Result<(), StoreError> {
        self.updates.insert(update.to_string().as_str(), ())?;
        Ok(())
    }

    fn order(&self, _voucher: VoucherId, order: OrderId) -> Result<Option<OrderView>, StoreError> {
        read_json(&self.orders, &order.to_string())
    }

    fn put_order(&mut self, row: &OrderView, first_seen: bool) -> Result<(), StoreError> {
        let key = row.order_id.to_string();
        self.orders.insert(key.as_str(), serde_json::to_vec(row)?.as_slice())?;
        if first_seen {
            self.user_orders.insert((row.user_id.as_str(), key.as_str()), ())?;
        }
        Ok(())
    }

    fn counters(&self, voucher: VoucherId) -> Result<VoucherCounters, StoreError> {
        read_counters(&self.counters, &voucher.to_string())
    }

    fn put_counters(&mut self, voucher: VoucherId, counters: &VoucherCounters) -> Result<(), StoreError> {
        self.counters.insert(voucher.to_string().as_str(), serde_json::to_vec(counters)?.as_slice())?;
        Ok(())
    }
}

#[async_trait]
impl ViewStore for EmbeddedViewStore {
    async fn apply(&self, events: Vec<Envelope>) -> Result<Vec<bool>, StoreError> {
        blocking(&self.db, move |db| {
            let txn = db.begin_write()?;
            let mut changed = Vec::with_capacity(events.len());
            {
                let mut tables = Tables {
                    orders: txn.open_table(ORDERS)?,
                    user_orders: txn.open_table(USER_ORDERS)?,
                    vouchers: txn.open_table(VOUCHERS)?,
                    counters: txn.open_table(COUNTERS)?,
                    updates: txn.open_table(UPDATES)?,
                };
                for envelope in &events {
                    changed.push(apply_event(&mut tables, envelope)?);
                }
            }
            txn.commit()?;
            Ok(changed)
        })
        .await
    }
}

#[async_trait]
impl ViewReader for EmbeddedViewStore {
    async fn order(&self, order: OrderId) -> Result<Option<OrderView>, StoreError> {
        blocking(&self.db, move |db| {
            let txn = db.begin_read()?;
            read_json(&txn.open_table(ORDERS)?, &order.to_string())
        })
        .await
    }

    async fn user_orders(&self, user: &UserId, limit: usize) -> Result<Vec<OrderView>, StoreError> {
        let user = user.clone();
        let limit = limit.min(MAX_PAGE);
        blocking(&self.db, move |db| {
            let txn = db.begin_read()?;
            let index = txn.open_table(USER_ORDERS)?;
            let orders = txn.open_table(ORDERS)?;
            let mut rows = Vec::new();
            let range = index.range((user.as_str(), "")..(user.as_str(), AFTER_ANY_ORDER_ID))?;
            for entry in range.rev().take(limit) {
                let (key, _) = entry?;
                let (_, order_id) = key.value();
                if let Some(raw) = orders.get(order_id)? {
                    rows.push(serde_json::from_slice(raw.value())?);
                }
            }
            Ok(rows)
        })
        .await
    }

    async fn voucher(&self, voucher: VoucherId) -> Result<Option<VoucherView>, StoreError> {
        blocking(&self.db, move |db| {
            let txn = db.begin_read()?;
            let key = voucher.to_string();
            let Some(definition) = txn.open_table(VOUCHERS)?.get(key.as_str())? else {
                return Ok(None);
            };
            let record: VoucherRecord = serde_json::from_slice(definition.value())?;
            let counters = read_counters(&txn.open_table(COUNTERS)?, &key)?;
            Ok(Some(VoucherView::new(&record, counters)))
        })
        .await
    }

    async fn vouchers(&self, before: Option<VoucherId>, limit: usize) -> Result<Vec<VoucherView>, StoreError> {
        let limit = limit.min(MAX_PAGE);
        blocking(&self.db, move |db| {
            let txn = db.begin_read()?;
            let vouchers = txn.open_table(VOUCHERS)?;
            let counters = txn.open_table(COUNTERS)?;
            let before = before.map(|id| id.to_string());
            let range = match &before {
                Some(before) => vouchers.range(..before.as_str())?,
                None => vouchers.range::<&str>(..)?,
            };
            let mut views = Vec::new();
            for entry in range.rev().take(limit) {
                let (key, raw) = entry?;
                let record: VoucherRecord = serde_json::from_slice(raw.value())?;
                views.push(VoucherView::new(&record, read_counters(&counters, key.value())?));
            }
            Ok(views)
        })
        .await
    }
}

fn read_counters(
    table: &impl ReadableTable<&'static str, &'static [u8]>,
    key: &str,
) -> Result<VoucherCounters, StoreError> {
    Ok(read_json(table, key)?.unwrap_or_default())
}
