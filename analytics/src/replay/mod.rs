//! Replaying topics for analysts: every record of the chosen topics between
//! two bounds, filtered, streamed to a writer as JSON Lines or CSV.
//!
//! The reader assigns partitions and seeks (no consumer group joins, nothing
//! is committed), so a replay never disturbs the services. Bounds are
//! resolved per partition when the replay starts: a start time becomes an
//! offset through `offsets_for_times`, and the default end is the high
//! watermark at that moment, so a replay of a busy topic still ends. Memory
//! is bounded by librdkafka's prefetch queue: records are written as they
//! arrive and never collected.
//!
//! ```no_run
//! # fn main() -> Result<(), seckill_analytics::replay::ReplayError> {
//! use seckill_analytics::replay::{self, ReplayOptions};
//! let kafka = seckill_core::config::KafkaConfig::default();
//! let summary = replay::replay(&kafka, &ReplayOptions::default(), std::io::stdout().lock(), &Default::default())?;
//! eprintln!("{summary}");
//! # Ok(()) }
//! ```

mod bounds;
mod output;
mod progress;

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::{ClientConfig, Offset, TopicPartitionList};
use seckill_core::config::KafkaConfig;
use seckill_core::{Envelope, Event, VoucherId};

pub use bounds::parse_window;
pub(crate) use bounds::partitions;
pub use output::{dead_letter_header, describe_dead_letter, Format, CSV_HEADER};

use output::Output;
use progress::Progress;

/// How long one metadata, watermark or offset request may take.
pub(crate) const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest pause without a record before a bounded replay gives up on
/// partitions that should still have some.
const STALL_TIMEOUT: Duration = Duration::from_secs(30);
/// Records between two progress updates (the bar redraws at most 20 times a
/// second anyway).
const PROGRESS_EVERY: u64 = 2048;
/// Why a replay or a topic overview failed.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error("{what}: {source}")]
    Kafka {
        what: String,
        #[source]
        source: rdkafka::error::KafkaError,
    },
    #[error("topic {0} does not exist")]
    UnknownTopic(String),
    #[error("writing the output failed: {0}")]
    Write(#[from] std::io::Error),
    #[error("reading stalled: {0} partitions not read to their end")]
    Stalled(usize),
}

impl ReplayError {
    pub(crate) fn kafka(what: impl Into<String>) -> impl FnOnce(rdkafka::error::KafkaError) -> Self {
        let what = what.into();
        move |source| Self::Kafka { what, source }
    }
}

/// One of the platform's topics, named without its prefix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogTopic {
    Sales,
    Orders,
    DeadLetters,
}

impl LogTopic {
    /// The topic's full name under `kafka`'s prefix.
    pub fn full_name(self, kafka: &KafkaConfig) -> String {
        let topics = kafka.topics();
        match self {
            Self::Sales => topics.sales,
            Self::Orders => topics.orders,
            Self::DeadLetters => topics.dead_letters,
        }
    }
}

impl std::str::FromStr for LogTopic {
    type Err = String;

    fn from_str(name: &str) -> Result<Self, String> {
        match name {
            "sales" => Ok(Self::Sales),
            "orders" => Ok(Self::Orders),
            "dead-letters" => Ok(Self::DeadLetters),
            other => Err(format!("unknown topic {other:?}: expected sales, orders or dead-letters")),
        }
    }
}

/// Where a replay starts in every partition.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Start {
    /// The oldest record still on the topic.
    #[default]
    Beginning,
    /// This offset in every partition (the oldest record if it is gone).
    Offset(i64),
    /// The first record produced at or after this time.
    Time(DateTime<Utc>),
}

impl Start {
    /// The last `window` before now (`--last 15m`).
    pub fn last(window: Duration) -> Self {
        let window = chrono::Duration::from_std(window).unwrap_or(chrono::Duration::MAX);
        Self::Time(Utc::now().checked_sub_signed(window).unwrap_or(DateTime::<Utc>::MIN_UTC))
    }
}

/// Where a replay ends.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum End {
    /// The high watermarks when the replay starts.
    #[default]
    Now,
    /// Records produced before this time (and before the replay started).
    Time(DateTime<Utc>),
    /// Never: keep waiting for new records until the stop flag is set.
    Follow,
}

/// Which events a replay writes; every condition given must hold.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Filter {
    /// Event types (`OrderCreated`); empty: all.
    pub types: Vec<String>,
    /// Only this voucher's events.
    pub voucher: Option<VoucherId>,
    /// Only events of this user's orders (requests and voucher events name
    /// no user, so they never match).
    pub user: Option<String>,
}

