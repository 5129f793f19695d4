//! `seckill rebuild-stock`: rebuilds the processor's stock store from the
//! sales topic into a fresh store, optionally checking it against the
//! outcomes the processor logged and its live stock.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use clap::Args;
use seckill_analytics::rebuild_stock::{self, ProcessorStock};
use seckill_core::config;

use crate::rebuild_target::RebuildTarget;
use seckill_processor::ProcessorConfig;

/// Flags of `seckill rebuild-stock`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  # The stock store is lost: rebuild it into a new redb file, then check it:
  seckill rebuild-stock --config config/processor.toml --into .seckill/processor-rebuilt.redb --verify
  # On ScyllaDB or Cassandra (store.backend = \"scylla\" in the config), into a new keyspace:
  seckill rebuild-stock --config processor.toml --into-keyspace seckill_stock_2026_11_28

The sales topic is read from offset 0 to its end when the rebuild starts; it
refuses to run if a partition no longer starts at 0. To put the rebuilt store
in service: stop the processor, point store.path (or store.keyspace) at it and
start the processor. Its committed offsets are unchanged, so it decides from
where it stopped; records it decides again are answered from the rebuilt
store as redeliveries.

--verify compares each order's outcomes (without their times and event ids)
with those the processor published on the orders topic, and each voucher's
stock and units left with the running processor's (--processor-url); run it
while no sale takes orders, or the orders in flight differ. It prints one JSON
line per difference and a summary; exit status 1 when any differs.")]
pub(crate) struct RebuildStockArgs {
    /// The processor's TOML config (its kafka and store sections);
    /// `SECKILL_*` environment variables override it.
    #[arg(long, env = "SECKILL_CONFIG")]
    config: Option<PathBuf>,
    #[command(flatten)]
    target: RebuildTarget,
    /// Then compare every order's outcomes with the log and every voucher's
    /// stock with the running processor's (exit status 1 when any differs).
    #[arg(long)]
    verify: bool,
    /// The running processor's HTTP address, for --verify.
    #[arg(long, default_value = "http://127.0.0.1:8081")]
    processor_url: String,
}

pub(crate) async fn run(args: RebuildStockArgs) -> anyhow::Result<()> {
    let config: ProcessorConfig = config::load(args.config.as_deref()).context("loading the processor config")?;
    let target = args.target.store(&config.store)?;
    let store = seckill_store::open_stock_store(&target).await.context("opening the target store")?;
    let report = rebuild_stock::rebuild_stock(&config.kafka, Arc::clone(&store)).await.context("rebuilding")?;
    println!(
        "Rebuilt the stock from {} records ({} undecodable, {} deciding nothing): {} vouchers, {} orders.",
        report.records,
        report.undecodable,
        report.passed,
        report.vouchers.len(),
        report.orders.len()
    );
    if !args.verify {
        return Ok(());
    }
    let logged = rebuild_stock::logged_outcomes(&config.kafka).await.context("reading the logged outcomes")?;
    let live = ProcessorStock::new(&args.processor_url).context("the processor's URL")?;
    let differences = rebuild_stock::verify(&report, &logged, store.as_ref(), |voucher| live.stock(voucher))
        .await
        .context("comparing")?;
    for difference in &differences {
        println!("{}", serde_json::to_string(difference)?);
    }
    let explained = differences.iter().filter(|d| d.explained.is_some()).count();
    println!(
        "{} differences ({explained} of a pay_by whose decision time was not logged): {} orders against the log, {} vouchers \
         against the processor at {}.",
        differences.len(),
        report.orders.len(),
        report.vouchers.len(),
        args.processor_url
    );
    if !differences.is_empty() {
        std::process::exit(1);
    }
    Ok(())
}
