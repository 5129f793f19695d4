//! Exporting the log to Parquet for SQL (DuckDB, Spark, Trino, warehouses):
//! one file per event kind, `<Kind>.parquet`, with typed columns taken from
//! the kind's JSON Schema ([`crate::schema`]): timestamps as timestamps
//! (microseconds, UTC), counts and amounts as 64-bit integers, ids, enums
//! and codes as strings, `DrawRanked.users` as a list of strings, and the
//! voucher's `queue` and `draw` settings as JSON text.
//!
//! Every row also carries where the record was read: `log_topic`,
//! `log_partition`, `log_offset` and `log_time` (the record's Kafka
//! timestamp); read from a JSON Lines file, `log_topic` is the file,
//! `log_offset` its line number (0-based) and the others are null.
//!
//! Records are decoded as the services decode them. One of a newer schema
//! version, or one that is no event, is named (the first
//! [`NAMED_SKIPS`]), counted and skipped; the rest is written. Every kind's
//! file is written, empty when the log has none, so queries over several
//! kinds run on any sale.

mod table;

use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use rdkafka::message::Message;
use seckill_core::config::KafkaConfig;
use seckill_core::event::EventError;
use seckill_core::{Envelope, VoucherId};

use crate::replay::{scan, End, LogTopic, ReadOptions, ReplayError, Start};
use table::Table;

/// Skipped records named one by one; the rest are only counted.
pub const NAMED_SKIPS: usize = 20;

/// Why an export failed.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error(transparent)]
    Read(#[from] ReplayError),
    #[error("reading {0}: {1}")]
    Input(String, #[source] std::io::Error),
    #[error("writing {0}: {1}")]
    Write(String, String),
}

/// Which records to export.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExportOptions {
    /// Records produced at or after this time (from the topics: the Kafka
    /// timestamp; from a file: `emitted_at`).
    pub since: Option<DateTime<Utc>>,
    /// Records produced before this time.
    pub until: Option<DateTime<Utc>>,
    /// Only this voucher's events.
    pub voucher: Option<VoucherId>,
    /// Draw a progress bar on stderr (topics only).
    pub progress: bool,
}

/// A record that was not exported, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Skipped {
    /// Where it was: `sales/0@17` or `sale.jsonl:3`.
    pub at: String,
    pub why: String,
}

/// What an export did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ExportSummary {
    /// Rows written per kind (every kind, 0 included).
    pub rows: BTreeMap<String, u64>,
    /// Records left out by `--voucher`, `--since` or `--until`.
    pub filtered: u64,
    /// Records of a schema version newer than this build's.
    pub newer: u64,
    /// Records that are no event this build reads.
    pub malformed: u64,
    /// The first [`NAMED_SKIPS`] of those.
    pub named: Vec<Skipped>,
    /// The files written.
    pub files: Vec<PathBuf>,
    pub elapsed: Duration,
}

impl ExportSummary {
    /// Rows written.
    pub fn written(&self) -> u64 {
        self.rows.values().sum()
    }

    /// Records skipped as newer or malformed.
    pub fn bad(&self) -> u64 {
        self.newer + self.malformed
    }

    /// Records read per second.
    pub fn rate(&self) -> f64 {
        let read = (self.written() + self.filtered + self.bad()) as f64;
        read / self.elapsed.as_secs_f64().max(1e-6)
    }
}

impl std::fmt::Display for ExportSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for skipped in &self.named {
            writeln!(f, "skipped {}: {}", skipped.at, skipped.why)?;
        }
        if self.bad() > self.named.len() as u64 {
            writeln!(f, "… and {} more skipped", self.bad() - self.named.len() as u64)?;
        }
        write!(
            f,
            "{} events written to {} files, {} left out by filters, {} of a newer schema version skipped, {} malformed skipped, {:.0} events/s",
            self.written(),
            self.files.len(),
            self.filtered,
            self.newer,
            self.malformed,
            self.rate()
        )
    }
}

/// Where a record was read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Origin {
    pub topic: String,
    pub partition: Option<i32>,
    pub offset: i64,
    /// The Kafka timestamp, in milliseconds.
    pub time_ms: Option<i64>,
}

impl Origin {
    fn describe(&self) -> String {
        match self.partition {
            Some(partition) => format!("{}/{}@{}", self.topic, partition, self.offset),
            None => format!("{}:{}", self.topic, self.offset + 1),
        }
    }
}

/// Collects records into one table per kind and writes them.
#[derive(Debug)]
pub struct Exporter {
    dir: PathBuf,
    options: ExportOptions,
    /// Judge `since`/`until` by `emitted_at` (the scan judges Kafka times).
    filter_times: bool,
    tables: BTreeMap<String, Table>,
    summary: ExportSummary,
}

