//! Persistent stock in redb.

use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use chrono::Utc;
use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};
use seckill_core::decision::{self, StockLevel};
use seckill_core::{Envelope, VoucherId};

use super::{blocking, open_database};
use crate::{Decided, StockInput, StockStore, StoreError};

/// voucher id → JSON [`StockLevel`].
const LEVELS: TableDefinition<&str, &[u8]> = TableDefinition::new("stock_levels");
/// order id → the encoded outcome envelope, emitted again on redelivery.
const OUTCOMES: TableDefinition<&str, &[u8]> = TableDefinition::new("order_outcomes");

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
        txn.commit()?;
        Ok(Self { db })
    }
}

#[async_trait]
impl StockStore for EmbeddedStockStore {
    async fn apply(&self, batch: Vec<StockInput>) -> Result<Vec<Decided>, StoreError> {
        blocking(&self.db, move |db| {
            let txn = db.begin_write()?;
            let mut decided = Vec::new();
            {
                let mut levels = txn.open_table(LEVELS)?;
                let mut outcomes = txn.open_table(OUTCOMES)?;
                for input in batch {
                    match input {
                        StockInput::Voucher(voucher) => {
                            let key = voucher.voucher_id.to_string();
                            if levels.get(key.as_str())?.is_none() {
                                let level = StockLevel { stock: voucher.stock, remaining: voucher.stock };
                                levels.insert(key.as_str(), serde_json::to_vec(&level)?.as_slice())?;
                            }
                        }
                        StockInput::Order(order) => {
                            let order_key = order.order_id.to_string();
                            if let Some(previous) = outcomes.get(order_key.as_str())? {
                                let outcome = Envelope::decode(previous.value())
                                    .map_err(|e| StoreError::Corrupt(e.to_string()))?;
                                decided.push(Decided { outcome, replayed: true });
                                continue;
                            }
                            let voucher_key = order.voucher_id.to_string();
                            let mut level: Option<StockLevel> = match levels.get(voucher_key.as_str())? {
                                Some(raw) => Some(serde_json::from_slice(raw.value())?),
                                None => None,
                            };
                            let result = decision::decide(level.as_mut(), &order);
                            if let (Ok(_), Some(level)) = (&result, level) {
                                levels.insert(voucher_key.as_str(), serde_json::to_vec(&level)?.as_slice())?;
                            }
                            let outcome = decision::outcome(order, result, Utc::now());
                            outcomes.insert(order_key.as_str(), outcome.encode().as_slice())?;
                            decided.push(Decided { outcome, replayed: false });
                        }
                    }
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
}
