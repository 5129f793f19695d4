//! `seckill serve <service>`: runs one service as its own process, as a
//! deployment (or the fault-injection tests) does.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, ValueEnum};
use seckill_core::{config, shutdown};
use seckill_sandbox::{Sandbox, SandboxConfig};

/// Which service to run.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub(crate) enum Service {
    Ingress,
    Processor,
    Projector,
    /// The Stripe-shaped payment provider sandbox.
    Payments,
}

/// Flags of `seckill serve`.
#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// The service to run.
    service: Service,
    /// TOML config file; `SECKILL_*` environment variables override it.
    #[arg(long, env = "SECKILL_CONFIG")]
    config: Option<PathBuf>,
}

pub(crate) async fn run(args: ServeArgs) -> anyhow::Result<()> {
    let file = args.config.as_deref();
    let stop = shutdown::on_signals().context("installing the signal handlers")?;
    match args.service {
        Service::Ingress => {
            let config = config::load(file).context("loading the ingress config")?;
            seckill_ingress::run_standalone(config, stop).await.context("running the ingress")
        }
        Service::Processor => {
            let config = config::load(file).context("loading the processor config")?;
            seckill_processor::run_standalone(config, stop).await.context("running the processor")
        }
        Service::Projector => {
            let config = config::load(file).context("loading the projector config")?;
            seckill_projector::run_standalone(config, stop).await.context("running the projector")
        }
        Service::Payments => {
            let config: SandboxConfig = config::load_sandbox(file).context("loading the payments sandbox config")?;
            let sandbox = Sandbox::build(config).await.context("starting the payments sandbox")?;
            tracing::info!(addr = %sandbox.local_addr(), "Payments sandbox listening.");
            sandbox.run(stop).await.context("running the payments sandbox")
        }
    }
}
