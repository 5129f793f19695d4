//! `live-probe`: the read side's load for `bench/run`: places orders and
//! keeps their tokens, parks thousands of long-polls and measures how fast
//! the decisions wake them, holds thousands of event streams open, pays
//! orders through the payment provider's sandbox, signs webhook requests
//! for `wrk`, enters a crowd in a draw and times the draw, and measures
//! proofs of work on both sides (the client's solving, the order route's
//! checking).
//!
//! Long-polls and streams go over HTTP/2 (cleartext, prior knowledge), at
//! most [`STREAMS_PER_CONNECTION`] per connection, as browsers behind a TLS
//! load balancer would send them: twenty thousand HTTP/1.1 connections would
//! not fit one process's file descriptors here.
//!
//! ```text
//! live-probe place   --url URL --voucher ID --tokens FILE --out FILE
//! live-probe waiters --url URL --brokers HOST:PORT --orders-topic T --orders FILE --ready FILE
//! live-probe streams --url URL --tokens FILE --ready FILE --hold-seconds 10
//! live-probe payments --url URL --sandbox URL --orders FILE --concurrency 64
//! live-probe sign-webhooks --secret whsec_sandbox --count N --out FILE
//! live-probe queue   --url URL --voucher ID --begins-at T --tokens FILE --streams N --late N --ready FILE
//! live-probe draw    --url URL --voucher ID --draw-at T --brokers HOST:PORT --sales-topic T --tokens FILE
//!                    --entered FILE --drawing FILE
//! live-probe solve-time --bits 16 --count 200
//! live-probe challenges --url URL --voucher ID --tokens FILE --count N --out FILE
//! live-probe order-rate --url URL --voucher ID (--tokens FILE | --proofs FILE) --count N
//! ```

mod challenge;
mod draw;
mod orders;
mod payments;
mod queue;
mod signed;
mod streams;
mod waiters;

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};

/// Requests one HTTP/2 connection carries at once (the ingress allows 200).
const STREAMS_PER_CONNECTION: usize = 150;

