//! Errors of the Kafka adapters.

/// What went wrong talking to the broker.
#[derive(Debug, thiserror::Error)]
pub enum KafkaError {
    #[error("could not create the Kafka client: {0}")]
    Client(#[source] rdkafka::error::KafkaError),
    #[error("could not create topic {topic}: {reason}")]
    CreateTopic { topic: String, reason: String },
    #[error(transparent)]
    LogNotKept(#[from] crate::retention::LosesRecords),
    #[error("the broker did not acknowledge the event: {0}")]
    Produce(#[source] rdkafka::error::KafkaError),
    #[error("the broker did not acknowledge the event within {0:?}")]
    ProduceTimeout(std::time::Duration),
    #[error("consuming failed: {0}")]
    Consume(#[source] rdkafka::error::KafkaError),
    #[error("committing offsets failed: {0}")]
    Commit(#[source] rdkafka::error::KafkaError),
    #[error("reading stalled: {0}")]
    Stalled(String),
}
