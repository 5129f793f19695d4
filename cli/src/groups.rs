//! `seckill groups`: the services' consumer groups as Kafka describes them
//! (state, members, the partitions each holds, committed offset and lag),
//! like `kafka-consumer-groups.sh --describe`. The work is
//! `seckill_analytics::groups`; this file maps flags and prints.

use anyhow::Context;
use clap::Args;
use seckill_analytics::groups;

use crate::group_args::GroupArgs;

const EXAMPLES: &str = "\
Examples:
  seckill groups                                   # seckill-processor and seckill-projector
  seckill groups --group my-processor
  seckill groups --json | jq '.[] | {group, state, members: (.members | length)}'";

/// Flags of `seckill groups`.
#[derive(Debug, Args)]
#[command(after_help = EXAMPLES)]
pub(crate) struct GroupsArgs {
    #[command(flatten)]
    selection: GroupArgs,
}

pub(crate) async fn run(args: GroupsArgs) -> anyhow::Result<()> {
    let (kafka, names) = args.selection.resolve()?;
    let described = tokio::task::spawn_blocking(move || groups::describe(&kafka, &names))
        .await
        .context("the groups thread failed")?
        .context("describing the consumer groups")?;
    if args.selection.json {
        let json = serde_json::to_string_pretty(&described).context("encoding the groups")?;
        crate::output::emit(&format!("{json}\n"))?;
    } else {
        crate::output::emit(&groups::table(&described))?;
    }
    Ok(())
}