#[derive(Debug, Parser)]
#[command(about = "The read side's load for bench/run")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Places one order per token; writes `token order_id` per admitted one.
    Place {
        #[arg(long)]
        url: String,
        #[arg(long)]
        voucher: String,
        #[arg(long)]
        tokens: PathBuf,
        #[arg(long)]
        out: PathBuf,
        #[arg(long, default_value_t = 64)]
        concurrency: usize,
    },
    /// Parks a long-poll on every order of the file, signals readiness once
    /// the ingress counts them all waiting, and reports how fast the
    /// decisions answered them (JSON on stdout).
    Waiters {
        #[arg(long)]
        url: String,
        /// The broker, to see each decision arrive in the log.
        #[arg(long)]
        brokers: String,
        /// The orders topic (`<prefix>.orders`).
        #[arg(long)]
        orders_topic: String,
        #[arg(long)]
        orders: PathBuf,
        #[arg(long)]
        ready: PathBuf,
        #[arg(long, default_value_t = 30)]
        wait_seconds: u64,
    },
    /// Opens each token's user stream, signals readiness once all are open,
    /// holds them, and reports (JSON on stdout).
    Streams {
        #[arg(long)]
        url: String,
        #[arg(long)]
        tokens: PathBuf,
        #[arg(long)]
        ready: PathBuf,
        #[arg(long, default_value_t = 10)]
        hold_seconds: u64,
    },
    /// Pays every order of the file (`token order_id` lines) through the
    /// provider's sandbox and reports how long after each payment its owner
    /// saw it PAID (JSON on stdout).
    Payments {
        #[arg(long)]
        url: String,
        /// The sandbox's base URL (`seckill serve payments`).
        #[arg(long)]
        sandbox: String,
        #[arg(long)]
        orders: PathBuf,
        #[arg(long, default_value_t = 64)]
        concurrency: usize,
        /// Longest an order may take from its payment to PAID.
        #[arg(long, default_value_t = 120)]
        wait_seconds: u64,
    },
    /// Puts every token's user in a queue-mode sale's waiting room before
    /// its start (the last `late` after it), holds `streams` place streams,
    /// buys on each turn, and reports (JSON on stdout).
    Queue {
        #[arg(long)]
        url: String,
        #[arg(long)]
        voucher: String,
        /// The sale's `begins_at` (RFC 3339).
        #[arg(long)]
        begins_at: chrono::DateTime<chrono::Utc>,
        #[arg(long)]
        tokens: PathBuf,
        #[arg(long)]
        streams: usize,
        #[arg(long, default_value_t = 0)]
        late: usize,
        #[arg(long, default_value_t = 256)]
        concurrency: usize,
        /// Written once every stream is open.
        #[arg(long)]
        ready: PathBuf,
        #[arg(long, default_value_t = 120)]
        settle_seconds: u64,
    },
    /// Enters every token's user in a draw before its `draw_at` (writing
    /// `entered` then), parks some entrants' long-polls on their outcome
    /// (writing `drawing` a second before `draw_at`), follows the sales
    /// topic until the winners are selected, and reports (JSON on stdout).
    Draw {
        #[arg(long)]
        url: String,
        #[arg(long)]
        voucher: String,
        /// The voucher's `draw_at` (RFC 3339).
        #[arg(long)]
        draw_at: chrono::DateTime<chrono::Utc>,
        /// The broker, to see the draw's records arrive in the log.
        #[arg(long)]
        brokers: String,
        /// The sales topic (`<prefix>.sales`).
        #[arg(long)]
        sales_topic: String,
        #[arg(long)]
        tokens: PathBuf,
        #[arg(long, default_value_t = 256)]
        concurrency: usize,
        /// Entrants (spread over the tokens) who long-poll their outcome.
        #[arg(long, default_value_t = 1_000)]
        waiters: usize,
        #[arg(long)]
        entered: PathBuf,
        #[arg(long)]
        drawing: PathBuf,
        #[arg(long, default_value_t = 120)]
        settle_seconds: u64,
    },
    /// Solves `count` challenges of `bits` one after another on one core
    /// and reports each solve's time and the hash rate (JSON on stdout).
    SolveTime {
        #[arg(long, default_value_t = 16)]
        bits: u32,
        #[arg(long, default_value_t = 200)]
        count: usize,
    },
    /// Fetches a challenge of a voucher per order (the tokens' users in
    /// turn), solves them all on every core and writes
    /// `token<TAB>challenge<TAB>solution` lines, for `order-rate --proofs`.
    Challenges {
        #[arg(long)]
        url: String,
        #[arg(long)]
        voucher: String,
        #[arg(long)]
        tokens: PathBuf,
        #[arg(long)]
        count: usize,
        #[arg(long)]
        out: PathBuf,
        #[arg(long, default_value_t = 64)]
        concurrency: usize,
    },
    /// Places `count` orders on a voucher, `concurrency` at a time on as
    /// many keep-alive HTTP/1.1 connections (like `seckill loadgen`), with
    /// the tokens' users in turn or each proof's user and solved challenge;
    /// reports the rate (JSON on stdout).
    OrderRate {
        #[arg(long)]
        url: String,
        #[arg(long)]
        voucher: String,
        #[arg(long, conflicts_with = "proofs", required_unless_present = "proofs")]
        tokens: Option<PathBuf>,
        /// Lines of `challenges --out`: each pays for one order.
        #[arg(long)]
        proofs: Option<PathBuf>,
        #[arg(long)]
        count: usize,
        #[arg(long, default_value_t = 64)]
        concurrency: usize,
    },
    /// Writes `count` signed `payment_intent.created` callbacks, one
    /// `SIGNATURE<TAB>BODY` per line, for `bench/wrk/webhook.lua`.
    SignWebhooks {
        #[arg(long)]
        secret: String,
        #[arg(long)]
        count: usize,
        #[arg(long)]
        out: PathBuf,
    },
}

