//! Errors of the analytics commands.

/// Why reading the log, a store or Redis failed.
#[derive(Debug, thiserror::Error)]
pub enum AnalyticsError {
    #[error(transparent)]
    Kafka(#[from] seckill_kafka::KafkaError),
    #[error(transparent)]
    Store(#[from] seckill_store::StoreError),
    #[error("Redis: {0}")]
    Redis(#[from] redis::RedisError),
    #[error("a background task failed: {0}")]
    Task(String),
}
