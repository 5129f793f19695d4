//! Where a draw's log comes from: the topics, read as `seckill audit`
//! reads them, or a JSON Lines copy as `seckill replay` writes it (one
//! record per line, byte for byte as on the topic), so a third party can
//! verify a draw from a file they were handed, or doctored.
//!
//! A file has no offsets: its line numbers stand for them. A replay writes
//! each partition's records in offset order, and one voucher's records
//! share a partition, so the lines keep the order the checks rely on.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::time::Instant;

use seckill_core::config::KafkaConfig;
use seckill_core::ids::VoucherId;
use seckill_core::Envelope;
use serde::Serialize;

use crate::sale::{read_sales, Position, Selection, VoucherLog};
use crate::AnalyticsError;

/// What was read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SourceKind {
    Kafka,
    File,
}

/// Where the log was read from, and what the read found.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Source {
    pub kind: SourceKind,
    /// The topics read, or the file's path (`-`: standard input).
    pub name: String,
    /// Records (lines) read, of every voucher.
    pub records: u64,
    /// Records that are not valid events (skipped).
    pub undecodable: u64,
    /// How long the read took, in milliseconds.
    pub read_ms: f64,
}

/// One voucher's log, and where it came from.
#[derive(Clone, Debug)]
pub struct DrawRead {
    pub log: VoucherLog,
    pub source: Source,
}

/// Reads `voucher`'s whole history from the sales and orders topics (no
/// consumer group), with a progress bar on stderr when `progress`.
pub async fn read_kafka(kafka: &KafkaConfig, voucher: VoucherId, progress: bool) -> Result<DrawRead, AnalyticsError> {
    let started = Instant::now();
    let selection = Selection { progress, ..Selection::vouchers(vec![voucher]) };
    let read = read_sales(kafka, &selection).await?;
    let log = read.sales.into_iter().next().map(|sale| sale.log).ok_or(AnalyticsError::UnknownVoucher(voucher))?;
    let topics = kafka.topics();
    let source = Source {
        kind: SourceKind::Kafka,
        name: format!("{} and {}", topics.sales, topics.orders),
        records: read.records,
        undecodable: read.undecodable,
        read_ms: started.elapsed().as_secs_f64() * 1_000.0,
    };
    Ok(DrawRead { log, source })
}

/// Reads `voucher`'s records from a JSON Lines file (`-`: standard input).
pub fn read_file(path: &Path, voucher: VoucherId) -> Result<DrawRead, AnalyticsError> {
    let name = path.display().to_string();
    if name == "-" {
        return read_lines(std::io::stdin().lock(), &name, voucher);
    }
    let file = File::open(path).map_err(|error| AnalyticsError::File { path: name.clone(), error })?;
    read_lines(BufReader::new(file), &name, voucher)
}

/// Reads `voucher`'s records from JSON Lines, `name` saying where from.
/// Blank lines are passed by; a line that is not a valid event is counted
/// as undecodable, as the topics' readers count such records.
pub fn read_lines(reader: impl BufRead, name: &str, voucher: VoucherId) -> Result<DrawRead, AnalyticsError> {
    let started = Instant::now();
    let mut log = VoucherLog::new(voucher);
    let (mut records, mut undecodable, mut found) = (0u64, 0u64, false);
    for (offset, line) in (0i64..).zip(reader.split(b'\n')) {
        let line = line.map_err(|error| AnalyticsError::File { path: name.to_owned(), error })?;
        let line = line.strip_suffix(b"\r").unwrap_or(&line);
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        records += 1;
        let Ok(envelope) = Envelope::decode(line) else {
            undecodable += 1;
            continue;
        };
        if envelope.event.voucher_id() == voucher {
            found = true;
            log.apply(&envelope, Position { partition: 0, offset });
        }
    }
    if !found {
        return Err(AnalyticsError::UnknownVoucher(voucher));
    }
    if undecodable > 0 {
        tracing::warn!(records, undecodable, file = name, "Skipped lines that are not valid events.");
    }
    let source = Source {
        kind: SourceKind::File,
        name: name.to_owned(),
        records,
        undecodable,
        read_ms: started.elapsed().as_secs_f64() * 1_000.0,
    };
    Ok(DrawRead { log, source })
}
