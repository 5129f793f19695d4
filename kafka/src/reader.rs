//! Reading topics from the beginning to their current end, outside any
//! consumer group (assign-and-seek): for commands that rebuild state from the
//! log and must not disturb the services' offsets.

use std::collections::HashMap;
use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Message, OwnedMessage};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};

use crate::KafkaError;

/// How long one metadata or watermark request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest pause without a record before the read gives up on a partition
/// that should still have some.
const STALL_TIMEOUT: Duration = Duration::from_secs(30);

/// Reads every record of `topics` that was there when the call began, in
/// partition order, and hands each to `visit`. Records written meanwhile
/// are not waited for.
pub fn read_to_end(brokers: &str, topics: &[&str], mut visit: impl FnMut(&OwnedMessage)) -> Result<u64, KafkaError> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("group.id", "seckill-reader-unused")
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("enable.partition.eof", "false")
        .create()
        .map_err(KafkaError::Client)?;

    let mut assignment = TopicPartitionList::new();
    let mut end: HashMap<(String, i32), i64> = HashMap::new();
    for topic in topics {
        let metadata = consumer.fetch_metadata(Some(topic), REQUEST_TIMEOUT).map_err(KafkaError::Consume)?;
        for partition in metadata.topics().iter().flat_map(|t| t.partitions()) {
            let (low, high) =
                consumer.fetch_watermarks(topic, partition.id(), REQUEST_TIMEOUT).map_err(KafkaError::Consume)?;
            if high > low {
                end.insert(((*topic).to_owned(), partition.id()), high);
                assignment
                    .add_partition_offset(topic, partition.id(), Offset::Beginning)
                    .map_err(KafkaError::Consume)?;
            }
        }
    }
    if end.is_empty() {
        return Ok(0);
    }
    consumer.assign(&assignment).map_err(KafkaError::Consume)?;

    let mut read = 0;
    let mut last_progress = std::time::Instant::now();
    while !end.is_empty() {
        let Some(result) = consumer.poll(Duration::from_millis(200)) else {
            if last_progress.elapsed() > STALL_TIMEOUT {
                return Err(KafkaError::Stalled(format!("{} partitions not read to their end", end.len())));
            }
            continue;
        };
        let message = result.map_err(KafkaError::Consume)?.detach();
        last_progress = std::time::Instant::now();
        let key = (message.topic().to_owned(), message.partition());
        let Some(&high) = end.get(&key) else { continue };
        if message.offset() < high {
            visit(&message);
            read += 1;
        }
        if message.offset() + 1 >= high {
            end.remove(&key);
        }
    }
    Ok(read)
}
