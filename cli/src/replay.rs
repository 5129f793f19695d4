//! `seckill replay`: the platform's topics between two bounds, filtered, as
//! JSON Lines or CSV. The work is `seckill_analytics::replay`; this file
//! maps flags to its options.

use std::fs::File;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::tool_config::ToolConfig;
use anyhow::Context;
use chrono::{DateTime, Utc};
use clap::{ArgGroup, Args};
use seckill_analytics::replay::{self, End, Filter, Format, LogTopic, ReplayError, ReplayOptions, Start};
use seckill_core::config;
use seckill_core::VoucherId;

const EXAMPLES: &str = "\
Examples:
  seckill replay                                    # sales and orders, beginning to now, JSON Lines
  seckill replay --topic orders --type OrderFailed --last 15m
  seckill replay --voucher 0192f0c4-7a7e-7cc1-8000-000000000001 --format csv --output sale.csv
  seckill replay --user alice --from-time \"$(date -u -d '-1 hour' +%FT%TZ)\" --to-time \"$(date -u +%FT%TZ)\"
  seckill replay --topic dead-letters               # parked records with their dlq.* headers
  seckill replay --from-offset 1000 --follow        # then every new record until Ctrl-C";

/// Flags of `seckill replay`.
#[derive(Debug, Args)]
#[command(
    after_help = EXAMPLES,
    group(ArgGroup::new("start").args(["from", "from_offset", "from_time", "last"])),
    group(ArgGroup::new("end").args(["to", "to_time", "follow"])),
)]
pub(crate) struct ReplayArgs {
    /// Topics to read (repeatable): sales, orders, dead-letters. Default:
    /// sales and orders.
    #[arg(long = "topic", value_name = "TOPIC", value_parser = clap::value_parser!(LogTopicArg))]
    topics: Vec<LogTopicArg>,
    /// Start at the oldest record (the default).
    #[arg(long, value_name = "beginning", value_parser = ["beginning"])]
    from: Option<String>,
    /// Start at this offset in every partition.
    #[arg(long, value_name = "N")]
    from_offset: Option<i64>,
    /// Start at the first record produced at or after this time (RFC 3339).
    #[arg(long, value_name = "RFC3339", value_parser = parse_time)]
    from_time: Option<DateTime<Utc>>,
    /// Start this long ago: 30s, 15m, 2h, 1d.
    #[arg(long, value_name = "WINDOW", value_parser = replay::parse_window)]
    last: Option<std::time::Duration>,
    /// End at the high watermarks of when the replay starts (the default).
    #[arg(long, value_name = "now", value_parser = ["now"])]
    to: Option<String>,
    /// End before the first record produced at or after this time (RFC 3339).
    #[arg(long, value_name = "RFC3339", value_parser = parse_time)]
    to_time: Option<DateTime<Utc>>,
    /// Keep printing new records until Ctrl-C.
    #[arg(long)]
    follow: bool,
    /// Only events of this type (repeatable), e.g. OrderCreated.
    #[arg(long = "type", value_name = "TYPE", value_parser = replay::parse_event_type)]
    types: Vec<String>,
    /// Only this voucher's events.
    #[arg(long, value_name = "ID")]
    voucher: Option<VoucherId>,
    /// Only events of this user's orders.
    #[arg(long, value_name = "ID")]
    user: Option<String>,
    /// jsonl (one record per line, as on the topic) or csv.
    #[arg(long, default_value = "jsonl", value_parser = clap::value_parser!(FormatArg))]
    format: FormatArg,
    /// Write here instead of stdout.
    #[arg(long, short, value_name = "FILE")]
    output: Option<PathBuf>,
    /// Decode records on this many threads. Default: the machine's cores,
    /// at most four; 1 leaves the other cores to the services beside it.
    #[arg(long, value_name = "N")]
    threads: Option<std::num::NonZeroUsize>,
    /// A TOML config with the `[kafka]` section (the ingress's will do);
    /// `SECKILL_*` environment variables override it.
    #[arg(long, env = "SECKILL_CONFIG")]
    config: Option<PathBuf>,
}

/// A topic flag, parsed by the library.
#[derive(Clone, Copy, Debug)]
struct LogTopicArg(LogTopic);

impl std::str::FromStr for LogTopicArg {
    type Err = String;
    fn from_str(name: &str) -> Result<Self, String> {
        name.parse().map(Self)
    }
}

/// A format flag, parsed by the library.
#[derive(Clone, Copy, Debug)]
struct FormatArg(Format);

impl std::str::FromStr for FormatArg {
    type Err = String;
    fn from_str(name: &str) -> Result<Self, String> {
        name.parse().map(Self)
    }
}

fn parse_time(text: &str) -> Result<DateTime<Utc>, String> {
    DateTime::parse_from_rfc3339(text)
        .map(|time| time.with_timezone(&Utc))
        .map_err(|error| format!("{text:?} is not an RFC 3339 time ({error}), e.g. 2026-11-21T10:00:00Z"))
}

pub(crate) async fn run(args: ReplayArgs) -> anyhow::Result<()> {
    let config: ToolConfig = config::load(args.config.as_deref()).context("loading the config")?;
    let start = match (args.from_offset, args.from_time, args.last) {
        (Some(offset), _, _) => Start::Offset(offset),
        (_, Some(time), _) => Start::Time(time),
        (_, _, Some(window)) => Start::last(window),
        _ => Start::Beginning,
    };
    let end = match (args.to_time, args.follow) {
        (Some(time), _) => End::Time(time),
        (_, true) => End::Follow,
        _ => End::Now,
    };
    let mut options = ReplayOptions {
        start,
        end,
        filter: Filter { types: args.types, voucher: args.voucher, user: args.user },
        format: args.format.0,
        progress: std::io::stderr().is_terminal(),
        decode_threads: args.threads,
        ..ReplayOptions::default()
    };
    if !args.topics.is_empty() {
        options.topics = args.topics.iter().map(|topic| topic.0).collect();
    }
    let file = match &args.output {
        Some(path) => Some(File::create(path).with_context(|| format!("creating {}", path.display()))?),
        None => None,
    };

    let stop = Arc::new(AtomicBool::new(false));
    if end == End::Follow {
        let stop = stop.clone();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                stop.store(true, Ordering::Relaxed);
            }
        });
    }
    let kafka = config.kafka.clone();
    let result = tokio::task::spawn_blocking(move || match file {
        Some(file) => replay::replay(&kafka, &options, file, &stop),
        None => replay::replay(&kafka, &options, std::io::stdout().lock(), &stop),
    })
    .await
    .context("the replay thread failed")?;
    match result {
        Ok(summary) => {
            eprintln!("{summary}");
            Ok(())
        }
        // `seckill replay | head` closed the pipe: the reader has what it wanted.
        Err(ReplayError::Write(error)) if error.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(error) => Err(error).context("replaying"),
    }
}
