//! `seckill loadgen`: drives a flash sale over HTTP and prints one report.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use seckill_auth::JwtKey;
use seckill_loadgen::{Checks, Credentials, Pacing, Plan};

use crate::secrets::{given_or_stored, ADMIN_TOKEN_FILE, JWT_SECRET_FILE};

/// Flags of `seckill loadgen`.
#[derive(Debug, Args)]
#[command(after_help = "Users send HS256 tokens signed with --jwt-secret; the admin token creates the
voucher. Against the local run (`seckill dev`) both come from its data directory.

Examples:
  # 50,000 users racing for 10 units over 256 keep-alive connections:
  seckill loadgen --stock 10 --requests 50000 --users 50000 --connections 256
  # Open loop at 2,000 requests/s (latency measured from the schedule), one request
  # per user (request i comes from user i mod --users: fewer users than requests
  # order again, and over the limit are refused duplicate_order), with the Redis
  # and persistent stock compared at the end (the local run's ports):
  seckill loadgen --stock 100000 --requests 20000 --users 20000 --rate 2000 \\
    --processor-url http://127.0.0.1:8081 --redis-url redis://127.0.0.1:16379/
  # Machines:
  seckill loadgen --requests 5000 --json | jq .invariants.passed")]
pub(crate) struct LoadgenArgs {
    /// The ingress's base URL.
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    url: String,
    /// The ingress's admin token (default: the local run's).
    #[arg(long, env = "SECKILL_AUTH__ADMIN_TOKEN", hide_env_values = true)]
    admin_token: Option<String>,
    /// The HS256 secret the ingress verifies user tokens with (default: the
    /// local run's).
    #[arg(long, env = "SECKILL_AUTH__JWT_SECRET", hide_env_values = true)]
    jwt_secret: Option<String>,
    /// Send X-User-Id instead of tokens (a development ingress only).
    #[arg(long, conflicts_with = "jwt_secret")]
    dev_user_header: bool,
    /// Where `seckill dev` keeps its data and secrets.
    #[arg(long, default_value = ".seckill")]
    data_dir: PathBuf,
    /// Units for sale (S).
    #[arg(long, default_value_t = 10)]
    stock: u64,
    /// Most units per user (L).
    #[arg(long, default_value_t = 1)]
    limit: u32,
    /// Buckets to split the voucher's stock into (a hot voucher on a Redis
    /// Cluster; 1 to 64).
    #[arg(long, default_value_t = 1)]
    shards: u32,
    /// Order requests to send (R).
    #[arg(long, default_value_t = 10_000)]
    requests: usize,
    /// Distinct users (U); request i comes from user i mod U.
    #[arg(long, default_value_t = 10_000)]
    users: usize,
    /// Units per order.
    #[arg(long, default_value_t = 1)]
    quantity: u32,
    /// A user's repeated requests carry one Idempotency-Key (retries).
    #[arg(long)]
    idempotency_keys: bool,
    /// Closed loop: connections, each sending its next request when answered.
    #[arg(long, default_value_t = 64, conflicts_with = "rate")]
    connections: usize,
    /// Open loop: requests per second, whatever the answers take.
    #[arg(long)]
    rate: Option<f64>,
    /// Open loop: most requests outstanding at once.
    #[arg(long, default_value_t = 10_000)]
    max_in_flight: usize,
    /// The processor's URL, to compare the persistent stock with Redis.
    #[arg(long)]
    processor_url: Option<String>,
    /// The gate's Redis, to compare its remaining stock.
    #[arg(long, conflicts_with = "redis_cluster_nodes")]
    redis_url: Option<String>,
    /// Or the seed nodes of the gate's Redis Cluster, comma-separated.
    #[arg(long, value_delimiter = ',')]
    redis_cluster_nodes: Vec<String>,
    /// The platform's Redis key prefix.
    #[arg(long, default_value = "seckill")]
    redis_prefix: String,
    /// Poll one admitted order in N from its 202 until its final status is
    /// visible, for the client-side end-to-end latency (0: none).
    #[arg(long, default_value_t = 0)]
    visibility_sample: usize,
    /// Seconds to wait for every admitted order to be final.
    #[arg(long, default_value_t = 60)]
    settle_seconds: u64,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

pub(crate) async fn run(args: LoadgenArgs) -> anyhow::Result<()> {
    let pacing = match args.rate {
        Some(per_second) => Pacing::Open { per_second, max_in_flight: args.max_in_flight },
        None => Pacing::Closed { connections: args.connections },
    };
    let admin_token =
        given_or_stored(args.admin_token, &args.data_dir.join(ADMIN_TOKEN_FILE), "admin token", "--admin-token")?;
    let credentials = if args.dev_user_header {
        Credentials::DevHeader
    } else {
        let file = args.data_dir.join(JWT_SECRET_FILE);
        Credentials::Tokens(JwtKey::new(&given_or_stored(args.jwt_secret, &file, "JWT secret", "--jwt-secret")?))
    };
    let plan = Plan {
        base_url: args.url.trim_end_matches('/').to_owned(),
        admin_token: Some(admin_token.expose().to_owned()),
        credentials,
        stock: args.stock,
        per_user_limit: args.limit,
        shards: args.shards,
        requests: args.requests,
        users: args.users,
        quantity: args.quantity,
        idempotency_keys: args.idempotency_keys,
        pacing,
        user_prefix: format!("load-{}-", chrono::Utc::now().timestamp_millis()),
        settle_timeout: Duration::from_secs(args.settle_seconds),
        visibility_sample: args.visibility_sample,
    };
    let checks = Checks {
        processor_url: args.processor_url,
        redis_url: args.redis_url,
        redis_cluster_nodes: args.redis_cluster_nodes,
        redis_prefix: args.redis_prefix,
    };
    let report = seckill_loadgen::run(&plan, &checks, !args.json).await.context("running the load")?;
    let text = if args.json { format!("{}\n", serde_json::to_string_pretty(&report)?) } else { report.to_string() };
    crate::output::emit(&text)?;
    if !report.invariants.passed {
        anyhow::bail!("the sale's invariants do not hold (see the report)");
    }
    Ok(())
}
