//! The flags `seckill topics` and `seckill groups` share: which consumer
//! groups to look at, JSON or a table, and where the `[kafka]` section is.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use seckill_analytics::topics::DEFAULT_GROUPS;
use seckill_core::config::{self, KafkaConfig};

use crate::tool_config::ToolConfig;

/// Which groups, in what form, from which config.
#[derive(Debug, Args)]
pub(crate) struct GroupArgs {
    /// A consumer group to report (repeatable): the processor's and the
    /// projector's `[consumer] group`. Default: seckill-processor and
    /// seckill-projector. Looking does not join the group.
    #[arg(long = "group", value_name = "NAME")]
    groups: Vec<String>,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub(crate) json: bool,
    /// A TOML config with the `[kafka]` section (the ingress's will do);
    /// `SECKILL_*` environment variables override it.
    #[arg(long, env = "SECKILL_CONFIG")]
    config: Option<PathBuf>,
}

impl GroupArgs {
    /// The `[kafka]` section and the groups named (or the default ones).
    pub(crate) fn resolve(&self) -> anyhow::Result<(KafkaConfig, Vec<String>)> {
        let config: ToolConfig = config::load(self.config.as_deref()).context("loading the config")?;
        let groups = if self.groups.is_empty() {
            DEFAULT_GROUPS.iter().map(|group| (*group).to_owned()).collect()
        } else {
            self.groups.clone()
        };
        Ok((config.kafka, groups))
    }
}
