//! The cost for bots, both sides of it: what a proof of work costs the
//! client that solves it, and what checking one costs the order route.
//!
//! The server's side is measured apart from the client's: the proofs are
//! fetched and solved before the timed phase ([`prepare`]), so the timed
//! orders ([`order_rate`]) carry only the ingress's verification (the
//! signature, the expiry, one SHA-256) and `admit.lua` spending the
//! challenge, against the same orders without a proof on a voucher that
//! asks for none.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use futures::stream::{self, StreamExt};
use seckill_core::challenge;
use seckill_core::{UserId, VoucherId};
use serde_json::{json, Value};

use super::quantiles;

/// One order to send: its user's token and, when the voucher asks for
/// one, a solved challenge.
#[derive(Clone, Debug)]
struct Order {
    token: String,
    proof: Option<(String, String)>,
}

/// Solves `count` challenges of `bits` one after another on this thread,
/// as one client core would, and reports each solve's time and the hash
/// rate (JSON).
pub(crate) fn solve_time(bits: u32, count: usize) -> Value {
    let key = uuid::Uuid::new_v4().into_bytes();
    let voucher = VoucherId::generate();
    let expires_ms = chrono::Utc::now().timestamp_millis() + 3_600_000;
    let mut times = Vec::with_capacity(count);
    let mut hashes: u64 = 0;
    let started = Instant::now();
    for index in 0..count {
        // A real challenge (its length decides the hashing work per attempt).
        let user = UserId::parse(&format!("solver-{index}")).expect("a valid user id");
        let issued = challenge::issue(&key, voucher, &user, expires_ms, bits);
        let solving = Instant::now();
        let solution = challenge::solve(&issued, bits);
        times.push(solving.elapsed().as_secs_f64() * 1e3);
        // `solve` counts up from 0: the solution is the attempts made less one.
        hashes += solution.parse::<u64>().expect("a decimal solution") + 1;
    }
    let seconds = started.elapsed().as_secs_f64();
    let mean = times.iter().sum::<f64>() / times.len().max(1) as f64;
    json!({
        "bits": bits,
        "solves": count,
        "solve_ms": quantiles(times),
        "mean_ms": mean,
        "hashes": hashes,
        "hashes_per_s": hashes as f64 / seconds.max(1e-9),
        "expected_hashes": 2f64.powi(bits as i32),
        "challenge_length": challenge::issue(&key, voucher, &UserId::parse("solver-0").expect("valid"), expires_ms, bits).len(),
    })
}

