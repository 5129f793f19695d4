//! The processor's persistent stock.

use async_trait::async_trait;
use seckill_core::decision::StockLevel;
use seckill_core::event::{OrderAccepted, VoucherCreated};
use seckill_core::{Envelope, VoucherId};

use crate::StoreError;

/// One record of the sales topic, as the processor applies it.
#[derive(Clone, Debug)]
pub enum StockInput {
    /// Defines a voucher's stock; applying it again changes nothing.
    Voucher(VoucherCreated),
    /// An order to decide; deciding it again returns the first outcome.
    Order(OrderAccepted),
}

/// The outcome of one order.
#[derive(Clone, Debug)]
pub struct Decided {
    /// The `OrderCreated` or `OrderFailed` event to emit.
    pub outcome: Envelope,
    /// True when the order had been decided before (a redelivery): the stock
    /// did not move this time and `outcome` is the original event.
    pub replayed: bool,
}

/// Persistent stock and the outcome of every decided order.
#[async_trait]
pub trait StockStore: Send + Sync + std::fmt::Debug + 'static {
    /// Applies `batch` in order, atomically: either every voucher definition
    /// and decision is durable, or none is. Returns one [`Decided`] per
    /// order, in batch order.
    async fn apply(&self, batch: Vec<StockInput>) -> Result<Vec<Decided>, StoreError>;

    /// A voucher's persistent stock, if it is defined.
    async fn stock(&self, voucher: VoucherId) -> Result<Option<StockLevel>, StoreError>;
}
