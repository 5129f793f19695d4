//! Topic creation at startup.

use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::types::RDKafkaErrorCode;

use crate::KafkaError;

/// Creates each topic with `partitions` partitions unless it exists.
///
/// Partition counts are final: a voucher's partition is its key's hash modulo
/// the count, so growing a topic would split a voucher's history. Existing
/// topics are left as they are.
pub async fn ensure_topics(
    brokers: &str,
    topics: &[&str],
    partitions: i32,
    replication: i32,
) -> Result<(), KafkaError> {
    let admin: AdminClient<DefaultClientContext> =
        ClientConfig::new().set("bootstrap.servers", brokers).create().map_err(KafkaError::Client)?;
    let new_topics: Vec<NewTopic<'_>> =
        topics.iter().map(|name| NewTopic::new(name, partitions, TopicReplication::Fixed(replication))).collect();
    let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)));
    let results = admin.create_topics(&new_topics, &options).await.map_err(KafkaError::Client)?;
    for result in results {
        match result {
            Ok(topic) => tracing::info!(%topic, partitions, "Created topic."),
            Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
            Err((topic, code)) => return Err(KafkaError::CreateTopic { topic, reason: code.to_string() }),
        }
    }
    Ok(())
}
