//! `seckill-projector`: runs the projector alone.

use std::path::PathBuf;

use anyhow::Context;
use clap::Parser;
use seckill_core::{config, shutdown, telemetry};
use seckill_projector::{run_standalone, ProjectorConfig};

/// The seckill projector.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// TOML config file; `SECKILL_*` environment variables override it.
    #[arg(long, env = "SECKILL_CONFIG")]
    config: Option<PathBuf>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    telemetry::init_logging();
    let args = Args::parse();
    let config: ProjectorConfig = config::load(args.config.as_deref()).context("loading the projector config")?;
    run_standalone(config, shutdown::on_signals()?).await.context("running the projector")
}
