//! Dead letters: records a consumer cannot use are parked, with the reason
//! and their origin, so the partition keeps moving and nothing is silently
//! dropped.
//!
//! A dead letter keeps the original key and payload byte for byte; its
//! headers say why and where from (`dlq.reason`, `dlq.service`,
//! `dlq.source.topic`, `dlq.source.partition`, `dlq.source.offset`).

use rdkafka::message::{Header, Message, OwnedHeaders, OwnedMessage};

use crate::{EventProducer, KafkaError};

/// Parks unusable records on the dead-letter topic.
#[derive(Clone, Debug)]
pub struct DeadLetter {
    producer: EventProducer,
    topic: String,
    service: &'static str,
}

impl DeadLetter {
    /// Dead letters of `service` go to `topic`.
    pub fn new(producer: EventProducer, topic: String, service: &'static str) -> Self {
        Self { producer, topic, service }
    }

    /// Produces `message` to the dead-letter topic and waits for the
    /// acknowledgement; only then may the caller store its offset.
    pub async fn park(&self, message: &OwnedMessage, reason: &str) -> Result<(), KafkaError> {
        tracing::warn!(
            topic = message.topic(),
            partition = message.partition(),
            offset = message.offset(),
            reason,
            "Dead-lettering a record."
        );
        let partition = message.partition().to_string();
        let offset = message.offset().to_string();
        let headers = OwnedHeaders::new()
            .insert(Header { key: "dlq.reason", value: Some(reason) })
            .insert(Header { key: "dlq.service", value: Some(self.service) })
            .insert(Header { key: "dlq.source.topic", value: Some(message.topic()) })
            .insert(Header { key: "dlq.source.partition", value: Some(&partition) })
            .insert(Header { key: "dlq.source.offset", value: Some(&offset) });
        self.producer
            .send_raw(&self.topic, message.key(), message.payload().unwrap_or_default(), headers)
            .await
            .map(|_| ())
    }
}

impl DeadLetter {
    /// Parks every `(record, reason)`, retrying until each is acknowledged
    /// or shutdown begins.
    pub async fn park_all(
        &self,
        rejects: &[(&OwnedMessage, String)],
        shutdown: &tokio_util::sync::CancellationToken,
    ) -> Result<(), crate::Interrupted> {
        for (message, reason) in rejects {
            crate::retry(shutdown, "dead-lettering a record", || self.park(message, reason)).await?;
        }
        Ok(())
    }
}
