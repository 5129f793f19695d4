//! `seckill export`: the log as Parquet files, one per event kind, for SQL
//! (DuckDB, Spark, Trino, a warehouse). The work is
//! `seckill_analytics::export`; this file maps flags to its options.

use std::fs::File;
use std::io::{BufReader, IsTerminal};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;

use anyhow::Context;
use chrono::{DateTime, Utc};
use clap::Args;
use seckill_analytics::export::{self, ExportOptions};
use seckill_core::config;
use seckill_core::VoucherId;

use crate::tool_config::ToolConfig;

const EXAMPLES: &str = "\
Examples:
  seckill export --out sale/                        # sales and orders topics, beginning to now
  seckill export --voucher 0192f0c4-7a7e-7cc1-8000-000000000001 --out sale/
  seckill export --since \"$(date -u -d '-1 hour' +%FT%TZ)\" --until \"$(date -u +%FT%TZ)\" --out hour/
  seckill replay --output sale.jsonl && seckill export --from sale.jsonl --out sale/
  duckdb -c \"SELECT count(*) FROM 'sale/OrderCreated.parquet'\"

Each file has the record's log_topic, log_partition, log_offset and log_time
(the Kafka timestamp), the envelope's schema, event_id and emitted_at, and the
event's fields, typed as docs/schemas/ describes them (`seckill schema`).
Records of a newer schema version, or that are no event, are named, counted
and skipped; the exit status is 1 for them only with --strict.";

/// Flags of `seckill export`.
#[derive(Debug, Args)]
#[command(after_help = EXAMPLES)]
pub(crate) struct ExportArgs {
    /// The directory the `<Kind>.parquet` files go in (created if missing;
    /// files of the same names are replaced).
    #[arg(long, short, value_name = "DIR")]
    out: PathBuf,
    /// Read this JSON Lines copy of the log (as `seckill replay` writes it;
    /// `-` for stdin) instead of the topics.
    #[arg(long, value_name = "FILE")]
    from: Option<PathBuf>,
    /// Records produced at or after this time (RFC 3339): the Kafka
    /// timestamp, or `emitted_at` with --from.
    #[arg(long, visible_alias = "from-time", value_name = "RFC3339", value_parser = parse_time)]
    since: Option<DateTime<Utc>>,
    /// Records produced before this time (RFC 3339).
    #[arg(long, visible_alias = "to-time", value_name = "RFC3339", value_parser = parse_time)]
    until: Option<DateTime<Utc>>,
    /// Only this voucher's events.
    #[arg(long, value_name = "ID")]
    voucher: Option<VoucherId>,
    /// Exit with status 1 when any record was skipped (newer or malformed).
    #[arg(long)]
    strict: bool,
    /// A TOML config with the `[kafka]` section (the ingress's will do);
    /// `SECKILL_*` environment variables override it. Not read with --from.
    #[arg(long, env = "SECKILL_CONFIG")]
    config: Option<PathBuf>,
}

fn parse_time(text: &str) -> Result<DateTime<Utc>, String> {
    DateTime::parse_from_rfc3339(text)
        .map(|time| time.with_timezone(&Utc))
        .map_err(|error| format!("{text:?} is not an RFC 3339 time ({error}), e.g. 2026-11-21T10:00:00Z"))
}

pub(crate) async fn run(args: ExportArgs) -> anyhow::Result<()> {
    let options = ExportOptions {
        since: args.since,
        until: args.until,
        voucher: args.voucher,
        progress: args.from.is_none() && std::io::stderr().is_terminal(),
    };
    let out = args.out.clone();
    let summary = match &args.from {
        Some(path) => {
            let path = path.clone();
            tokio::task::spawn_blocking(move || {
                if path.as_os_str() == "-" {
                    export::export_lines(std::io::stdin().lock(), "stdin", &options, &out)
                } else {
                    let file =
                        File::open(&path).map_err(|e| export::ExportError::Input(path.display().to_string(), e))?;
                    export::export_lines(BufReader::new(file), &path.display().to_string(), &options, &out)
                }
            })
            .await
        }
        None => {
            let config: ToolConfig = config::load(args.config.as_deref()).context("loading the config")?;
            let kafka = config.kafka.clone();
            tokio::task::spawn_blocking(move || export::export_topics(&kafka, &options, &out, &AtomicBool::new(false)))
                .await
        }
    }
    .context("the export thread failed")?
    .context("exporting")?;
    eprintln!("{summary}");
    for (kind, rows) in summary.rows.iter().filter(|(_, rows)| **rows > 0) {
        eprintln!("  {kind}: {rows}");
    }
    anyhow::ensure!(
        !args.strict || summary.bad() == 0,
        "{} record(s) skipped ({} of a newer schema version, {} malformed) and --strict was given",
        summary.bad(),
        summary.newer,
        summary.malformed
    );
    Ok(())
}
