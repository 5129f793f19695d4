//! The order-status view in redb.

use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};
use seckill_core::event::Event;
use seckill_core::{Envelope, OrderId, UserId, VoucherId};

use super::{blocking, open_database};
use crate::view::{merge_order, OrderView, VoucherCounters, VoucherRecord, VoucherView, MAX_PAGE};
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

#[async_trait]
impl ViewStore for EmbeddedViewStore {
    async fn apply(&self, events: Vec<Envelope>) -> Result<Vec<bool>, StoreError> {
        blocking(&self.db, move |db| {
            let txn = db.begin_write()?;
            let mut changed = Vec::with_capacity(events.len());
            {
                let mut orders = txn.open_table(ORDERS)?;
                let mut user_orders = txn.open_table(USER_ORDERS)?;
                let mut vouchers = txn.open_table(VOUCHERS)?;
                let mut counters = txn.open_table(COUNTERS)?;
                let mut updates = txn.open_table(UPDATES)?;
                for envelope in events {
                    match &envelope.event {
                        Event::VoucherCreated(voucher) => {
                            let key = voucher.voucher_id.to_string();
                            let fresh = vouchers.get(key.as_str())?.is_none();
                            if fresh {
                                let record = VoucherRecord::new(voucher.clone());
                                vouchers.insert(key.as_str(), serde_json::to_vec(&record)?.as_slice())?;
                            }
                            changed.push(fresh);
                            continue;
                        }
                        Event::VoucherUpdated(update) => {
                            let key = update.voucher_id.to_string();
                            let update_id = envelope.event_id.to_string();
                            let stored: Option<VoucherRecord> = match vouchers.get(key.as_str())? {
                                Some(raw) => Some(serde_json::from_slice(raw.value())?),
                                None => None,
                            };
                            // Updates follow their voucher on one partition;
                            // one without a voucher has nothing to change.
                            let fresh = updates.get(update_id.as_str())?.is_none();
                            let Some(mut record) = stored.filter(|_| fresh) else {
                                changed.push(false);
                                continue;
                            };
                            record.update(envelope.event_id, update);
                            vouchers.insert(key.as_str(), serde_json::to_vec(&record)?.as_slice())?;
                            updates.insert(update_id.as_str(), ())?;
                            changed.push(true);
                            continue;
                        }
                        _ => {}
                    }
                    let Some(row) = OrderView::from_event(&envelope.event) else {
                        changed.push(false);
                        continue;
                    };
                    let order_key = row.order_id.to_string();
                    let existing: Option<OrderView> = match orders.get(order_key.as_str())? {
                        Some(raw) => Some(serde_json::from_slice(raw.value())?),
                        None => None,
                    };
                    let Some((transition, row)) = merge_order(existing.as_ref(), &row) else {
                        changed.push(false);
                        continue;
                    };
                    orders.insert(order_key.as_str(), serde_json::to_vec(&row)?.as_slice())?;
                    if transition.first_seen() {
                        user_orders.insert((row.user_id.as_str(), order_key.as_str()), ())?;
                    }
                    let voucher_key = row.voucher_id.to_string();
                    let mut count: VoucherCounters = match counters.get(voucher_key.as_str())? {
                        Some(raw) => serde_json::from_slice(raw.value())?,
                        None => VoucherCounters::default(),
                    };
                    transition.count(&mut count, row.quantity);
                    counters.insert(voucher_key.as_str(), serde_json::to_vec(&count)?.as_slice())?;
                    changed.push(true);
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
            let orders = txn.open_table(ORDERS)?;
            let row = orders.get(order.to_string().as_str())?;
            Ok(match row {
                Some(raw) => Some(serde_json::from_slice(raw.value())?),
                None => None,
            })
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
    Ok(match table.get(key)? {
        Some(raw) => serde_json::from_slice(raw.value())?,
        None => VoucherCounters::default(),
    })
}