impl Filter {
    /// Whether the filter lets everything through (no decoding needed to
    /// decide).
    pub fn is_empty(&self) -> bool {
        self.types.is_empty() && self.voucher.is_none() && self.user.is_none()
    }

    /// Whether `envelope` passes every condition.
    pub fn matches(&self, envelope: &Envelope) -> bool {
        let event = &envelope.event;
        (self.types.is_empty() || self.types.iter().any(|kind| kind == event.kind()))
            && self.voucher.is_none_or(|voucher| event.voucher_id() == voucher)
            && self.user.as_deref().is_none_or(|user| user_of(event) == Some(user))
    }
}

/// Checks a `--type` value against the known event types.
pub fn parse_event_type(name: &str) -> Result<String, String> {
    Event::KINDS
        .iter()
        .find(|known| known.eq_ignore_ascii_case(name))
        .map(|known| (*known).to_owned())
        .ok_or_else(|| format!("unknown event type {name:?}: expected one of {}", Event::KINDS.join(", ")))
}

/// The user whose order the event is about, if it names one.
pub(crate) fn user_of(event: &Event) -> Option<&str> {
    output::order_of(event).map(|order| order.user_id.as_str())
}

/// What to replay and how to write it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplayOptions {
    /// Topics to read, in this order of preference (records of different
    /// topics and partitions interleave as they arrive).
    pub topics: Vec<LogTopic>,
    pub start: Start,
    pub end: End,
    pub filter: Filter,
    pub format: Format,
    /// Draw a progress bar on stderr (only sensible on a terminal).
    pub progress: bool,
}

impl Default for ReplayOptions {
    fn default() -> Self {
        Self {
            topics: vec![LogTopic::Sales, LogTopic::Orders],
            start: Start::Beginning,
            end: End::Now,
            filter: Filter::default(),
            format: Format::JsonLines,
            progress: false,
        }
    }
}

/// What a replay did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Summary {
    /// Events written to the output.
    pub written: u64,
    /// Events read and left out by the filter.
    pub skipped: u64,
    /// Records that are not events (counted, never written).
    pub undecodable: u64,
    /// How long the replay took, from connecting to the last write.
    pub elapsed: Duration,
}

impl Summary {
    /// Records read per second.
    pub fn rate(&self) -> f64 {
        let read = (self.written + self.skipped + self.undecodable) as f64;
        read / self.elapsed.as_secs_f64().max(1e-6)
    }
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} events written, {} skipped by filters, {} undecodable, {:.0} events/s",
            self.written,
            self.skipped,
            self.undecodable,
            self.rate()
        )
    }
}

/// Replays `options.topics` of `kafka` into `out` until the end bound (or,
/// with [`End::Follow`], until `stop` is set). Blocking: call it from a
/// blocking thread in async code.
pub fn replay(
    kafka: &KafkaConfig,
    options: &ReplayOptions,
    out: impl Write,
    stop: &AtomicBool,
) -> Result<Summary, ReplayError> {
    let started = Instant::now();
    let consumer = reader(&kafka.brokers)?;
    let names: Vec<String> = options.topics.iter().map(|topic| topic.full_name(kafka)).collect();
    let dead_letters = kafka.topics().dead_letters;
    let plan = bounds::resolve(&consumer, &names, options.start, options.end)?;

    let mut assignment = TopicPartitionList::new();
    for range in plan.ranges.iter().filter(|range| !range.is_empty()) {
        assignment
            .add_partition_offset(&names[range.topic], range.partition, Offset::Offset(range.start))
            .map_err(ReplayError::kafka("building the assignment"))?;
    }
    let follow = options.end == End::Follow;
    let mut open = plan.ranges.iter().filter(|range| follow || !range.is_empty()).count();
    let mut output = Output::new(out, options.format, &options.filter)?;
    let mut summary = Summary::default();
    if open == 0 {
        output.finish()?;
        summary.elapsed = started.elapsed();
        return Ok(summary);
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
        let is_dead_letter = names[range.topic] == dead_letters;
        output.record(&message, is_dead_letter, &mut summary)?;
        read += 1;
        if read % PROGRESS_EVERY == 0 {
            progress.set(read);
        }
    }
    output.finish()?;
    progress.finish(read);
    summary.elapsed = started.elapsed();
    Ok(summary)
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
        .create()
        .map_err(ReplayError::kafka("creating the Kafka client"))
}
