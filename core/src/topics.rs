//! The platform's topics. Every topic is keyed by voucher id, so one voucher's
//! history is one ordered partition.
//!
//! | topic (default prefix `seckill`) | written by | events |
//! |---|---|---|
//! | `seckill.sales` | ingress | `VoucherCreated`, `OrderAccepted`, requests, payments, the waiting room's records |
//! | `seckill.orders` | processor | `OrderCreated`, `OrderFailed` |
//! | `seckill.dead-letters` | any consumer | the original bytes of a record it could not use |
//!
//! Voucher definitions share the sales topic with the orders they govern: the
//! processor then always reads a voucher's definition before its first order,
//! without coordinating two topics.

use serde::{Deserialize, Serialize};

/// Fully qualified topic names.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Topics {
    /// Voucher definitions and admitted orders, written by the ingress.
    pub sales: String,
    /// Order outcomes, written by the processor.
    pub orders: String,
    /// Records a consumer could not decode or apply.
    pub dead_letters: String,
}

impl Topics {
    /// Topic names under `prefix` (tests use a unique prefix each).
    pub fn with_prefix(prefix: &str) -> Self {
        Self {
            sales: format!("{prefix}.sales"),
            orders: format!("{prefix}.orders"),
            dead_letters: format!("{prefix}.dead-letters"),
        }
    }

    /// Every topic, for creation at startup.
    pub fn all(&self) -> [&str; 3] {
        [&self.sales, &self.orders, &self.dead_letters]
    }
}