/// HTTP/2 clients, each its own connection.
fn h2_clients(requests: usize, timeout: Duration) -> anyhow::Result<Vec<reqwest::Client>> {
    (0..requests.div_ceil(STREAMS_PER_CONNECTION).max(1))
        .map(|_| Ok(reqwest::Client::builder().http2_prior_knowledge().timeout(timeout).build()?))
        .collect()
}

/// Count, p50, p90, p99 and max of `values`.
fn quantiles(mut values: Vec<f64>) -> serde_json::Value {
    values.sort_by(f64::total_cmp);
    let at = |q: f64| values.get(((values.len() as f64 - 1.0) * q).round() as usize).copied().unwrap_or(0.0);
    serde_json::json!({ "count": values.len(), "p50": at(0.5), "p90": at(0.9), "p99": at(0.99), "max": at(1.0) })
}

/// The non-empty lines of `path`.
fn lines(path: &std::path::Path) -> anyhow::Result<Vec<String>> {
    let text = std::fs::read_to_string(path)?;
    Ok(text.lines().filter(|line| !line.trim().is_empty()).map(str::to_owned).collect())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let report = match Cli::parse().command {
        Command::Place { url, voucher, tokens, out, concurrency } => {
            orders::place(&url, &voucher, &lines(&tokens)?, &out, concurrency).await?
        }
        Command::Waiters { url, brokers, orders_topic, orders, ready, wait_seconds } => {
            let log = waiters::Log { brokers, topic: orders_topic };
            waiters::run(&url, &log, &lines(&orders)?, &ready, Duration::from_secs(wait_seconds)).await?
        }
        Command::Streams { url, tokens, ready, hold_seconds } => {
            streams::run(&url, &lines(&tokens)?, &ready, Duration::from_secs(hold_seconds)).await?
        }
        Command::Payments { url, sandbox, orders, concurrency, wait_seconds } => {
            let target = payments::Target { url, sandbox, wait: Duration::from_secs(wait_seconds) };
            payments::run(&target, &lines(&orders)?, concurrency).await?
        }
        Command::SignWebhooks { secret, count, out } => signed::write(&secret, count, &out)?,
        Command::Queue { url, voucher, begins_at, tokens, streams, late, concurrency, ready, settle_seconds } => {
            let settle = Duration::from_secs(settle_seconds);
            let crowd = queue::Crowd { url, voucher, begins_at, streams, late, concurrency, settle };
            queue::run(&crowd, &lines(&tokens)?, &ready).await?
        }
        Command::Draw {
            url,
            voucher,
            draw_at,
            brokers,
            sales_topic,
            tokens,
            concurrency,
            waiters,
            entered,
            drawing,
            settle_seconds,
        } => {
            let settle = Duration::from_secs(settle_seconds);
            let target = draw::Draw { url, voucher, draw_at, brokers, sales_topic, concurrency, waiters, settle };
            draw::run(&target, &lines(&tokens)?, &entered, &drawing).await?
        }
        Command::SolveTime { bits, count } => challenge::solve_time(bits, count),
        Command::Challenges { url, voucher, tokens, count, out, concurrency } => {
            challenge::prepare(&url, &voucher, &lines(&tokens)?, count, &out, concurrency).await?
        }
        Command::OrderRate { url, voucher, tokens, proofs, count, concurrency } => {
            let (file, with_proofs) = match (tokens, proofs) {
                (_, Some(proofs)) => (proofs, true),
                (Some(tokens), None) => (tokens, false),
                (None, None) => anyhow::bail!("--tokens or --proofs"),
            };
            challenge::order_rate(&url, &voucher, &lines(&file)?, with_proofs, count, concurrency).await?
        }
    };
    println!("{report}");
    Ok(())
}
