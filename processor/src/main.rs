//! `seckill-processor`: runs the processor alone.

use std::path::PathBuf;

use anyhow::Context;
use clap::Parser;
use seckill_core::{config, shutdown, telemetry};
use seckill_processor::{run_standalone, ProcessorConfig};

/// The seckill processor.
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
    let config: ProcessorConfig = config::load(args.config.as_deref()).context("loading the processor config")?;
    run_standalone(config, shutdown::on_signals()?).await.context("running the processor")
}
