//! An overview of the platform's topics: partitions, watermarks, and how far
//! each service's consumer group has come (committed offset and lag).
//!
//! Committed offsets are asked for with a consumer that carries the group's
//! id but never subscribes: an offset fetch does not join the group, so the
//! services are not rebalanced by looking at them.

use std::fmt::Write as _;

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};
use seckill_core::config::KafkaConfig;
use serde::Serialize;

use crate::replay::{ReplayError, REQUEST_TIMEOUT};

/// The consumer groups of the processor and the projector unless configured
/// otherwise.
pub const DEFAULT_GROUPS: [&str; 2] = ["seckill-processor", "seckill-projector"];

/// Every topic of the platform.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Overview {
    pub topics: Vec<TopicOverview>,
}

/// One topic.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TopicOverview {
    pub name: String,
    /// False when the topic was never created (nothing else is filled in).
    pub exists: bool,
    pub partitions: Vec<PartitionOverview>,
}

impl TopicOverview {
    /// Records on the topic now: the sum of high minus low watermarks.
    pub fn records(&self) -> i64 {
        self.partitions.iter().map(|p| p.high - p.low).sum()
    }
}

/// One partition: its watermarks and each group's position in it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PartitionOverview {
    pub partition: i32,
    /// Oldest offset still stored.
    pub low: i64,
    /// The offset the next record will get.
    pub high: i64,
    pub groups: Vec<GroupPosition>,
}

/// Where one consumer group is in one partition.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct GroupPosition {
    pub group: String,
    /// The next offset the group will read; `None`: it never committed
    /// here (it may not consume this topic at all).
    pub committed: Option<i64>,
    /// Records behind the high watermark; `None` without a commit.
    pub lag: Option<i64>,
}

/// Reads the overview of `kafka`'s topics for `groups`. Blocking.
pub fn overview(kafka: &KafkaConfig, groups: &[String]) -> Result<Overview, ReplayError> {
    let admin = client(&kafka.brokers, "seckill-topics-unused")?;
    let mut topics = Vec::new();
    for name in kafka.topics().all() {
        let partitions = match crate::replay::partitions(&admin, name) {
            Ok(partitions) => partitions,
            Err(ReplayError::UnknownTopic(_)) => {
                topics.push(TopicOverview { name: name.to_owned(), exists: false, partitions: Vec::new() });
                continue;
            }
            Err(other) => return Err(other),
        };
        let mut rows = Vec::new();
        for partition in partitions {
            let (low, high) = admin
                .fetch_watermarks(name, partition, REQUEST_TIMEOUT)
                .map_err(ReplayError::kafka(format!("reading the watermarks of {name}/{partition}")))?;
            rows.push(PartitionOverview { partition, low, high, groups: Vec::new() });
        }
        topics.push(TopicOverview { name: name.to_owned(), exists: true, partitions: rows });
    }
    for group in groups {
        let consumer = client(&kafka.brokers, group)?;
        let mut query = TopicPartitionList::new();
        for topic in topics.iter().filter(|topic| topic.exists) {
            for row in &topic.partitions {
                query.add_partition(&topic.name, row.partition);
            }
        }
        let committed = consumer
            .committed_offsets(query, REQUEST_TIMEOUT)
            .map_err(ReplayError::kafka(format!("reading the offsets of group {group}")))?;
        for topic in &mut topics {
            for row in &mut topic.partitions {
                let offset = match committed.find_partition(&topic.name, row.partition).map(|e| e.offset()) {
                    Some(Offset::Offset(offset)) if offset >= 0 => Some(offset),
                    _ => None,
                };
                let lag = offset.map(|offset| (row.high - offset).max(0));
                row.groups.push(GroupPosition { group: group.clone(), committed: offset, lag });
            }
        }
    }
    Ok(Overview { topics })
}

/// A consumer that never subscribes; `group` only names whose commits it
/// may read.
fn client(brokers: &str, group: &str) -> Result<BaseConsumer, ReplayError> {
    ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("allow.auto.create.topics", "false")
        .create()
        .map_err(ReplayError::kafka("creating the Kafka client"))
}

impl Overview {
    /// A table for people: per topic a line with its partition and record
    /// counts, then a row per partition with each group's committed offset
    /// and lag (`-` where the group never committed).
    pub fn table(&self) -> String {
        let mut out = String::new();
        for topic in &self.topics {
            if !topic.exists {
                let _ = writeln!(out, "{}  (does not exist)\n", topic.name);
                continue;
            }
            let _ = writeln!(out, "{}  {} partitions, {} records", topic.name, topic.partitions.len(), topic.records());
            let mut header = vec!["PARTITION".to_owned(), "LOW".to_owned(), "HIGH".to_owned()];
            let groups = topic.partitions.first().map(|row| row.groups.as_slice()).unwrap_or_default();
            for position in groups {
                header.push(format!("{} COMMITTED", position.group));
                header.push("LAG".to_owned());
            }
            let mut rows = vec![header];
            for row in &topic.partitions {
                let mut cells = vec![row.partition.to_string(), row.low.to_string(), row.high.to_string()];
                for position in &row.groups {
                    cells.push(position.committed.map_or("-".to_owned(), |offset| offset.to_string()));
                    cells.push(position.lag.map_or("-".to_owned(), |lag| lag.to_string()));
                }
                rows.push(cells);
            }
            crate::table::write_aligned(&mut out, &rows);
            out.push('\n');
        }
        out
    }
}
