//! `live-probe`: the read side's load for `bench/run`: places orders and
//! keeps their tokens, parks thousands of long-polls and measures how fast
//! the decisions wake them, and holds thousands of event streams open.
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
//! ```

mod orders;
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
}

/// HTTP/2 clients, each its own connection.
fn h2_clients(requests: usize, timeout: Duration) -> anyhow::Result<Vec<reqwest::Client>> {
    (0..requests.div_ceil(STREAMS_PER_CONNECTION).max(1))
        .map(|_| Ok(reqwest::Client::builder().http2_prior_knowledge().timeout(timeout).build()?))
        .collect()
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
    };
    println!("{report}");
    Ok(())
}
