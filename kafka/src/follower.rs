//! Following topics live, outside any consumer group (assign-and-seek to the
//! end): every instance of a service sees every new record, which a group
//! would split between them. The ingresses use it to wake their own waiters
//! and streams, whichever replica a client is connected to.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rdkafka::client::ClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{Consumer, ConsumerContext, StreamConsumer};
use rdkafka::message::OwnedMessage;
use rdkafka::statistics::Statistics;
use rdkafka::{Offset, TopicPartitionList};

use crate::lag::{SOCKET_TIMEOUT_MS, STATISTICS_INTERVAL_MS};
use crate::KafkaError;

/// How long the partition lookup at start may take.
const METADATA_TIMEOUT: Duration = Duration::from_secs(10);

/// How far behind a follower is, from librdkafka's statistics.
#[derive(Debug)]
pub struct FollowerHealth {
    started: Instant,
    /// Milliseconds since `started` of the last statistics report; -1: none yet.
    reported_at_ms: AtomicI64,
    /// Records behind the high watermark that the application has not read,
    /// the largest over the partitions.
    lag: AtomicI64,
}

impl FollowerHealth {
    fn new() -> Self {
        Self { started: Instant::now(), reported_at_ms: AtomicI64::new(-1), lag: AtomicI64::new(0) }
    }

    /// Whether the follower reported, within `within`, being at most
    /// `max_lag` records behind on every partition.
    pub fn is_current(&self, within: Duration, max_lag: i64) -> bool {
        let reported = self.reported_at_ms.load(Ordering::Relaxed);
        if reported < 0 {
            return false;
        }
        let age = self.started.elapsed().as_millis() as i64 - reported;
        age <= within.as_millis() as i64 && self.lag.load(Ordering::Relaxed) <= max_lag
    }

    /// Records behind the high watermark at the last report, the largest
    /// over the partitions (-1: no report yet).
    pub fn lag(&self) -> i64 {
        if self.reported_at_ms.load(Ordering::Relaxed) < 0 {
            return -1;
        }
        self.lag.load(Ordering::Relaxed)
    }
}

/// The follower's librdkafka context: records its lag from each report.
#[derive(Debug)]
pub(crate) struct FollowerContext {
    health: Arc<FollowerHealth>,
}

/// Records of a partition the application has not read yet: behind the
/// high watermark from the last record handed to it. librdkafka's own
/// `consumer_lag` is measured from the committed offset, which a follower
/// never has (it is always -1); its fetch position runs ahead of the
/// application by whatever is prefetched, so a stuck reader would look
/// current by it.
fn unread(partition: &rdkafka::statistics::Partition) -> i64 {
    if partition.hi_offset < 0 {
        return 0;
    }
    if partition.app_offset >= 0 {
        return (partition.hi_offset - partition.app_offset).max(0);
    }
    // Nothing handed over since the start: what was not fetched yet, and
    // what was fetched and waits in the queue.
    let not_fetched = if partition.next_offset >= 0 { (partition.hi_offset - partition.next_offset).max(0) } else { 0 };
    not_fetched + partition.fetchq_cnt.max(0)
}

impl ClientContext for FollowerContext {
    fn stats(&self, statistics: Statistics) {
        let (mut lag, mut fetching) = (0, false);
        for stats in statistics.topics.values() {
            for (partition, stats) in &stats.partitions {
                if *partition >= 0 && stats.fetch_state == "active" {
                    lag = lag.max(unread(stats));
                    fetching = true;
                }
            }
        }
        // Reports keep coming while the broker is unreachable; only one
        // that shows partitions being fetched says the follower is current.
        if !fetching {
            return;
        }
        self.health.lag.store(lag, Ordering::Relaxed);
        let now = self.health.started.elapsed().as_millis() as i64;
        self.health.reported_at_ms.store(now, Ordering::Relaxed);
    }
}

impl ConsumerContext for FollowerContext {}

/// Every partition of some topics, read from their end onwards.
pub struct Follower {
    /// Always `Some` until dropped; see the `Drop` impl.
    consumer: Option<StreamConsumer<FollowerContext>>,
    health: Arc<FollowerHealth>,
}

impl Drop for Follower {
    /// Closing a librdkafka consumer can block while the broker is
    /// unreachable; never do that on a runtime thread.
    fn drop(&mut self) {
        if let Some(consumer) = self.consumer.take() {
            std::thread::spawn(move || drop(consumer));
        }
    }
}

impl std::fmt::Debug for Follower {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Follower").field("health", &self.health).finish_non_exhaustive()
    }
}

impl Follower {
    /// Assigns every partition of `topics` at its current end. `fetch_wait`
    /// bounds how long the broker holds a fetch that found nothing, hence
    /// the latency of a quiet topic's next record.
    pub async fn start_at_end(brokers: &str, topics: &[&str], fetch_wait: Duration) -> Result<Self, KafkaError> {
        let health = Arc::new(FollowerHealth::new());
        let consumer: StreamConsumer<FollowerContext> = ClientConfig::new()
            .set("bootstrap.servers", brokers)
            // Never joined or committed: librdkafka wants a name all the same.
            .set("group.id", "seckill-follower-unused")
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("enable.partition.eof", "false")
            .set("fetch.wait.max.ms", fetch_wait.as_millis().max(1).to_string())
            .set("statistics.interval.ms", STATISTICS_INTERVAL_MS)
            .set("socket.timeout.ms", SOCKET_TIMEOUT_MS)
            .create_with_context(FollowerContext { health: Arc::clone(&health) })
            .map_err(KafkaError::Client)?;
        let topics = topics_owned(topics);
        let consumer = tokio::task::spawn_blocking(move || -> Result<_, KafkaError> {
            let mut assignment = TopicPartitionList::new();
            for topic in topics {
                let metadata = consumer.fetch_metadata(Some(&topic), METADATA_TIMEOUT).map_err(KafkaError::Consume)?;
                for partition in metadata.topics().iter().flat_map(|t| t.partitions()) {
                    assignment
                        .add_partition_offset(&topic, partition.id(), Offset::End)
                        .map_err(KafkaError::Consume)?;
                }
            }
            consumer.assign(&assignment).map_err(KafkaError::Consume)?;
            Ok(consumer)
        })
        .await
        .map_err(|e| KafkaError::Stalled(format!("assigning the followed partitions: {e}")))??;
        Ok(Self { consumer: Some(consumer), health })
    }

    /// The next record of any followed partition.
    pub async fn recv(&self) -> Result<OwnedMessage, KafkaError> {
        let consumer = self.consumer.as_ref().expect("the consumer exists until drop");
        consumer.recv().await.map(|message| message.detach()).map_err(KafkaError::Consume)
    }

    /// How far behind the follower is.
    pub fn health(&self) -> Arc<FollowerHealth> {
        Arc::clone(&self.health)
    }
}

fn topics_owned(topics: &[&str]) -> Vec<String> {
    topics.iter().map(|topic| (*topic).to_owned()).collect()
}
