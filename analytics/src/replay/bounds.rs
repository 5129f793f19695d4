//! Turning a replay's start and end into offsets, partition by partition.

use std::collections::HashMap;
use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{Offset, TopicPartitionList};

use super::{End, ReplayError, Start, REQUEST_TIMEOUT};

/// The offsets one partition is read between.
#[derive(Clone, Debug)]
pub(super) struct Range {
    /// Index into the replay's topic names.
    pub(super) topic: usize,
    pub(super) partition: i32,
    /// First offset to read.
    pub(super) start: i64,
    /// First offset not to read (ignored when following).
    pub(super) end: i64,
    /// Set once the partition's last wanted record was read.
    pub(super) done: bool,
}

impl Range {
    pub(super) fn is_empty(&self) -> bool {
        self.start >= self.end
    }
}

/// Every partition's range, and where to find it by (topic, partition).
#[derive(Debug)]
pub(super) struct Plan {
    pub(super) ranges: Vec<Range>,
    pub(super) index: HashMap<(usize, i32), usize>,
}

impl Plan {
    /// Records between the bounds, for the progress bar.
    pub(super) fn records(&self) -> u64 {
        self.ranges.iter().map(|range| (range.end - range.start).max(0) as u64).sum()
    }
}

/// Resolves `start` and `end` for every partition of `topics`. When
/// following, `end` is the high watermark (and only sizes nothing).
pub(super) fn resolve(consumer: &BaseConsumer, topics: &[String], start: Start, end: End) -> Result<Plan, ReplayError> {
    let mut ranges = Vec::new();
    for (index, topic) in topics.iter().enumerate() {
        for partition in partitions(consumer, topic)? {
            let (low, high) = consumer
                .fetch_watermarks(topic, partition, REQUEST_TIMEOUT)
                .map_err(ReplayError::kafka(format!("reading the watermarks of {topic}/{partition}")))?;
            ranges.push(Range { topic: index, partition, start: low, end: high, done: false });
        }
    }
    let low: Vec<i64> = ranges.iter().map(|range| range.start).collect();
    let high: Vec<i64> = ranges.iter().map(|range| range.end).collect();
    match start {
        Start::Beginning => {}
        Start::Offset(offset) => ranges.iter_mut().for_each(|range| range.start = offset.clamp(range.start, range.end)),
        Start::Time(time) => {
            let found = offsets_for_time(consumer, topics, &ranges, time.timestamp_millis())?;
            for ((range, found), high) in ranges.iter_mut().zip(found).zip(&high) {
                range.start = found.unwrap_or(*high).max(range.start);
            }
        }
    }
    if let End::Time(time) = end {
        let found = offsets_for_time(consumer, topics, &ranges, time.timestamp_millis())?;
        for ((range, found), low) in ranges.iter_mut().zip(found).zip(&low) {
            range.end = found.unwrap_or(range.end).clamp(*low, range.end);
        }
    }
    let index = ranges.iter().enumerate().map(|(i, range)| ((range.topic, range.partition), i)).collect();
    Ok(Plan { ranges, index })
}

/// The partition ids of `topic`.
pub(crate) fn partitions(consumer: &BaseConsumer, topic: &str) -> Result<Vec<i32>, ReplayError> {
    let metadata = consumer
        .fetch_metadata(Some(topic), REQUEST_TIMEOUT)
        .map_err(ReplayError::kafka(format!("reading the metadata of {topic}")))?;
    let Some(found) = metadata.topics().iter().find(|t| t.name() == topic) else {
        return Err(ReplayError::UnknownTopic(topic.to_owned()));
    };
    if found.error().is_some() || found.partitions().is_empty() {
        return Err(ReplayError::UnknownTopic(topic.to_owned()));
    }
    let mut ids: Vec<i32> = found.partitions().iter().map(|p| p.id()).collect();
    ids.sort_unstable();
    Ok(ids)
}

/// For each range, the first offset produced at or after `millis`; `None`
/// when no record is that recent.
fn offsets_for_time(
    consumer: &BaseConsumer,
    topics: &[String],
    ranges: &[Range],
    millis: i64,
) -> Result<Vec<Option<i64>>, ReplayError> {
    let mut query = TopicPartitionList::new();
    for range in ranges {
        query
            .add_partition_offset(&topics[range.topic], range.partition, Offset::Offset(millis))
            .map_err(ReplayError::kafka("building the time query"))?;
    }
    let answer =
        consumer.offsets_for_times(query, REQUEST_TIMEOUT).map_err(ReplayError::kafka("looking up offsets by time"))?;
    Ok(ranges
        .iter()
        .map(|range| match answer.find_partition(&topics[range.topic], range.partition).map(|e| e.offset()) {
            Some(Offset::Offset(offset)) if offset >= 0 => Some(offset),
            _ => None,
        })
        .collect())
}

/// Parses a `--last` window: a whole number followed by `s`, `m`, `h` or
/// `d` (`15m`, `2h`).
pub fn parse_window(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: u64 = number.parse().map_err(|_| format!("{text:?} does not start with a whole number"))?;
    let seconds = match unit {
        "s" => 1,
        "m" | "min" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(format!("{text:?} needs a unit: s, m, h or d (e.g. 15m)")),
    };
    number.checked_mul(seconds).map(Duration::from_secs).ok_or_else(|| format!("{text:?} is too long"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_parse_with_units_and_refuse_the_rest() {
        assert_eq!(parse_window("15m"), Ok(Duration::from_secs(900)));
        assert_eq!(parse_window("2h"), Ok(Duration::from_secs(7200)));
        assert_eq!(parse_window("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_window("1d"), Ok(Duration::from_secs(86_400)));
        assert!(parse_window("15").is_err());
        assert!(parse_window("m").is_err());
        assert!(parse_window("1w").is_err());
    }
}
