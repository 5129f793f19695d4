//! `seckill topics`: the platform's topics with partitions, watermarks and
//! the services' consumer groups' committed offsets and lag. The work is
//! `seckill_analytics::topics`; this file maps flags and prints.

use anyhow::Context;
use clap::Args;
use seckill_analytics::topics;

use crate::group_args::GroupArgs;

const EXAMPLES: &str = "\
Examples:
  seckill topics                                   # table; groups seckill-processor and seckill-projector
  seckill topics --group my-processor --group my-projector
  seckill topics --json | jq '.topics[].partitions[].groups[].lag'";

/// Flags of `seckill topics`.
#[derive(Debug, Args)]
#[command(after_help = EXAMPLES)]
pub(crate) struct TopicsArgs {
    #[command(flatten)]
    selection: GroupArgs,
}

pub(crate) async fn run(args: TopicsArgs) -> anyhow::Result<()> {
    let (kafka, groups) = args.selection.resolve()?;
    let overview = tokio::task::spawn_blocking(move || topics::overview(&kafka, &groups))
        .await
        .context("the topics thread failed")?
        .context("reading the topics")?;
    if args.selection.json {
        let json = serde_json::to_string_pretty(&overview).context("encoding the overview")?;
        crate::output::emit(&format!("{json}\n"))?;
    } else {
        crate::output::emit(&overview.table())?;
    }
    Ok(())
}
