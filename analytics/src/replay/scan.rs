//! Reading chosen topics between two bounds, record by record: the loop
//! under `replay`, the sale report and the audit.
//!
//! Partitions are assigned and seeked (no group is joined, nothing is
//! committed). Each record within the bounds is handed to a visitor as it
//! arrives; nothing is collected here, so memory is what the visitor keeps
//! plus librdkafka's bounded prefetch queue.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{BorrowedMessage, Message};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};
use seckill_core::config::KafkaConfig;

use super::progress::Progress;
use super::{bounds, End, LogTopic, ReplayError, Start};

/// Longest pause without a record before a bounded read gives up on
/// partitions that should still have some.
const STALL_TIMEOUT: Duration = Duration::from_secs(30);
/// Records between two progress updates (the bar redraws at most 20 times a
/// second anyway).
const PROGRESS_EVERY: u64 = 2048;

/// Which records to read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadOptions {
    /// Topics to read; records of different topics and partitions
    /// interleave as they arrive, each partition in offset order.
    pub topics: Vec<LogTopic>,
    pub start: Start,
    pub end: End,
    /// Draw a progress bar on stderr (only sensible on a terminal).
    pub progress: bool,
}

/// Reads `options.topics` of `kafka` between the bounds (or, with
/// [`End::Follow`], until `stop` is set) and calls `visit` with each record
/// and the topic it came from. Returns how many records were visited.
/// Blocking: call it from a blocking thread in async code.
pub fn scan(
    kafka: &KafkaConfig,
    options: &ReadOptions,
    stop: &AtomicBool,
    mut visit: impl FnMut(LogTopic, &BorrowedMessage<'_>) -> Result<(), ReplayError>,
) -> Result<u64, ReplayError> {
    let consumer = reader(&kafka.brokers)?;
    let names: Vec<String> = options.topics.iter().map(|topic| topic.full_name(kafka)).collect();
    let plan = bounds::resolve(&consumer, &names, options.start, options.end)?;

    let mut assignment = TopicPartitionList::new();
    for range in plan.ranges.iter().filter(|range| !range.is_empty()) {
        assignment
            .add_partition_offset(&names[range.topic], range.partition, Offset::Offset(range.start))
            .map_err(ReplayError::kafka("building the assignment"))?;
    }
    let follow = options.end == End::Follow;
    let mut open = plan.ranges.iter().filter(|range| follow || !range.is_empty()).count();
    if open == 0 {
        return Ok(0);
    }
    consumer.assign(&assignment).map_err(ReplayError::kafka("assigning the partitions"))?;

    let progress = Progress::new(options.progress, (!follow).then(|| plan.records()));
    let from_time = match options.start {
        Start::Time(time) => Some(time.timestamp_millis()),
        _ => None,
    };
    let to_time = match options.end {
        End::Time(time) => Some(time.timestamp_millis()),
        _ => None,
    };
    let mut ranges = plan.ranges;
    let mut read = 0u64;
    let mut last_record = Instant::now();
    while open > 0 && !stop.load(Ordering::Relaxed) {
        let Some(result) = consumer.poll(Duration::from_millis(100)) else {
            if !follow && last_record.elapsed() > STALL_TIMEOUT {
                return Err(ReplayError::Stalled(open));
            }
            continue;
        };
        let message = result.map_err(ReplayError::kafka("reading"))?;
        last_record = Instant::now();
        let topic = names.iter().position(|name| name == message.topic());
        let Some(range) =
            topic.and_then(|topic| plan.index.get(&(topic, message.partition()))).map(|&i| &mut ranges[i])
        else {
            continue;
        };
        if range.done {
            continue;
        }
        let offset = message.offset();
        let timestamp = message.timestamp().to_millis();
        let past_end = !follow && offset >= range.end;
        let past_time = matches!((to_time, timestamp), (Some(to), Some(at)) if at >= to);
        if past_end || past_time {
            range.done = true;
            open -= 1;
            continue;
        }
        if !follow && offset + 1 >= range.end {
            range.done = true;
            open -= 1;
        }
        // offsets_for_times already started at the first record at or after
        // the start time; this only guards a broker that answers coarsely.
        if matches!((from_time, timestamp), (Some(from), Some(at)) if at < from) {
            continue;
        }
        visit(options.topics[range.topic], &message)?;
        read += 1;
        if read % PROGRESS_EVERY == 0 {
            progress.set(read);
        }
    }
    progress.finish(read);
    Ok(read)
}

/// A consumer that is only ever assigned partitions: it never subscribes,
/// so it joins no group, and it commits nothing. librdkafka wants a group
/// id all the same; this one is never used for anything.
fn reader(brokers: &str) -> Result<BaseConsumer, ReplayError> {
    ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("group.id", "seckill-replay-unused")
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("enable.partition.eof", "false")
        .set("allow.auto.create.topics", "false")
        // Big fetches: a replay is throughput-bound, and the broker answers
        // a fetch as soon as this much is there (or after the wait).
        .set("fetch.min.bytes", "262144")
        .set("fetch.wait.max.ms", "50")
        .set("max.partition.fetch.bytes", "8388608")
        // Bounds the prefetch queue (librdkafka's whole buffer) to 64 MiB.
        .set("queued.max.messages.kbytes", "65536")
        // When that queue is full, fetch again as soon as it drains below the
        // bound: librdkafka's default waits a whole second, which a replay
        // that decodes faster than a second's worth of fetches spent idle.
        .set("fetch.queue.backoff.ms", "10")
        .create()
        .map_err(ReplayError::kafka("creating the Kafka client"))
}
