//! `seckill stats`: how each sale went, computed from the log alone.
//!
//! Reads the sales and orders topics as they are now (no consumer group) and
//! prints one row per voucher: orders accepted, created, failed, cancelled
//! and paid, units sold against the stock, when the last unit went and
//! how long after the first order and the sale's start, and the accept →
//! decision latency; then, for queue-mode sales, their waiting rooms (places
//! taken before and after the start, served, skipped, entries spent), and
//! for draw-mode sales their draws (entries, winners at the draw, promoted,
//! wins used). See `seckill_analytics::stats` for the definitions.

use std::path::PathBuf;

use crate::tool_config::ToolConfig;
use anyhow::Context;
use clap::Args;
use seckill_analytics::stats::{all_stats_from_log, DrawStats, LogStats, QueueStats, VoucherStats};
use seckill_analytics::table::write_aligned;
use seckill_core::config;
use seckill_core::VoucherId;

/// Flags of `seckill stats`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  seckill stats --config config/ingress.toml
  seckill stats --voucher 0192f0c4-7a7e-7cc1-8000-000000000001
  seckill stats --json | jq '.[] | select(.sold_out) | .sell_out_ms'
  SECKILL_KAFKA__BROKERS=kafka:9092 seckill stats --json

Durations: sell-out is from the voucher's first accepted order to the
acceptance of the order that took the last unit (empty when units are still
left); from start is from begins_at to that acceptance; p50/p99 are
nearest-rank percentiles of decided_at - accepted_at over created and failed
orders. Every count is of distinct orders, so duplicate records count once.")]
pub(crate) struct StatsArgs {
    /// A TOML config with the `[kafka]` section (the ingress's will do);
    /// `SECKILL_*` environment variables override it.
    #[arg(long, env = "SECKILL_CONFIG")]
    config: Option<PathBuf>,
    /// Print a JSON array of objects (stable snake_case fields) instead of
    /// the table.
    #[arg(long)]
    json: bool,
    /// Only this voucher.
    #[arg(long, value_name = "ID")]
    voucher: Option<VoucherId>,
}

pub(crate) async fn run(args: StatsArgs) -> anyhow::Result<()> {
    let config: ToolConfig = config::load(args.config.as_deref()).context("loading the config")?;
    let LogStats { vouchers: mut stats, queues: mut rooms, mut draws } =
        all_stats_from_log(&config.kafka).await.context("reading the sales and orders topics")?;
    if let Some(voucher) = args.voucher {
        stats.retain(|s| s.voucher_id == voucher);
        rooms.retain(|room| room.voucher_id == voucher);
        draws.retain(|draw| draw.voucher_id == voucher);
        anyhow::ensure!(!stats.is_empty(), "voucher {voucher} does not appear in the log");
    }
    if args.json {
        // The array of vouchers stays what it was; the rooms are in the
        // queue-mode vouchers' own `waiting_room` member, the draws in the
        // draw-mode vouchers' `draw` member.
        let mut json = serde_json::to_value(&stats).context("encoding the statistics")?;
        if let Some(vouchers) = json.as_array_mut() {
            for voucher in vouchers {
                let id = voucher["voucher_id"].as_str().unwrap_or_default().to_owned();
                if let Some(room) = rooms.iter().find(|room| room.voucher_id.to_string() == id) {
                    voucher["waiting_room"] = serde_json::to_value(room).context("encoding a waiting room")?;
                }
                if let Some(draw) = draws.iter().find(|draw| draw.voucher_id.to_string() == id) {
                    voucher["draw"] = serde_json::to_value(draw).context("encoding a draw")?;
                }
            }
        }
        let json = serde_json::to_string_pretty(&json).context("encoding the statistics")?;
        crate::output::emit(&format!("{json}\n"))?;
    } else {
        let mut out = table(&stats);
        if !rooms.is_empty() {
            out.push('\n');
            out.push_str(&rooms_table(&rooms));
        }
        if !draws.is_empty() {
            out.push('\n');
            out.push_str(&draws_table(&draws));
        }
        crate::output::emit(&out)?;
    }
    Ok(())
}

/// The draws of draw-mode sales, one row each (`-`: no winners selected
/// yet).
fn draws_table(draws: &[DrawStats]) -> String {
    let header = ["draw of", "entries", "winners at draw", "promoted", "wins used"];
    let mut rows = vec![header.map(str::to_owned).to_vec()];
    rows.extend(draws.iter().map(|draw| {
        vec![
            draw.voucher_id.to_string(),
            draw.entries.to_string(),
            draw.winners.map_or_else(|| "-".to_owned(), |winners| winners.to_string()),
            draw.promoted.to_string(),
            draw.wins_used.to_string(),
        ]
    }));
    let mut out = String::new();
    write_aligned(&mut out, &rows);
    out
}

/// The waiting rooms of queue-mode sales, one row each.
fn rooms_table(rooms: &[QueueStats]) -> String {
    let header = ["waiting room of", "joined", "pre-queue", "after start", "served", "skipped", "entries spent"];
    let mut rows = vec![header.map(str::to_owned).to_vec()];
    rows.extend(rooms.iter().map(|room| {
        vec![
            room.voucher_id.to_string(),
            room.joined.to_string(),
            room.joined_pre_queue.to_string(),
            room.joined.saturating_sub(room.joined_pre_queue).to_string(),
            room.served.to_string(),
            room.expired.to_string(),
            room.entries_used.to_string(),
        ]
    }));
    let mut out = String::new();
    write_aligned(&mut out, &rows);
    out
}

/// The column headers of the table, in order.
const HEADERS: [&str; 12] = [
    "voucher",
    "stock",
    "accepted",
    "created",
    "failed",
    "cancelled",
    "paid",
    "sold",
    "sold out at",
    "sell-out",
    "from start",
    "p50 / p99",
];

