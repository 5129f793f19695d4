//! The flags `report` and `audit` share to choose vouchers: by id, or
//! every voucher with records in a time window (as `replay` bounds it), or
//! every voucher in the log.

use std::io::IsTerminal;

use chrono::{DateTime, Utc};
use clap::{ArgGroup, Args};
use seckill_analytics::replay::{self, End, Start};
use seckill_analytics::sale::Selection;
use seckill_core::VoucherId;

/// Which vouchers.
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("window").args(["from_time", "to_time", "last"]).multiple(true)))]
pub(crate) struct SaleSelection {
    /// This voucher (repeatable).
    #[arg(long = "voucher", value_name = "ID", conflicts_with = "window")]
    vouchers: Vec<VoucherId>,
    /// Every voucher with a record produced at or after this time (RFC 3339).
    #[arg(long, value_name = "RFC3339", value_parser = parse_time, conflicts_with = "last")]
    from_time: Option<DateTime<Utc>>,
    /// ...and before this time (RFC 3339).
    #[arg(long, value_name = "RFC3339", value_parser = parse_time)]
    to_time: Option<DateTime<Utc>>,
    /// Every voucher with a record in this last window: 30s, 15m, 2h, 1d.
    #[arg(long, value_name = "WINDOW", value_parser = replay::parse_window)]
    last: Option<std::time::Duration>,
}

impl SaleSelection {
    /// The selection, at most `max_vouchers`, with a progress bar when
    /// stderr is a terminal.
    pub(crate) fn selection(&self, max_vouchers: usize) -> Selection {
        let start = match (self.from_time, self.last) {
            (Some(time), _) => Start::Time(time),
            (_, Some(window)) => Start::last(window),
            _ => Start::Beginning,
        };
        let end = self.to_time.map_or(End::Now, End::Time);
        Selection {
            vouchers: self.vouchers.clone(),
            start,
            end,
            max_vouchers,
            progress: std::io::stderr().is_terminal(),
        }
    }
}

fn parse_time(text: &str) -> Result<DateTime<Utc>, String> {
    DateTime::parse_from_rfc3339(text)
        .map(|time| time.with_timezone(&Utc))
        .map_err(|error| format!("{text:?} is not an RFC 3339 time ({error}), e.g. 2026-11-21T10:00:00Z"))
}
