//! Errors of the analytics commands.

use seckill_core::ids::VoucherId;

use crate::replay::ReplayError;

/// Why reading the log, a store or Redis failed.
#[derive(Debug, thiserror::Error)]
pub enum AnalyticsError {
    #[error(transparent)]
    Kafka(#[from] seckill_kafka::KafkaError),
    #[error(transparent)]
    Store(#[from] seckill_store::StoreError),
    #[error(transparent)]
    Read(#[from] ReplayError),
    #[error("Redis: {0}")]
    Redis(#[from] redis::RedisError),
    #[error("a background task failed: {0}")]
    Task(String),
    #[error("voucher {0} does not appear in the log")]
    UnknownVoucher(VoucherId),
    #[error("{found} vouchers or more match, at most {max} at a time: name vouchers or narrow the window")]
    TooManyVouchers { found: usize, max: usize },
    #[error("the chosen vouchers have more than {0} orders: choose fewer vouchers")]
    TooManyOrders(usize),
    #[error("drawing a chart failed: {0}")]
    Chart(String),
    #[error("{what}: {reason}")]
    Live { what: String, reason: String },
    #[error("voucher {0} is not a draw: its definition has no draw and the log no draw record")]
    NotADraw(VoucherId),
    #[error(
        "{topic} partition {partition} starts at offset {earliest}, not 0: records were deleted, and a store built \
         from the rest would lack them; restore the topic (it must keep every record: retention.ms=-1, \
         retention.bytes=-1) or rebuild from a complete copy"
    )]
    LogIncomplete { topic: String, partition: i32, earliest: i64 },
    #[error("reading {path}: {error}")]
    File { path: String, error: std::io::Error },
}
