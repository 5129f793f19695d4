//! `seckill token USER`: a signed user token, as the platform's login
//! service would issue it, for curl, scripts and load tests.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use seckill_auth::{Claims, JwtKey, MIN_SECRET_BYTES};
use seckill_core::UserId;

use crate::secrets::{given_or_stored, JWT_SECRET_FILE};

/// Flags of `seckill token`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  # Against the local run (the secret comes from .seckill/jwt-secret):
  curl -s -X POST $base/api/v1/vouchers/$voucher/orders -H \"authorization: Bearer $(seckill token alice)\"
  # Against a deployment:
  SECKILL_AUTH__JWT_SECRET=... seckill token alice --ttl-seconds 600
  # Tokens for 10,000 users storm-0 ... storm-9999, one per line (for wrk, JMeter):
  seckill token storm- --count 10000 > tokens.txt")]
pub(crate) struct TokenArgs {
    /// The user the token speaks for (its `sub`); with --count, the prefix
    /// of the users' ids.
    user: String,
    /// Print tokens for this many users, `<user>0` to `<user><count-1>`,
    /// one per line.
    #[arg(long)]
    count: Option<u32>,
    /// How long the token is valid.
    #[arg(long, default_value_t = 3600)]
    ttl_seconds: i64,
    /// The HS256 secret the ingress verifies tokens with.
    #[arg(long, env = "SECKILL_AUTH__JWT_SECRET", hide_env_values = true)]
    secret: Option<String>,
    /// Where `seckill dev` keeps its data (and its secret).
    #[arg(long, default_value = ".seckill")]
    data_dir: PathBuf,
}

pub(crate) fn run(args: TokenArgs) -> anyhow::Result<()> {
    let user = UserId::parse(&args.user).context("the user id")?;
    anyhow::ensure!((1..=31 * 24 * 3600).contains(&args.ttl_seconds), "--ttl-seconds must be 1 to 2678400");
    let secret = given_or_stored(args.secret, &args.data_dir.join(JWT_SECRET_FILE), "JWT secret", "--secret")?;
    anyhow::ensure!(
        secret.expose().len() >= MIN_SECRET_BYTES,
        "the JWT secret must be at least {MIN_SECRET_BYTES} bytes"
    );
    let now = chrono::Utc::now().timestamp();
    let token = JwtKey::new(&secret).issue(&Claims::for_user(&user, now, args.ttl_seconds));
    crate::output::emit(&format!("{token}\n"))?;
    Ok(())
}
