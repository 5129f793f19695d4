//! Consumer groups' lag as the broker sees it: each partition's high
//! watermark minus the group's committed offset. Measured from outside the
//! group (its members need not be alive; a crashed processor reports
//! nothing of itself), the way Kafka's own `kafka-consumer-groups.sh
//! --describe` and lag exporters measure it, so an operator learns that a
//! group stopped even when the group is gone.

use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};

use crate::KafkaError;

/// How long one metadata, offset or watermark request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// One group's position on one topic, summed over its partitions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupPosition {
    pub group: String,
    pub topic: String,
    /// Records on the topic the group has not committed past.
    pub lag: i64,
    /// The sum of the group's committed offsets: it moves only when the
    /// group makes progress, so "lag above zero and this unchanged" is a
    /// group that stopped.
    pub committed: i64,
}

/// Asks the broker where consumer groups stand. Blocking: call it from a
/// blocking thread. One client per watched group (a client asks for the
/// committed offsets of the `group.id` it was made with); none of them ever
/// joins its group.
pub struct GroupLag {
    watched: Vec<Watched>,
}

struct Watched {
    group: String,
    topics: Vec<String>,
    consumer: BaseConsumer,
}

impl std::fmt::Debug for GroupLag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let groups: Vec<(&str, &[String])> =
            self.watched.iter().map(|watched| (watched.group.as_str(), watched.topics.as_slice())).collect();
        f.debug_struct("GroupLag").field("groups", &groups).finish()
    }
}

impl GroupLag {
    /// A watcher of each group on the topics it reads (a group's lag on a
    /// topic it does not read would be the whole topic), on the cluster at
    /// `brokers`.
    pub fn new(brokers: &str, groups: &[(String, Vec<String>)]) -> Result<Self, KafkaError> {
        let watched = groups
            .iter()
            .map(|(group, topics)| {
                let consumer: BaseConsumer = ClientConfig::new()
                    .set("bootstrap.servers", brokers)
                    .set("group.id", group)
                    // Never subscribes, never commits: reading a group's
                    // offsets must not change them.
                    .set("enable.auto.commit", "false")
                    .set("enable.auto.offset.store", "false")
                    .create()
                    .map_err(KafkaError::Client)?;
                Ok(Watched { group: group.clone(), topics: topics.clone(), consumer })
            })
            .collect::<Result<_, KafkaError>>()?;
        Ok(Self { watched })
    }

    /// Each watched group's lag and committed position on each topic it
    /// reads. A partition the group never committed counts from its low
    /// watermark (every record still there is ahead of the group).
    pub fn measure(&self) -> Result<Vec<GroupPosition>, KafkaError> {
        let mut positions = Vec::new();
        for Watched { group, topics, consumer } in &self.watched {
            for topic in topics {
                let metadata = consumer.fetch_metadata(Some(topic), REQUEST_TIMEOUT).map_err(KafkaError::Consume)?;
                let mut partitions = TopicPartitionList::new();
                for partition in metadata.topics().iter().flat_map(|t| t.partitions()) {
                    partitions.add_partition(topic, partition.id());
                }
                let committed = consumer.committed_offsets(partitions, REQUEST_TIMEOUT).map_err(KafkaError::Consume)?;
                let (mut lag, mut position_sum) = (0, 0);
                for element in committed.elements() {
                    let (low, high) = consumer
                        .fetch_watermarks(topic, element.partition(), REQUEST_TIMEOUT)
                        .map_err(KafkaError::Consume)?;
                    let position = match element.offset() {
                        Offset::Offset(offset) => offset.clamp(low, high),
                        _ => low,
                    };
                    lag += high - position;
                    position_sum += position;
                }
                positions.push(GroupPosition {
                    group: group.clone(),
                    topic: topic.clone(),
                    lag,
                    committed: position_sum,
                });
            }
        }
        Ok(positions)
    }
}
