//! `seckill groups`: the services' consumer groups as Kafka describes them
//! (state, members, the partitions each holds, committed offset and lag),
//! like `kafka-consumer-groups.sh --describe`. The work is
//! `seckill_analytics::groups`; this file maps flags and prints.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use seckill_analytics::{groups, topics};
use seckill_core::config;

use crate::tool_config::ToolConfig;

const EXAMPLES: &str = "\
Examples:
  seckill groups                                   # seckill-processor and seckill-projector
  seckill groups --group my-processor
  seckill groups --json | jq '.[] | {group, state, members: (.members | length)}'";

/// Flags of `seckill groups`.
#[derive(Debug, Args)]
#[command(after_help = EXAMPLES)]
pub(crate) struct GroupsArgs {
    /// A consumer group to describe (repeatable). Default:
    /// seckill-processor and seckill-projector. Looking does not join it.
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

pub(crate) async fn run(args: GroupsArgs) -> anyhow::Result<()> {
    let config: ToolConfig = config::load(args.config.as_deref()).context("loading the config")?;
    let names = if args.groups.is_empty() {
        topics::DEFAULT_GROUPS.iter().map(|group| (*group).to_owned()).collect()
    } else {
        args.groups
    };
    let kafka = config.kafka.clone();
    let described = tokio::task::spawn_blocking(move || groups::describe(&kafka, &names))
        .await
        .context("the groups thread failed")?
        .context("describing the consumer groups")?;
    if args.json {
        let json = serde_json::to_string_pretty(&described).context("encoding the groups")?;
        crate::output::emit(&format!("{json}\n"))?;
    } else {
        crate::output::emit(&groups::table(&described))?;
    }
    Ok(())
}
