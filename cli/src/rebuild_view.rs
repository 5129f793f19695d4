//! `seckill rebuild-view`: rebuilds the order-status view from the log into
//! a fresh store, optionally comparing it with the live view.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use clap::Args;
use seckill_analytics::rebuild;
use seckill_core::config;

use crate::rebuild_target::RebuildTarget;
use seckill_projector::ProjectorConfig;
use seckill_web::RemoteView;

/// Flags of `seckill rebuild-view`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  # Rebuild into a new redb file and compare it with the running projector's view:
  seckill rebuild-view --config config/projector.toml --into .seckill/view-rebuilt.redb --verify
  # On ScyllaDB (store.backend = \"scylla\" in the config), into a new keyspace:
  seckill rebuild-view --config projector.toml --into-keyspace seckill_view_2026_11_21

To switch the projector to the rebuilt view: stop it, run the rebuild, point
store.path (or store.keyspace) at the new store and start it again. Its
committed offsets are at or before the end the rebuild read to, so it
replays a little, which the view absorbs (it is idempotent).")]
pub(crate) struct RebuildArgs {
    /// The projector's TOML config (its kafka and store sections);
    /// `SECKILL_*` environment variables override it.
    #[arg(long, env = "SECKILL_CONFIG")]
    config: Option<PathBuf>,
    #[command(flatten)]
    target: RebuildTarget,
    /// Then compare every order and voucher with the live view and print
    /// each row that differs (exit status 2 when any does).
    #[arg(long)]
    verify: bool,
    /// The live view's query API (the projector), for --verify.
    #[arg(long, default_value = "http://127.0.0.1:8082")]
    live_url: String,
}

pub(crate) async fn run(args: RebuildArgs) -> anyhow::Result<()> {
    let config: ProjectorConfig = config::load(args.config.as_deref()).context("loading the projector config")?;
    let target = args.target.store(&config.store)?;
    let store = seckill_store::open_view_store(&target).await.context("opening the target store")?;
    let report = rebuild::rebuild_view(&config.kafka, Arc::clone(&store)).await.context("rebuilding")?;
    println!(
        "Rebuilt the view from {} records ({} undecodable, skipped): {} orders, {} vouchers.",
        report.records,
        report.undecodable,
        report.orders.len(),
        report.vouchers.len()
    );
    if !args.verify {
        return Ok(());
    }
    let live = RemoteView::new(&args.live_url).context("the live view's URL")?;
    let differences = rebuild::verify(&report, store.as_ref(), &live).await.context("comparing with the live view")?;
    for difference in &differences {
        println!("{}", serde_json::to_string(difference)?);
    }
    println!("{} rows differ from the live view at {}.", differences.len(), args.live_url);
    if !differences.is_empty() {
        std::process::exit(2);
    }
    Ok(())
}
