//! `seckill reconcile`: rebuilds the Redis admission state from the log.
//!
//! After Redis lost data (or drifted), the gate's stock and per-user counts
//! are recomputed from the sales and orders topics (the history the
//! persistent stock is derived from) plus the orders still in the outbox,
//! then written back voucher by voucher, each in one MULTI transaction. Run
//! it with the ingresses stopped: an order admitted while it runs would be
//! overwritten (the processor would still refuse to oversell). `--dry-run`
//! only reports, and is safe at any time.

use std::path::PathBuf;

use crate::tool_config::ToolConfig;
use anyhow::Context;
use clap::Args;
use seckill_core::config;
use seckill_core::Envelope;
use seckill_gate::{Gate, Ledger, VoucherAdmission};

/// Most outbox records taken into account.
const MAX_OUTBOX: usize = 10_000_000;

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
    let topics = config.kafka.topics();

    let mut ledger = Ledger::default();
    let brokers = config.kafka.brokers.clone();
    let (ledger_back, read, undecodable) = tokio::task::spawn_blocking(move || {
        let mut undecodable = 0u64;
        let read = seckill_kafka::read_to_end(&brokers, &[&topics.sales, &topics.orders], |message| {
            use seckill_kafka::Message;
            match Envelope::decode(message.payload().unwrap_or_default()) {
                Ok(envelope) => ledger.apply(&envelope),
                Err(_) => undecodable += 1,
            }
        });
        (ledger, read, undecodable)
    })
    .await
    .context("reading the log")?;
    let mut ledger = ledger_back;
    let read = read.context("reading the sales and orders topics")?;
    let outbox = gate.outbox_records(MAX_OUTBOX).await.context("reading the outbox")?;
    for record in &outbox {
        if let Ok(envelope) = Envelope::decode(record) {
            ledger.apply(&envelope);
        }
    }
    println!(
        "Read {read} records from the log ({undecodable} undecodable, skipped) and {} from the outbox.",
        outbox.len()
    );

    let admissions = ledger.admissions();
    println!("{:<38} {:>10} {:>21} {:>13}  action", "voucher", "stock", "remaining", "users fixed");
    let mut changed = 0;
    for state in &admissions {
        let (remaining, users_fixed, action) = describe(&gate, state).await?;
        let differs = action != "unchanged";
        if differs {
            changed += 1;
            if !args.dry_run {
                gate.restore(state).await.with_context(|| format!("restoring voucher {}", state.voucher_id))?;
            }
        }
        let action = if differs && args.dry_run { format!("would be {action}") } else { action.to_owned() };
        println!(
            "{:<38} {:>10} {:>21} {:>13}  {action}",
            state.voucher_id.to_string(),
            state.stock,
            remaining,
            users_fixed
        );
    }
    let verb = if args.dry_run { "would change" } else { "changed" };
    println!("{} vouchers in the log; {changed} {verb}.", admissions.len());
    Ok(())
}

/// How Redis differs from `state`: the remaining column, the number of
/// users whose count is wrong, and what restoring does.
async fn describe(gate: &Gate, state: &VoucherAdmission) -> anyhow::Result<(String, usize, &'static str)> {
    let Some(current) = gate.admission_snapshot(state.voucher_id).await.context("reading Redis")? else {
        return Ok((format!("- → {}", state.remaining), state.bought.len(), "restored (was missing)"));
    };
    let mut users_fixed =
        state.bought.iter().filter(|(user, units)| current.bought.get(user.as_str()) != Some(units)).count();
    users_fixed += current.bought.keys().filter(|user| !state.bought.keys().any(|u| u.as_str() == *user)).count();
    let remaining = format!("{} → {}", current.remaining, state.remaining);
    let same = current.stock == state.stock && current.remaining == state.remaining && users_fixed == 0;
    Ok((remaining, users_fixed, if same { "unchanged" } else { "corrected" }))
}
