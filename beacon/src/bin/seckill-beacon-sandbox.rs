//! The beacon sandbox as a process of its own (`seckill_beacon::sandbox`).
//!
//! ```text
//! seckill-beacon-sandbox [--listen 127.0.0.1:8099] [--period 3] [--genesis UNIX_SECONDS] [--key-seed TEXT]
//! ```
//!
//! Prints its chain (`/info`'s JSON) on one line once it listens, and
//! serves until SIGINT or SIGTERM. The genesis defaults to the start time
//! (round 1 then), the key seed to a fixed sandbox one.

use std::net::SocketAddr;

use seckill_beacon::sandbox::{bind, serve, Beacon, Signer, DEFAULT_KEY_SEED};
use tokio_util::sync::CancellationToken;

const USAGE: &str =
    "usage: seckill-beacon-sandbox [--listen ADDR] [--period SECONDS] [--genesis UNIX_SECONDS] [--key-seed TEXT]";

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut listen: SocketAddr = "127.0.0.1:8099".parse()?;
    let mut period = 3u32;
    let mut genesis = chrono::Utc::now().timestamp();
    let mut seed = String::from(DEFAULT_KEY_SEED);
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().ok_or(USAGE)?;
        match flag.as_str() {
            "--listen" => listen = value.parse()?,
            "--period" => period = value.parse()?,
            "--genesis" => genesis = value.parse()?,
            "--key-seed" => seed = value,
            _ => return Err(USAGE.into()),
        }
    }
    if !(1..=3600).contains(&period) {
        return Err("--period must be 1 to 3600".into());
    }
    let beacon = Beacon::new(Signer::from_seed(seed.as_bytes()), genesis, period);
    let (addr, listener) = bind(listen).await?;
    println!("{}", serde_json::to_string(beacon.chain())?);
    eprintln!("Beacon sandbox listening on {addr}.");
    let shutdown = CancellationToken::new();
    let signalled = shutdown.clone();
    tokio::spawn(async move {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = async { match term.as_mut() { Some(term) => { term.recv().await; } None => std::future::pending().await } } => {}
        }
        signalled.cancel();
    });
    serve(beacon, listener, shutdown).await;
    Ok(())
}
