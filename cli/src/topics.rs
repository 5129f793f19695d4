//! `seckill topics`: the platform's topics with partitions, watermarks and
//! the services' consumer groups' committed offsets and lag. The work is
//! `seckill_analytics::topics`; this file maps flags and prints.

use std::path::PathBuf;

use crate::tool_config::ToolConfig;
use anyhow::Context;
use clap::Args;
use seckill_analytics::topics;
use seckill_core::config;

const EXAMPLES: &str = "\
Examples:
  seckill topics                                   # table; groups seckill-processor and seckill-projector
  seckill topics --group my-processor --group my-projector
  seckill topics --json | jq '.topics[].partitions[].groups[].lag'";

/// Flags of `seckill topics`.
#[derive(Debug, Args)]
#[command(after_help = EXAMPLES)]
pub(crate) struct TopicsArgs {
    /// A consumer group to report (repeatable): the processor's and the
    /// projector's `[consumer] group`. Default: seckill-processor and
    /// seckill-projector. Looking does not join the group.
    #[arg(long = "group", value_name = "NAME")]
    groups: Vec<String>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// A TOML config with the `[kafka]` section (the ingress's will do);
    /// `SECKILL_*` environment variables override it.
    #[arg(long, env = "SECKILL_CONFIG")]
    config: Option<PathBuf>,
}

pub(crate) async fn run(args: TopicsArgs) -> anyhow::Result<()> {
    let config: ToolConfig = config::load(args.config.as_deref()).context("loading the config")?;
    let groups = if args.groups.is_empty() {
        topics::DEFAULT_GROUPS.iter().map(|group| (*group).to_owned()).collect()
    } else {
        args.groups
    };
    let kafka = config.kafka.clone();
    let overview = tokio::task::spawn_blocking(move || topics::overview(&kafka, &groups))
        .await
        .context("the topics thread failed")?
        .context("reading the topics")?;
    if args.json {
        let json = serde_json::to_string_pretty(&overview).context("encoding the overview")?;
        crate::output::emit(&format!("{json}\n"))?;
    } else {
        crate::output::emit(&overview.table())?;
    }
    Ok(())
}
