//! `seckill schema`: the records' JSON Schemas, one file per event kind and
//! one for the envelope, as `docs/schemas/` keeps them.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use seckill_analytics::schema;

/// Flags of `seckill schema`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  # Regenerate the committed schemas (after changing an event):
  seckill schema --out docs/schemas
  # Whether the committed ones are those this build writes (exit status 1 if not):
  seckill schema --out docs/schemas --check")]
pub(crate) struct SchemaArgs {
    /// The directory the files go under, in `v<schema version>/`.
    #[arg(long, default_value = "docs/schemas")]
    out: PathBuf,
    /// Write nothing: list the files that differ from the generated ones
    /// and exit 1 if any does.
    #[arg(long)]
    check: bool,
}

pub(crate) fn run(args: SchemaArgs) -> anyhow::Result<()> {
    if args.check {
        let differences = schema::differences(&args.out);
        for difference in &differences {
            println!("{difference}");
        }
        anyhow::ensure!(
            differences.is_empty(),
            "{} schema file(s) differ; regenerate them with `seckill schema --out {}`",
            differences.len(),
            args.out.display()
        );
        println!("{} agrees with this build", schema::version_dir(&args.out).display());
        return Ok(());
    }
    let written = schema::write(&args.out).with_context(|| format!("writing under {}", args.out.display()))?;
    for path in written {
        println!("{}", path.display());
    }
    Ok(())
}
