//! Errors of building and running the processor.

/// Why the processor could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum ProcessorError {
    #[error("cannot bind {addr}: {source}")]
    Bind {
        addr: std::net::SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("Redis: {0}")]
    Redis(#[from] redis::RedisError),
    #[error(transparent)]
    Kafka(#[from] seckill_kafka::KafkaError),
    #[error(transparent)]
    Store(#[from] seckill_store::StoreError),
    #[error("payment provider: {0}")]
    Payments(#[from] seckill_payments::ProviderError),
}