/// Fetches one challenge per order (`count` orders, the tokens' users in
/// turn), solves them on every core, and writes `token<TAB>challenge<TAB>
/// solution` lines to `out`; reports the fetch and the solving (JSON).
pub(crate) async fn prepare(
    url: &str,
    voucher: &str,
    tokens: &[String],
    count: usize,
    out: &Path,
    concurrency: usize,
) -> anyhow::Result<Value> {
    anyhow::ensure!(!tokens.is_empty(), "no tokens");
    let client = reqwest::Client::builder().pool_max_idle_per_host(concurrency).build()?;
    let endpoint = format!("{url}/api/v1/vouchers/{voucher}/challenge");
    let fetching = Instant::now();
    let fetched: Vec<anyhow::Result<(String, String, u32)>> = stream::iter(0..count)
        .map(|index| {
            let token = tokens[index % tokens.len()].clone();
            let request = client.get(endpoint.clone()).bearer_auth(&token);
            async move {
                let response = request.send().await?;
                anyhow::ensure!(response.status().is_success(), "GET …/challenge answered {}", response.status());
                let body: Value = response.json().await?;
                anyhow::ensure!(body["required"] == true, "the voucher asks for no proof: {body}");
                let issued = body["challenge"].as_str().unwrap_or_default().to_owned();
                let bits = body["bits"].as_u64().unwrap_or_default() as u32;
                Ok((token, issued, bits))
            }
        })
        .buffer_unordered(concurrency.max(1))
        .collect()
        .await;
    let fetch_seconds = fetching.elapsed().as_secs_f64();
    let fetched: Vec<(String, String, u32)> = fetched.into_iter().collect::<anyhow::Result<_>>()?;
    let mut by_bits: BTreeMap<u32, usize> = BTreeMap::new();
    for (_, _, bits) in &fetched {
        *by_bits.entry(*bits).or_default() += 1;
    }

    let solving = Instant::now();
    let threads = std::thread::available_parallelism().map_or(1, usize::from);
    let chunk = fetched.len().div_ceil(threads).max(1);
    let solved: Vec<String> = std::thread::scope(|scope| {
        let workers: Vec<_> = fetched
            .chunks(chunk)
            .map(|part| {
                scope.spawn(move || {
                    part.iter()
                        .map(|(token, issued, bits)| format!("{token}\t{issued}\t{}", challenge::solve(issued, *bits)))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        workers.into_iter().flat_map(|worker| worker.join().expect("a solver thread")).collect()
    });
    let solve_seconds = solving.elapsed().as_secs_f64();
    std::fs::write(out, solved.join("\n") + "\n")?;
    Ok(json!({
        "challenges": fetched.len(),
        "fetch_seconds": fetch_seconds,
        "fetched_per_s": fetched.len() as f64 / fetch_seconds.max(1e-9),
        "bits": by_bits,
        "solve_threads": threads,
        "solve_seconds": solve_seconds,
    }))
}

/// Places `count` orders, `concurrency` at a time on as many keep-alive
/// connections: the users of `tokens` in turn, or each `proofs` line with
/// its solved challenge. Reports the rate and the answers (JSON).
pub(crate) async fn order_rate(
    url: &str,
    voucher: &str,
    lines: &[String],
    with_proofs: bool,
    count: usize,
    concurrency: usize,
) -> anyhow::Result<Value> {
    anyhow::ensure!(!lines.is_empty(), "nothing to order with");
    let orders: Vec<Order> = lines
        .iter()
        .map(|line| {
            if with_proofs {
                let mut fields = line.split('\t');
                let (Some(token), Some(issued), Some(solution)) = (fields.next(), fields.next(), fields.next()) else {
                    anyhow::bail!("a proofs line is not token<TAB>challenge<TAB>solution");
                };
                Ok(Order { token: token.to_owned(), proof: Some((issued.to_owned(), solution.to_owned())) })
            } else {
                Ok(Order { token: line.clone(), proof: None })
            }
        })
        .collect::<anyhow::Result<_>>()?;
    // A challenge pays for one order: never more orders than proofs.
    anyhow::ensure!(!with_proofs || count <= orders.len(), "{count} orders but {} proofs", orders.len());
    let client =
        reqwest::Client::builder().pool_max_idle_per_host(concurrency).timeout(Duration::from_secs(60)).build()?;
    let endpoint = format!("{url}/api/v1/vouchers/{voucher}/orders");
    let started = Instant::now();
    let answers: Vec<(u16, Option<String>, f64)> = stream::iter(0..count)
        .map(|index| {
            let order = &orders[index % orders.len()];
            let mut request = client.post(endpoint.clone()).bearer_auth(&order.token);
            if let Some((issued, solution)) = &order.proof {
                request = request.header("seckill-challenge", issued).header("seckill-solution", solution);
            }
            async move {
                let sent = Instant::now();
                let Ok(response) = request.send().await else { return (0, None, 0.0) };
                let status = response.status().as_u16();
                let body: Option<Value> = response.json().await.ok();
                let error =
                    (status != 202).then(|| body.and_then(|b| b["error"].as_str().map(str::to_owned))).flatten();
                (status, error, sent.elapsed().as_secs_f64() * 1e3)
            }
        })
        .buffer_unordered(concurrency.max(1))
        .collect()
        .await;
    let seconds = started.elapsed().as_secs_f64();
    let mut statuses: BTreeMap<String, usize> = BTreeMap::new();
    let mut errors: BTreeMap<String, usize> = BTreeMap::new();
    for (status, error, _) in &answers {
        *statuses.entry(status.to_string()).or_default() += 1;
        if let Some(error) = error {
            *errors.entry(error.clone()).or_default() += 1;
        }
    }
    let admitted = statuses.get("202").copied().unwrap_or(0);
    Ok(json!({
        "orders": count,
        "with_proofs": with_proofs,
        "concurrency": concurrency,
        "elapsed_s": seconds,
        "requests_per_s": count as f64 / seconds.max(1e-9),
        "admitted": admitted,
        "admitted_per_s": admitted as f64 / seconds.max(1e-9),
        "statuses": statuses,
        "errors": errors,
        "latency_ms": quantiles(answers.iter().map(|(_, _, ms)| *ms).collect()),
    }))
}
