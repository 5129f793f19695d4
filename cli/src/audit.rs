//! `seckill audit`: whether a sale's books balance, from the log and,
//! with `--live`, against the view, the persistent stock and Redis, and
//! with `--payments-url`, against the payment provider. The rules (and the
//! provider's calls) are `seckill_analytics::audit`'s; this file maps
//! flags (`verdict.rs` prints the verdict and sets the exit status).

use std::path::PathBuf;
use std::sync::Arc;

use crate::sale_selection::SaleSelection;
use crate::tool_config::ToolConfig;
use anyhow::Context;
use clap::Args;
use seckill_analytics::audit::{audit_voucher_against, Audit, LiveSources, ProviderSource};
use seckill_analytics::sale::read_sales;
use seckill_core::config;
use seckill_web::RemoteView;

/// Flags of `seckill audit`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  seckill audit --voucher 0192f0c4-7a7e-7cc1-8000-000000000001
  seckill audit --voucher ID --live --config config/ingress.toml
  seckill audit --last 1d --json | jq '.vouchers[] | select(.pass | not) | .voucher_id'
  SECKILL_PAYMENTS__API_KEY=sk_... seckill audit --voucher ID --payments-url https://api.stripe.com
  seckill audit                                  # every voucher in the log

Rules (from the log): stock + added stock = units sold + units left; every
acceptance has exactly one decision; every cancellation and confirmation
follows a creation; no user over the per-user limit; units returned by
cancellations = re-sold + still left. For a sale that takes money, also:
every payment paid its order or was refunded exactly once (a refund still
pending fails: audit a quiet platform); no order paid twice, an admin
refund refunds its payment once; orders paid before their pay_by and late
refunds were late; amounts are price × quantity, paid and refunded in
full. With --live also: the view's figures, the persistent stock and Redis
(the gate, counting orders still in the outbox) equal the log's. With
--payments-url also: the provider agrees with the log (each payment, no
succeeded payment missing from the log, the sums per currency); at most 8
provider calls at a time.

Exit status: 0 every rule passed, 1 a rule failed, 2 the audit could not run.")]
pub(crate) struct AuditArgs {
    #[command(flatten)]
    selection: SaleSelection,
    /// Also compare with the running platform: the view (--view-url), the
    /// persistent stock (--processor-url) and Redis (the config's `[redis]`).
    #[arg(long)]
    live: bool,
    /// The projector's query API.
    #[arg(long, default_value = "http://127.0.0.1:8082", value_name = "URL")]
    view_url: String,
    /// The processor's HTTP port (GET /api/v1/stock/{id}).
    #[arg(long, default_value = "http://127.0.0.1:8081", value_name = "URL")]
    processor_url: String,
    /// Also compare sales that take money with the payment provider (a
    /// Stripe-shaped API, e.g. `https://api.stripe.com` or the sandbox).
    #[arg(long, env = "SECKILL_PAYMENTS__BASE_URL", value_name = "URL")]
    payments_url: Option<String>,
    /// The provider's secret API key; prefer the environment variable.
    #[arg(long, env = "SECKILL_PAYMENTS__API_KEY", hide_env_values = true, value_name = "KEY")]
    payments_key: Option<String>,
    /// Print one JSON object (stable snake_case fields) instead of text.
    #[arg(long)]
    json: bool,
    /// A TOML config with the `[kafka]` and `[redis]` sections (the
    /// ingress's will do); `SECKILL_*` environment variables override it.
    #[arg(long, env = "SECKILL_CONFIG")]
    config: Option<PathBuf>,
}

pub(crate) async fn run(args: AuditArgs) -> anyhow::Result<()> {
    crate::verdict::conclude(audit(&args).await, args.json, "audit")
}

/// How often `--live` reads the log and the live stores before a failure
/// stands, and the pause between reads.
const LIVE_READS: u32 = 3;
const LIVE_PAUSE: std::time::Duration = std::time::Duration::from_secs(1);

async fn audit(args: &AuditArgs) -> anyhow::Result<Audit> {
    let config: ToolConfig = config::load(args.config.as_deref()).context("loading the config")?;
    // The log is read first, then each live store, so a running platform
    // can move in between: a hold that expires after the log was read has
    // its unit back in the processor's stock before the log shows the
    // cancellation. A live failure is therefore read again, log first, and
    // stands only when every read finds one; a real divergence persists.
    let mut reads = 1;
    loop {
        let audit = audit_once(args, &config).await?;
        if audit.pass || !args.live || reads == LIVE_READS {
            return Ok(audit);
        }
        tracing::info!(reads, "The live stores disagree with the log; reading both again in case they moved.");
        reads += 1;
        tokio::time::sleep(LIVE_PAUSE).await;
    }
}

async fn audit_once(args: &AuditArgs, config: &ToolConfig) -> anyhow::Result<Audit> {
    let read = read_sales(&config.kafka, &args.selection.selection(usize::MAX))
        .await
        .context("reading the sales and orders topics")?;
    anyhow::ensure!(!read.sales.is_empty(), "no voucher has records in the log within the given bounds");
    let provider = provider(args)?;
    let mut live = if args.live {
        let view = RemoteView::new(&args.view_url).context("the view's URL")?;
        let sources = LiveSources::connect(Arc::new(view), &args.processor_url, &config.redis)
            .await
            .context("connecting to the live stores")?;
        let outbox = sources.outbox().await.context("reading the outbox")?;
        Some((sources, outbox))
    } else {
        None
    };
    let mut vouchers = Vec::with_capacity(read.sales.len());
    for sale in &read.sales {
        let voucher = sale.log.voucher_id;
        let figures = match &mut live {
            Some((sources, outbox)) => {
                let pending = outbox.remove(&voucher).unwrap_or_default();
                let figures =
                    sources.figures(voucher, pending).await.with_context(|| format!("reading voucher {voucher}"))?;
                Some(figures)
            }
            None => None,
        };
        let answers = match &provider {
            Some(provider) => Some(
                provider
                    .figures(&sale.log)
                    .await
                    .with_context(|| format!("asking the payment provider about voucher {voucher}"))?,
            ),
            None => None,
        };
        vouchers.push(audit_voucher_against(&sale.log, figures.as_ref(), answers.as_ref()));
    }
    let audit = Audit::new(vouchers, args.live);
    Ok(if provider.is_some() { audit.against_provider() } else { audit })
}

/// The payment provider the flags name, if they name one; a URL without a
/// key (or a key without a URL) is a mistake, not a quiet skip.
fn provider(args: &AuditArgs) -> anyhow::Result<Option<ProviderSource>> {
    let url = args.payments_url.as_deref().filter(|url| !url.is_empty());
    let key = args.payments_key.as_deref().filter(|key| !key.is_empty());
    match (url, key) {
        (None, None) => Ok(None),
        (Some(url), Some(key)) => ProviderSource::connect(url, key).map(Some).context("the payment provider"),
        (Some(_), None) => anyhow::bail!("--payments-url needs --payments-key (or SECKILL_PAYMENTS__API_KEY)"),
        (None, Some(_)) => anyhow::bail!("--payments-key needs --payments-url (or SECKILL_PAYMENTS__BASE_URL)"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verdict::exit_status;

    #[test]
    fn failures_and_errors_have_their_own_exit_status() {
        assert_eq!(exit_status(Some(&Audit::new(Vec::new(), false))), 0);
        let failed = Audit { pass: false, live: false, provider: false, vouchers: Vec::new() };
        assert_eq!(exit_status(Some(&failed)), 1);
        assert_eq!(exit_status::<Audit>(None), 2);
    }
}