/// The human table: a header, one row per voucher, columns aligned (text
/// to the left, numbers and durations to the right).
fn table(stats: &[VoucherStats]) -> String {
    let rows: Vec<[String; 12]> = stats.iter().map(row).collect();
    let widths: Vec<usize> = (0..HEADERS.len())
        .map(|column| rows.iter().map(|row| row[column].chars().count()).chain([HEADERS[column].len()]).max())
        .map(Option::unwrap_or_default)
        .collect();
    let line = |cells: [&str; 12]| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(column, (cell, &width))| match column {
                0 | 8 => format!("{cell:<width$}"),
                _ => format!("{cell:>width$}"),
            })
            .collect();
        format!("{}\n", padded.join("  ").trim_end())
    };
    let mut out = line(HEADERS);
    for row in &rows {
        out.push_str(&line(row.each_ref().map(String::as_str)));
    }
    out
}

fn row(stats: &VoucherStats) -> [String; 12] {
    let latency = match (stats.latency_p50_ms, stats.latency_p99_ms) {
        (Some(p50), Some(p99)) => format!("{} / {}", duration(p50), duration(p99)),
        _ => "-".to_owned(),
    };
    [
        stats.voucher_id.to_string(),
        stats.stock.to_string(),
        stats.accepted.to_string(),
        stats.created.to_string(),
        stats.failed.to_string(),
        stats.cancelled.to_string(),
        stats.paid.to_string(),
        stats.units_sold.to_string(),
        stats.sold_out_at.map_or_else(|| "-".to_owned(), |at| at.format("%Y-%m-%d %H:%M:%S%.3f").to_string()),
        stats.sell_out_ms.map_or_else(|| "-".to_owned(), duration),
        stats.sell_out_since_start_ms.map_or_else(|| "-".to_owned(), duration),
        latency,
    ]
}

/// A duration given in milliseconds, for people: `850.0 ms`, `1.234 s`,
/// `2 min 03.456 s`, `1 h 02 min 03.456 s`.
fn duration(ms: f64) -> String {
    let sign = if ms < 0.0 { "-" } else { "" };
    let ms = ms.abs();
    if ms < 1_000.0 {
        return format!("{sign}{ms:.1} ms");
    }
    let seconds = ms / 1_000.0;
    if seconds < 60.0 {
        return format!("{sign}{seconds:.3} s");
    }
    let whole_minutes = (seconds / 60.0).floor();
    let rest = seconds - whole_minutes * 60.0;
    let (hours, minutes) = ((whole_minutes / 60.0).floor(), whole_minutes % 60.0);
    if hours < 1.0 {
        format!("{sign}{minutes} min {rest:06.3} s")
    } else {
        format!("{sign}{hours} h {minutes:02} min {rest:06.3} s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_draws_table_has_a_row_per_draw() {
        let drawn = DrawStats {
            voucher_id: VoucherId::generate(),
            entries: 2_000,
            winners: Some(20),
            promoted: 3,
            wins_used: 19,
        };
        let open =
            DrawStats { voucher_id: VoucherId::generate(), entries: 5, winners: None, promoted: 0, wins_used: 0 };
        let text = draws_table(&[drawn.clone(), open]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert!(lines[0].trim_start().starts_with("draw of") && lines[0].contains("winners at draw"), "{text}");
        let cells: Vec<&str> = lines[1].split_whitespace().collect();
        assert_eq!(cells, [drawn.voucher_id.to_string().as_str(), "2000", "20", "3", "19"], "{text}");
        assert!(lines[2].split_whitespace().nth(2) == Some("-"), "{text}");
    }

    #[test]
    fn durations_read_naturally() {
        assert_eq!(duration(0.25), "0.2 ms");
        assert_eq!(duration(850.0), "850.0 ms");
        assert_eq!(duration(1_234.0), "1.234 s");
        assert_eq!(duration(123_456.0), "2 min 03.456 s");
        assert_eq!(duration(3_723_456.0), "1 h 02 min 03.456 s");
        assert_eq!(duration(-1_500.0), "-1.500 s");
    }

    #[test]
    fn the_table_aligns_its_columns() {
        let voucher = VoucherStats {
            voucher_id: VoucherId::generate(),
            stock: 5,
            begins_at: None,
            accepted: 12,
            created: 6,
            failed: 1,
            cancelled: 1,
            paid: 0,
            units_sold: 5,
            sold_out: true,
            first_accepted_at: None,
            sold_out_order_id: None,
            sold_out_at: chrono::DateTime::from_timestamp_millis(1_800_000_000_123),
            sell_out_ms: Some(1_234.0),
            sell_out_since_start_ms: Some(61_000.0),
            latency_p50_ms: Some(3.5),
            latency_p99_ms: Some(12.25),
        };
        let unsold =
            VoucherStats { stock: 1_000, sold_out: false, sold_out_at: None, sell_out_ms: None, ..voucher.clone() };
        let text = table(&[voucher, unsold]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(lines[0].starts_with("voucher "), "{text}");
        assert!(lines[1].contains("2027-01-15 08:00:00.123") && lines[1].contains("1.234 s"), "{text}");
        assert!(lines[1].contains("3.5 ms / 12.2 ms") || lines[1].contains("3.5 ms / 12.3 ms"), "{text}");
        let stock_end = lines[0].find("stock").expect("stock column") + "stock".len();
        assert_eq!(&lines[1][stock_end - 1..stock_end], "5", "numbers are right-aligned:\n{text}");
        assert_eq!(&lines[2][stock_end - 4..stock_end], "1000", "numbers are right-aligned:\n{text}");
    }
}