impl Exporter {
    /// Opens one Parquet file per kind in `dir` (created if missing).
    pub fn create(dir: &Path, options: &ExportOptions, filter_times: bool) -> Result<Self, ExportError> {
        std::fs::create_dir_all(dir).map_err(|e| ExportError::Write(dir.display().to_string(), e.to_string()))?;
        let mut tables = BTreeMap::new();
        for (kind, schema) in crate::schema::kind_schemas() {
            let path = dir.join(format!("{kind}.parquet"));
            let table = Table::create(&path, &schema)
                .map_err(|e| ExportError::Write(path.display().to_string(), e.to_string()))?;
            tables.insert(kind, table);
        }
        Ok(Self {
            dir: dir.to_owned(),
            options: options.clone(),
            filter_times,
            tables,
            summary: ExportSummary::default(),
        })
    }

    /// Adds one record (its bytes as on the topic).
    pub fn record(&mut self, bytes: &[u8], origin: &Origin) -> Result<(), ExportError> {
        let envelope = match Envelope::decode(bytes) {
            Ok(envelope) => envelope,
            Err(EventError::UnsupportedSchema(version)) => {
                self.summary.newer += 1;
                return self.name(origin, format!("schema version {version}, newer than this build's"));
            }
            Err(error) => {
                self.summary.malformed += 1;
                return self.name(origin, error.to_string());
            }
        };
        let options = &self.options;
        let outside_times = self.filter_times
            && (options.since.is_some_and(|since| envelope.emitted_at < since)
                || options.until.is_some_and(|until| envelope.emitted_at >= until));
        if outside_times || options.voucher.is_some_and(|voucher| envelope.event.voucher_id() != voucher) {
            self.summary.filtered += 1;
            return Ok(());
        }
        let kind = envelope.kind();
        let Some(table) = self.tables.get_mut(kind) else {
            self.summary.malformed += 1;
            return self.name(origin, format!("no table for {kind}"));
        };
        let record = serde_json::to_value(&envelope).map_err(|e| ExportError::Write(kind.to_owned(), e.to_string()))?;
        match table.push(&record, origin) {
            Ok(()) => {}
            Err(table::RowError::Value(why)) => {
                self.summary.malformed += 1;
                return self.name(origin, why);
            }
            Err(table::RowError::Write(why)) => return Err(ExportError::Write(format!("{kind}.parquet"), why)),
        }
        Ok(())
    }

    /// Names a skipped record (the first [`NAMED_SKIPS`]).
    fn name(&mut self, origin: &Origin, why: String) -> Result<(), ExportError> {
        if self.summary.named.len() < NAMED_SKIPS {
            self.summary.named.push(Skipped { at: origin.describe(), why });
        }
        Ok(())
    }

    /// Closes every file; what was written.
    pub fn finish(mut self) -> Result<ExportSummary, ExportError> {
        for (kind, table) in std::mem::take(&mut self.tables) {
            let path = self.dir.join(format!("{kind}.parquet"));
            let rows = table.finish().map_err(|e| ExportError::Write(path.display().to_string(), e))?;
            self.summary.rows.insert(kind, rows);
            self.summary.files.push(path);
        }
        Ok(self.summary)
    }
}

/// Exports the sales and orders topics of `kafka` (between `since` and
/// `until`, or the high watermarks of when it starts) into `dir`. Blocking.
pub fn export_topics(
    kafka: &KafkaConfig,
    options: &ExportOptions,
    dir: &Path,
    stop: &AtomicBool,
) -> Result<ExportSummary, ExportError> {
    let started = Instant::now();
    let mut exporter = Exporter::create(dir, options, false)?;
    let read = ReadOptions {
        topics: vec![LogTopic::Sales, LogTopic::Orders],
        start: options.since.map_or(Start::Beginning, Start::Time),
        end: options.until.map_or(End::Now, End::Time),
        progress: options.progress,
    };
    let mut failed = None;
    scan(kafka, &read, stop, |_, message| {
        let origin = Origin {
            topic: message.topic().to_owned(),
            partition: Some(message.partition()),
            offset: message.offset(),
            time_ms: message.timestamp().to_millis(),
        };
        if let Err(error) = exporter.record(message.payload().unwrap_or_default(), &origin) {
            failed = Some(error);
            return Err(ReplayError::Write(std::io::Error::other("export failed")));
        }
        Ok(())
    })
    .map_err(|error| failed.take().unwrap_or(ExportError::Read(error)))?;
    let mut summary = exporter.finish()?;
    summary.elapsed = started.elapsed();
    Ok(summary)
}

/// Exports a JSON Lines copy of the log (as `seckill replay` writes it)
/// read from `input`, called `name` in the rows and messages.
pub fn export_lines(
    input: impl BufRead,
    name: &str,
    options: &ExportOptions,
    dir: &Path,
) -> Result<ExportSummary, ExportError> {
    let started = Instant::now();
    let mut exporter = Exporter::create(dir, options, true)?;
    for (offset, line) in (0i64..).zip(input.split(b'\n')) {
        let line = line.map_err(|e| ExportError::Input(name.to_owned(), e))?;
        let line = line.strip_suffix(b"\r").unwrap_or(&line);
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let origin = Origin { topic: name.to_owned(), partition: None, offset, time_ms: None };
        exporter.record(line, &origin)?;
    }
    let mut summary = exporter.finish()?;
    summary.elapsed = started.elapsed();
    Ok(summary)
}

#[cfg(test)]
mod sql;
#[cfg(test)]
mod tests;
