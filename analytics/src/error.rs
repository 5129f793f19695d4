//! Errors of the analytics commands.

/// Why reading the log or a store failed.
#[derive(Debug, thiserror::Error)]
pub enum AnalyticsError {
    #[error(transparent)]
    Kafka(#[from] seckill_kafka::KafkaError),
    #[error(transparent)]
    Store(#[from] seckill_store::StoreError),
    #[error("a background task failed: {0}")]
    Task(String),
}
