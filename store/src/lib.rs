//! The platform's derived state, behind traits.
//!
//! * [`StockStore`]: the processor's persistent stock and the outcome of
//!   every order it decided (its idempotency record).
//! * [`ViewStore`] / [`ViewReader`]: the projector's order-status view.
//!
//! Both are derived from the log and can be rebuilt from it. The embedded
//! backend ([`embedded`], a redb file owned by one process) is the default for
//! the local run; the ScyllaDB backend implements the same traits.

pub mod cql;
pub mod embedded;
mod error;
mod stock;
mod stock_rules;
mod view;
mod view_rules;

pub use error::StoreError;
pub use stock::{
    Decided, DueHold, HoldCursor, PendingRefund, StockInput, StockStore, MAX_EXPIRED_PAGE, MAX_PENDING_REFUNDS_PAGE,
};
pub use view::{
    merge_order, OrderReason, OrderStatus, OrderView, Transition, ViewReader, ViewStore, VoucherCounters,
    VoucherRecord, VoucherView, MAX_PAGE,
};

use std::sync::Arc;

use seckill_core::config::{StoreBackend, StoreConfig};

/// Opens the stock store `config` names (for ScyllaDB: connects, creates the
/// keyspace and applies the schema migrations).
pub async fn open_stock_store(config: &StoreConfig) -> Result<Arc<dyn StockStore>, StoreError> {
    match config.backend {
        StoreBackend::Embedded => Ok(Arc::new(embedded::EmbeddedStockStore::open(&config.path)?)),
        StoreBackend::Scylla => {
            let session = Arc::new(cql::connect(config).await?);
            Ok(Arc::new(cql::CqlStockStore::new(session).await?.with_batch_limits(config.into())))
        }
    }
}

/// Opens the view store `config` names.
pub async fn open_view_store(config: &StoreConfig) -> Result<Arc<dyn ViewStore>, StoreError> {
    match config.backend {
        StoreBackend::Embedded => Ok(Arc::new(embedded::EmbeddedViewStore::open(&config.path)?)),
        StoreBackend::Scylla => {
            let session = Arc::new(cql::connect(config).await?);
            Ok(Arc::new(cql::CqlViewStore::new(session).await?.with_batch_limits(config.into())))
        }
    }
}
