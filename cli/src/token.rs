//! `seckill token USER`: a signed user token, as the platform's login
//! service would issue it, for curl, scripts and load tests.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use seckill_auth::{unix_now, Claims, JwtKey, MIN_SECRET_BYTES};
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

/// Most tokens one call prints (about 200 bytes each, built in memory).
const MAX_COUNT: u32 = 100_000;

pub(crate) fn run(args: TokenArgs) -> anyhow::Result<()> {
    let users = users(&args.user, args.count)?;
    anyhow::ensure!((1..=31 * 24 * 3600).contains(&args.ttl_seconds), "--ttl-seconds must be 1 to 2678400");
    let secret = given_or_stored(args.secret, &args.data_dir.join(JWT_SECRET_FILE), "JWT secret", "--secret")?;
    anyhow::ensure!(
        secret.expose().len() >= MIN_SECRET_BYTES,
        "the JWT secret must be at least {MIN_SECRET_BYTES} bytes"
    );
    let tokens = tokens(&JwtKey::new(&secret), &users, unix_now(), args.ttl_seconds);
    crate::output::emit(&tokens)?;
    Ok(())
}

/// `user` alone, or with a count the users `<user>0` to `<user><count-1>`.
fn users(user: &str, count: Option<u32>) -> anyhow::Result<Vec<UserId>> {
    let Some(count) = count else {
        return Ok(vec![UserId::parse(user).context("the user id")?]);
    };
    anyhow::ensure!((1..=MAX_COUNT).contains(&count), "--count must be 1 to {MAX_COUNT}");
    (0..count)
        .map(|n| {
            let id = format!("{user}{n}");
            UserId::parse(&id).with_context(|| format!("the user id {id:?}"))
        })
        .collect()
}

/// One token per user, a line each.
fn tokens(key: &JwtKey, users: &[UserId], now: i64, ttl_seconds: i64) -> String {
    users.iter().map(|user| key.issue(&Claims::for_user(user, now, ttl_seconds)) + "\n").collect()
}

#[cfg(test)]
mod tests {
    use seckill_auth::JwtRules;
    use seckill_core::config::Secret;

    use super::*;

    #[test]
    fn a_count_prints_one_token_per_numbered_user() {
        let key = JwtKey::new(&Secret::new("0123456789abcdef0123456789abcdef"));
        let users = users("storm-", Some(3)).expect("valid users");
        let printed = tokens(&key, &users, 1_800_000_000, 60);
        let speakers: Vec<String> = printed
            .lines()
            .map(|token| key.verify(token, &JwtRules::default(), 1_800_000_000).expect("verifies").to_string())
            .collect();
        assert_eq!(speakers, ["storm-0", "storm-1", "storm-2"]);
        assert!(printed.ends_with('\n'));
    }

    #[test]
    fn without_a_count_the_user_itself_and_bad_counts_are_refused() {
        let alone = users("alice", None).expect("valid user");
        assert_eq!(alone.iter().map(ToString::to_string).collect::<Vec<_>>(), ["alice"]);
        for count in [0, MAX_COUNT + 1] {
            let error = users("storm-", Some(count)).expect_err("out of range").to_string();
            assert!(error.contains("--count"), "{error}");
        }
        assert!(users("bad user ", Some(2)).is_err(), "ids are checked");
    }
}
