//! `seckill reconcile`: rebuilds the Redis admission state from the log
//! (the work is `seckill_analytics::reconcile`, safe while the platform
//! runs); prints one row per voucher, then what differed in each voucher
//! it corrected (or, with `--dry-run`, which only reports, would correct),
//! then a line per draw rebuilt and per waiting room (kept, rebuilt from the
//! log, or started over empty: `seckill_gate::RoomRestored`).

use std::path::PathBuf;

use crate::tool_config::ToolConfig;
use anyhow::Context;
use clap::Args;
use seckill_analytics::reconcile::{reconcile, Mode};
use seckill_core::config;
use seckill_gate::{DrawRestored, Gate};

/// Flags of `seckill reconcile`.
#[derive(Debug, Args)]
pub(crate) struct ReconcileArgs {
    /// The ingress's TOML config (Redis and Kafka sections); `SECKILL_*`
    /// environment variables override it.
    #[arg(long, env = "SECKILL_CONFIG")]
    config: Option<PathBuf>,
    /// Report what would change without writing anything.
    #[arg(long)]
    dry_run: bool,
}

pub(crate) async fn run(args: ReconcileArgs) -> anyhow::Result<()> {
    let config: ToolConfig = config::load(args.config.as_deref()).context("loading the config")?;
    let gate = Gate::connect(&config.redis).await.context("connecting to Redis")?;
    let mode = if args.dry_run { Mode::DryRun } else { Mode::Write };
    let report = reconcile(&gate, &config.kafka, &config.draw, mode, async |_| {}).await.context("reconciling")?;
    println!(
        "Read {} records from the log ({} undecodable, skipped) and {} from the outbox.",
        report.log_records, report.undecodable, report.outbox_records
    );
    println!("{:<38} {:>10} {:>21} {:>13}  action", "voucher", "stock", "remaining", "users fixed");
    for voucher in &report.vouchers {
        let action = if voucher.changed() && args.dry_run {
            format!("would be {}", voucher.action())
        } else {
            voucher.action().to_owned()
        };
        let shown = |remaining: Option<u64>| remaining.map_or_else(|| "-".to_owned(), |r| r.to_string());
        println!(
            "{:<38} {:>10} {:>21} {:>13}  {action}",
            voucher.voucher_id.to_string(),
            voucher.stock,
            format!("{} → {}", shown(voucher.outcome.remaining_before), shown(voucher.outcome.remaining_after)),
            voucher.outcome.users_fixed
        );
    }
    for voucher in &report.vouchers {
        if let Some(line) = differences_line(&voucher.outcome.differences, args.dry_run) {
            println!("{}: {line}", voucher.voucher_id);
        }
    }
    for voucher in &report.vouchers {
        if let Some(line) = voucher.outcome.draw.and_then(draw_line) {
            println!("{}: {line}", voucher.voucher_id);
        }
        // Every waiting room: kept, rebuilt, or started over, with its counts.
        if let Some(room) = voucher.outcome.room {
            println!("{}: {room}", voucher.voucher_id);
        }
    }
    let verb = if args.dry_run { "would change" } else { "changed" };
    println!("{} vouchers in the log; {} {verb}.", report.vouchers.len(), report.changed());
    Ok(())
}

/// What differed between Redis and the log in a voucher corrected (or to
/// be corrected), as `restore.lua` names it (None: nothing differed, or
/// the voucher was missing or expired, which its action says).
fn differences_line(differences: &[String], dry_run: bool) -> Option<String> {
    if differences.is_empty() {
        return None;
    }
    let verb = if dry_run { "differs from the log in" } else { "differed from the log in" };
    Some(format!("Redis {verb}: {}", differences.join("; ")))
}

/// What was done to a draw Redis had lost (None: kept, or opened new as
/// at the voucher's creation).
fn draw_line(restored: DrawRestored) -> Option<String> {
    match restored {
        DrawRestored::Kept | DrawRestored::Opened => None,
        DrawRestored::RebuiltWithGaps { stage, entries, missing } => Some(format!(
            "draw rebuilt from a log with gaps at stage {stage}: the {entries} entries it names kept, {missing} \
             missing from it (draw verify reports the gap)"
        )),
        DrawRestored::Rebuilt { stage, entries, wins, wins_used, new_seed } => {
            let seed = if new_seed {
                "; its seed was lost before the reveal: a new one, whose commitment the ingresses log \
                 (draw verify will report two)"
            } else {
                ""
            };
            Some(format!(
                "draw rebuilt from the log at stage {stage}: {entries} entries, {wins} wins given, {wins_used} spent{seed}"
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_correction_says_what_differs() {
        let differences = ["the expiry of voucher (none) → 1700003600000".to_owned(), "limit 9 → 1".to_owned()];
        assert_eq!(
            differences_line(&differences, true).as_deref(),
            Some("Redis differs from the log in: the expiry of voucher (none) → 1700003600000; limit 9 → 1")
        );
        assert_eq!(
            differences_line(&differences[1..], false).as_deref(),
            Some("Redis differed from the log in: limit 9 → 1")
        );
        assert_eq!(differences_line(&[], true), None);
    }
}
