//! Reading the sales and orders topics for the chosen vouchers, with the
//! replay's reader (assigned partitions, no consumer group).
//!
//! Vouchers are chosen by id, or as every voucher with a record in a time
//! window (a first, bounded pass over the window finds them), or as every
//! voucher in the log. The whole history of each chosen voucher is then
//! read from the beginning of the topics to their ends as they are now, so
//! its books are complete even when the window cuts the sale.

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rdkafka::message::{BorrowedMessage, Message};
use seckill_core::config::KafkaConfig;
use seckill_core::ids::VoucherId;
use seckill_core::Envelope;

use super::fold::{Position, VoucherLog};
use crate::replay::{self, End, LogTopic, ReadOptions, Start};
use crate::stats::{Stats, VoucherStats};
use crate::AnalyticsError;

/// Most orders held in memory for one read (about 300 bytes each).
pub const MAX_ORDERS: usize = 5_000_000;

/// Which vouchers to read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Selection {
    /// These vouchers; empty: chosen by the window.
    pub vouchers: Vec<VoucherId>,
    /// With no vouchers named: every voucher with a record from here...
    pub start: Start,
    /// ...to here. `Start::Beginning` and `End::Now`: every voucher in the log.
    pub end: End,
    /// Most vouchers the selection may hold; more is an error that asks
    /// for a narrower one.
    pub max_vouchers: usize,
    /// Draw progress bars on stderr (only sensible on a terminal).
    pub progress: bool,
}

impl Default for Selection {
    fn default() -> Self {
        Self { vouchers: Vec::new(), start: Start::Beginning, end: End::Now, max_vouchers: usize::MAX, progress: false }
    }
}

impl Selection {
    /// The given vouchers.
    pub fn vouchers(vouchers: Vec<VoucherId>) -> Self {
        Self { vouchers, ..Self::default() }
    }

    fn is_windowed(&self) -> bool {
        self.start != Start::Beginning || self.end != End::Now
    }
}

/// One voucher's history and its `stats` figures.
#[derive(Clone, Debug)]
pub struct VoucherSale {
    pub log: VoucherLog,
    pub stats: VoucherStats,
}

/// What a read found.
#[derive(Clone, Debug)]
pub struct SaleRead {
    /// The chosen vouchers, by id (UUIDv7, so by creation time).
    pub sales: Vec<VoucherSale>,
    /// Records read in the last pass (all of both topics).
    pub records: u64,
    /// Records that are not valid events (skipped).
    pub undecodable: u64,
    /// From connecting to the end of the last pass.
    pub elapsed: Duration,
}

/// Reads the chosen vouchers' whole histories. Blocking work runs on a
/// blocking thread.
pub async fn read_sales(kafka: &KafkaConfig, selection: &Selection) -> Result<SaleRead, AnalyticsError> {
    let kafka = kafka.clone();
    let selection = selection.clone();
    tokio::task::spawn_blocking(move || read_blocking(&kafka, &selection))
        .await
        .map_err(|error| AnalyticsError::Task(format!("reading the log: {error}")))?
}

