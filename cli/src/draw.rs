//! `seckill draw verify`: whether a draw was made as its log says it must
//! be, recomputed from the log alone: from the topics (read as `seckill
//! audit` reads them), or from a JSON Lines copy as `seckill replay` writes
//! it, so anyone handed the file can check it. The checks are
//! `seckill_analytics::draw`'s; this file maps flags (`verdict.rs` prints the
//! verdict and sets the exit status).

use std::io::IsTerminal;
use std::path::PathBuf;

use crate::tool_config::ToolConfig;
use anyhow::Context;
use clap::{Args, Subcommand};
use seckill_analytics::draw::{read_file, read_kafka, verify, DrawVerification};
use seckill_core::config;
use seckill_core::VoucherId;

/// Flags of `seckill draw`.
#[derive(Debug, Args)]
pub(crate) struct DrawArgs {
    #[command(subcommand)]
    action: Action,
}

#[derive(Debug, Subcommand)]
enum Action {
    /// Recomputes a draw's ranking from the log alone and checks it against
    /// the logged one, with the seed's commitment, the entries, the winners,
    /// the promotions and every order: PASS, or FAIL (exit status 1) with
    /// what differs.
    Verify(VerifyArgs),
}

/// Flags of `seckill draw verify`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  seckill draw verify --voucher 0192f0c4-7a7e-7cc1-8000-000000000001
  seckill draw verify --voucher ID --config config/ingress.toml --json
  seckill replay --voucher ID --output draw.jsonl && seckill draw verify --voucher ID --from draw.jsonl
  seckill replay --voucher ID | seckill draw verify --voucher ID --from -

Checks: the entries' seqs are 1..N, each once; the seed's SHA-256 was
committed before the first entry and the reveal; the SHA-1 chain over the
entries is the revealed entries hash, and their count the revealed one; the
DrawRanked chunks are the ranking recomputed from the revealed seed and the
entries (else the first rank that differs); winners at most the stock,
promotions to the next rank each time; every order spent its own user's win,
no win twice; the seed revealed at or after draw_at. The rule is in
docs/EVENTS.md (Draws).

Exit status: 0 every check passed, 1 a check failed, 2 the verification
could not run.")]
struct VerifyArgs {
    /// The draw-mode voucher.
    #[arg(long, value_name = "ID")]
    voucher: VoucherId,
    /// Read the log from this JSON Lines file (as `seckill replay` writes
    /// it; `-` for standard input) instead of Kafka.
    #[arg(long, value_name = "FILE")]
    from: Option<PathBuf>,
    /// Print one JSON object (stable snake_case fields) instead of text.
    #[arg(long)]
    json: bool,
    /// A TOML config with the `[kafka]` section (the ingress's will do);
    /// `SECKILL_*` environment variables override it. Not read with --from.
    #[arg(long, env = "SECKILL_CONFIG")]
    config: Option<PathBuf>,
}

pub(crate) async fn run(args: DrawArgs) -> anyhow::Result<()> {
    match args.action {
        Action::Verify(args) => run_verify(args).await,
    }
}

async fn run_verify(args: VerifyArgs) -> anyhow::Result<()> {
    // No verification (exit 2): the log unreachable or unreadable, no such
    // voucher, not a draw.
    crate::verdict::conclude(verification(&args).await, args.json, "verification")
}

async fn verification(args: &VerifyArgs) -> anyhow::Result<DrawVerification> {
    let voucher = args.voucher;
    let read = match &args.from {
        Some(path) => {
            let path = path.clone();
            tokio::task::spawn_blocking(move || read_file(&path, voucher)).await.context("reading the file")??
        }
        None => {
            let config: ToolConfig = config::load(args.config.as_deref()).context("loading the config")?;
            read_kafka(&config.kafka, voucher, std::io::stderr().is_terminal())
                .await
                .context("reading the sales and orders topics")?
        }
    };
    Ok(verify(&read.log)?.read_from(read.source))
}

#[cfg(test)]
mod tests {
    use clap::Parser;
    use seckill_analytics::draw::Stage;

    use super::*;
    use crate::verdict::exit_status;

    fn verification(pass: bool) -> DrawVerification {
        DrawVerification {
            voucher_id: VoucherId::generate(),
            pass,
            stage: Stage::Entering,
            entries: 0,
            winners: None,
            promoted: 0,
            wins_used: 0,
            checks: Vec::new(),
            verify_ms: 0.0,
            source: None,
        }
    }

    #[test]
    fn failures_and_errors_have_their_own_exit_status() {
        assert_eq!(exit_status(Some(&verification(true))), 0);
        assert_eq!(exit_status(Some(&verification(false))), 1);
        assert_eq!(exit_status::<DrawVerification>(None), 2);
    }

    #[test]
    fn verify_takes_a_voucher_and_optionally_a_file() {
        let voucher = VoucherId::generate().to_string();
        let cli =
            crate::Cli::try_parse_from(["seckill", "draw", "verify", "--voucher", &voucher, "--from", "-", "--json"])
                .expect("parses");
        let crate::Command::Draw(DrawArgs { action: Action::Verify(args) }) = cli.command else {
            panic!("not draw verify: {cli:?}");
        };
        assert_eq!((args.voucher.to_string(), args.from, args.json), (voucher, Some(PathBuf::from("-")), true));
        assert!(crate::Cli::try_parse_from(["seckill", "draw", "verify"]).is_err(), "the voucher is required");
    }
}
