//! `seckill report`: a sale as one self-contained HTML page of charts and
//! tables, from the log alone. The work is `seckill_analytics::report`.

use std::io::Write;
use std::path::PathBuf;

use crate::sale_selection::SaleSelection;
use crate::tool_config::ToolConfig;
use anyhow::Context;
use chrono::Utc;
use clap::Args;
use seckill_analytics::report::{self, About, MAX_VOUCHERS};
use seckill_analytics::sale::read_sales;
use seckill_core::config;

/// Flags of `seckill report`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  seckill report --voucher 0192f0c4-7a7e-7cc1-8000-000000000001 --output sale.html
  seckill report --voucher ID1 --voucher ID2 --output two-sales.html
  seckill report --from-time \"$(date -u -d 'today 08:00' +%FT%TZ)\" --to-time \"$(date -u -d 'today 12:00' +%FT%TZ)\" --output morning.html
  seckill report --last 1h --output - > last-hour.html

The page needs nothing but a browser: styles and charts (SVG) are inline,
no script runs and nothing is fetched. Every time is UTC. A window chooses
the vouchers with records in it; each voucher's whole sale is reported. A
sale that takes money also gets its revenue (paid, refunded and net per
currency), its payments by outcome (refunds by reason) and a chart of
payments and refunds over time.")]
pub(crate) struct ReportArgs {
    #[command(flatten)]
    selection: SaleSelection,
    /// Write the page here (`-`: stdout).
    #[arg(long, short, value_name = "FILE")]
    output: PathBuf,
    /// A TOML config with the `[kafka]` section (the ingress's will do);
    /// `SECKILL_*` environment variables override it.
    #[arg(long, env = "SECKILL_CONFIG")]
    config: Option<PathBuf>,
}

pub(crate) async fn run(args: ReportArgs) -> anyhow::Result<()> {
    let config: ToolConfig = config::load(args.config.as_deref()).context("loading the config")?;
    let generated_at = Utc::now();
    let read = read_sales(&config.kafka, &args.selection.selection(MAX_VOUCHERS))
        .await
        .context("reading the sales and orders topics")?;
    anyhow::ensure!(!read.sales.is_empty(), "no voucher has records in the log within the given bounds");
    let topics = config.kafka.topics();
    let about = About { generated_at, records: read.records, sales_topic: topics.sales, orders_topic: topics.orders };
    let html = report::render(&read.sales, &about).context("drawing the report")?;
    if args.output.as_os_str() == "-" {
        crate::output::emit(&html)?;
    } else {
        let mut file =
            std::fs::File::create(&args.output).with_context(|| format!("creating {}", args.output.display()))?;
        file.write_all(html.as_bytes()).with_context(|| format!("writing {}", args.output.display()))?;
    }
    let orders: usize = read.sales.iter().map(|sale| sale.log.orders.len()).sum();
    eprintln!(
        "Reported {} ({orders} orders) from {} records ({} undecodable) in {:.2} s{}.",
        if read.sales.len() == 1 { "1 voucher".to_owned() } else { format!("{} vouchers", read.sales.len()) },
        read.records,
        read.undecodable,
        read.elapsed.as_secs_f64(),
        if args.output.as_os_str() == "-" { String::new() } else { format!(" into {}", args.output.display()) }
    );
    Ok(())
}
