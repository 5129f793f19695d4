//! Replaying topics for analysts: every record of the chosen topics between
//! two bounds, filtered, streamed to a writer as JSON Lines or CSV.
//!
//! The reader assigns partitions and seeks (no consumer group joins, nothing
//! is committed), so a replay never disturbs the services. Bounds are
//! resolved per partition when the replay starts: a start time becomes an
//! offset through `offsets_for_times`, and the default end is the high
//! watermark at that moment, so a replay of a busy topic still ends. Memory
//! is bounded by librdkafka's prefetch queue and one batch of records being
//! decoded on several threads (`decode`); nothing else is collected.
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
mod decode;
mod output;
mod progress;
mod scan;

use std::io::Write;
use std::num::NonZeroUsize;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use seckill_core::config::KafkaConfig;
use seckill_core::{Envelope, Event, VoucherId};

pub use bounds::parse_window;
pub(crate) use bounds::partitions;
pub use output::{dead_letter_header, describe_dead_letter, Format, CSV_HEADER};
pub use scan::{scan, ReadOptions};

use output::Output;

/// How long one metadata, watermark or offset request may take.
pub(crate) const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
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
    event.order().map(|order| order.user_id.as_str())
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
    /// Threads that decode records; None: the machine's cores, at most
    /// four. One leaves the other cores to whatever shares the machine.
    pub decode_threads: Option<NonZeroUsize>,
}

impl ReplayOptions {
    /// Which records the replay reads.
    pub fn read_options(&self) -> ReadOptions {
        ReadOptions { topics: self.topics.clone(), start: self.start, end: self.end, progress: self.progress }
    }
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
            decode_threads: None,
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
    let mut output = Output::new(out, options.format, &options.filter)?;
    let mut summary = Summary::default();
    // Following, each record is written as it comes; otherwise records
    // are decoded a batch at a time on several threads.
    let threads = options.decode_threads.map_or_else(decode::most_threads, NonZeroUsize::get);
    let (batch, threads) = if options.end == End::Follow { (1, 1) } else { (decode::BATCH, threads) };
    let mut records = Vec::with_capacity(batch);
    let mut write = |records: &mut Vec<decode::Read>| -> Result<(), ReplayError> {
        let decoded = decode::decode_all(records, threads);
        for (read, decoded) in records.drain(..).zip(decoded) {
            output.record(&read.message, read.topic == LogTopic::DeadLetters, decoded, &mut summary)?;
        }
        Ok(())
    };
    scan(kafka, &options.read_options(), stop, |topic, message| {
        records.push(decode::Read { topic, message: message.detach() });
        if records.len() >= batch {
            write(&mut records)?;
        }
        Ok(())
    })?;
    write(&mut records)?;
    output.finish()?;
    summary.elapsed = started.elapsed();
    Ok(summary)
}