fn read_blocking(kafka: &KafkaConfig, selection: &Selection) -> Result<SaleRead, AnalyticsError> {
    let started = Instant::now();
    let wanted: Option<HashSet<VoucherId>> = if !selection.vouchers.is_empty() {
        Some(selection.vouchers.iter().copied().collect())
    } else if selection.is_windowed() {
        Some(vouchers_in_window(kafka, selection)?)
    } else {
        None
    };
    if let Some(wanted) = &wanted {
        if wanted.len() > selection.max_vouchers {
            return Err(AnalyticsError::TooManyVouchers { found: wanted.len(), max: selection.max_vouchers });
        }
    }

    let mut fold = Fold { wanted: wanted.as_ref(), max_vouchers: selection.max_vouchers, ..Fold::default() };
    let stop = AtomicBool::new(false);
    let options = ReadOptions {
        topics: vec![LogTopic::Sales, LogTopic::Orders],
        start: Start::Beginning,
        end: End::Now,
        progress: selection.progress,
    };
    let records = replay::scan(kafka, &options, &stop, |_, message| {
        if let Err(error) = fold.record(message) {
            fold.failed = Some(error);
            stop.store(true, Ordering::Relaxed);
        }
        Ok(())
    })?;
    if let Some(error) = fold.failed.take() {
        return Err(error);
    }
    for voucher in &selection.vouchers {
        if !fold.vouchers.contains_key(voucher) {
            return Err(AnalyticsError::UnknownVoucher(*voucher));
        }
    }
    if fold.undecodable > 0 {
        tracing::warn!(records, undecodable = fold.undecodable, "Skipped records that are not valid events.");
    }
    let stats: BTreeMap<VoucherId, VoucherStats> = fold.stats.finish().into_iter().map(|s| (s.voucher_id, s)).collect();
    let sales = fold
        .vouchers
        .into_iter()
        .filter_map(|(id, log)| stats.get(&id).map(|stats| VoucherSale { log, stats: stats.clone() }))
        .collect();
    Ok(SaleRead { sales, records, undecodable: fold.undecodable, elapsed: started.elapsed() })
}

/// The vouchers with a decodable record in the selection's window.
fn vouchers_in_window(kafka: &KafkaConfig, selection: &Selection) -> Result<HashSet<VoucherId>, AnalyticsError> {
    let options = ReadOptions {
        topics: vec![LogTopic::Sales, LogTopic::Orders],
        start: selection.start,
        end: selection.end,
        progress: selection.progress,
    };
    let mut found = HashSet::new();
    let stop = AtomicBool::new(false);
    replay::scan(kafka, &options, &stop, |_, message| {
        let voucher = key_voucher(message)
            .or_else(|| Envelope::decode(message.payload().unwrap_or_default()).ok().map(|e| e.event.voucher_id()));
        if let Some(voucher) = voucher {
            found.insert(voucher);
            // Past the limit the answer is an error anyway.
            if found.len() > selection.max_vouchers {
                stop.store(true, Ordering::Relaxed);
            }
        }
        Ok(())
    })?;
    Ok(found)
}

/// The voucher a record is keyed by, when its key is a voucher id (every
/// topic of the platform is keyed so).
fn key_voucher(message: &BorrowedMessage<'_>) -> Option<VoucherId> {
    std::str::from_utf8(message.key()?).ok()?.parse().ok()
}

/// The state of the full pass.
#[derive(Debug, Default)]
struct Fold<'w> {
    wanted: Option<&'w HashSet<VoucherId>>,
    max_vouchers: usize,
    vouchers: BTreeMap<VoucherId, VoucherLog>,
    stats: Stats,
    orders: usize,
    undecodable: u64,
    failed: Option<AnalyticsError>,
}

impl Fold<'_> {
    fn record(&mut self, message: &BorrowedMessage<'_>) -> Result<(), AnalyticsError> {
        // The key says whose record it is without decoding it.
        if let (Some(wanted), Some(voucher)) = (self.wanted, key_voucher(message)) {
            if !wanted.contains(&voucher) {
                return Ok(());
            }
        }
        let Ok(envelope) = Envelope::decode(message.payload().unwrap_or_default()) else {
            self.undecodable += 1;
            return Ok(());
        };
        let voucher = envelope.event.voucher_id();
        if self.wanted.is_some_and(|wanted| !wanted.contains(&voucher)) {
            return Ok(());
        }
        if !self.vouchers.contains_key(&voucher) && self.vouchers.len() >= self.max_vouchers {
            return Err(AnalyticsError::TooManyVouchers { found: self.vouchers.len() + 1, max: self.max_vouchers });
        }
        let log = self.vouchers.entry(voucher).or_insert_with(|| VoucherLog::new(voucher));
        let before = log.orders.len();
        log.apply(&envelope, Position { partition: message.partition(), offset: message.offset() });
        self.orders += log.orders.len() - before;
        if self.orders > MAX_ORDERS {
            return Err(AnalyticsError::TooManyOrders(MAX_ORDERS));
        }
        self.stats.apply(&envelope);
        Ok(())
    }
}
