//! Errors of building and running the projector.

/// Why the projector could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum ProjectorError {
    #[error("cannot bind {addr}: {source}")]
    Bind {
        addr: std::net::SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Kafka(#[from] seckill_kafka::KafkaError),
    #[error(transparent)]
    Store(#[from] seckill_store::StoreError),
}
