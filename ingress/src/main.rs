//! `seckill-ingress`: runs the ingress alone (status queries are forwarded
//! to the projector at `view_url`).

use std::path::PathBuf;

use anyhow::Context;
use clap::Parser;
use seckill_core::{config, shutdown, telemetry};
use seckill_ingress::{run_standalone, IngressConfig};

/// The seckill ingress.
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
    let config: IngressConfig = config::load(args.config.as_deref()).context("loading the ingress config")?;
    run_standalone(config, shutdown::on_signals()?).await.context("running the ingress")
}
