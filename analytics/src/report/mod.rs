//! The sale report: one self-contained HTML file (inline CSS and SVG, no
//! script, nothing fetched) with, per voucher, its summary tables and
//! charts drawn with `plotters`:
//! - orders accepted per time bucket, stacked by final outcome;
//! - units left at the gate and in the persistent stock, the sell-out and
//!   added stock marked;
//! - accept → decision latency per bucket (p50, p99) and its distribution;
//! - cancellations and expiries per bucket, units returned and re-sold;
//! - the `stats` figures, units per user and the top users by orders;
//! - for a sale that takes money: paid, refunded and net per currency,
//!   payments by what became of them (refunds by reason), and payments and
//!   refunds per bucket;
//! - for a queue-mode sale: its waiting room (places taken before and after
//!   the start, served, skipped, entries spent, the wait for an entry) and
//!   its places over time;
//! - for a draw-mode sale: its draw (entries, winners, promotions, wins
//!   spent, how long the ranking took) and `seckill draw verify`'s checks
//!   run on the same log.
//!
//! Every bar (and every bucket of a line) carries its numbers as `data-*`
//! attributes and a tooltip, see [`overlay`](self).

mod charts;
mod draw;
mod duration;
mod html;
mod overlay;
mod page;
mod payments;
mod queue;

use chrono::{DateTime, Utc};

use crate::sale::VoucherSale;
use crate::AnalyticsError;

/// Most vouchers one report draws: each is a long section of charts.
pub const MAX_VOUCHERS: usize = 20;

/// Where the report's data came from, for its header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct About {
    /// When the log was read.
    pub generated_at: DateTime<Utc>,
    /// Records read.
    pub records: u64,
    pub sales_topic: String,
    pub orders_topic: String,
}

/// The report of `sales` as one HTML document.
pub fn render(sales: &[VoucherSale], about: &About) -> Result<String, AnalyticsError> {
    page::page(about, sales)
}

#[cfg(test)]
mod tests;
