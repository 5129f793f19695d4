//! A waiting room under a crowd: users join a queue-mode sale in the
//! minute before it starts, some of them keep their place's stream open,
//! more join after the start; at the start the streamers whose turn comes
//! buy with their entry tokens until the stock is gone.
//!
//! Reported: how fast the joins went in, how long after the start the last
//! unit sold, how long after that sale each waiting stream heard `sold_out`
//! (the push latency), and the fairness figures: the rank correlation
//! between arrival and place among the pre-queue (a shuffle: about 0) and
//! among those who joined after the start (first come: 1).

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use futures::stream::{self, StreamExt};
use serde_json::{json, Value};

use super::quantiles;

/// What the probe is pointed at.
#[derive(Debug)]
pub(crate) struct Crowd {
    pub(crate) url: String,
    pub(crate) voucher: String,
    pub(crate) begins_at: DateTime<Utc>,
    /// Users (of the pre-queue) who keep a stream open.
    pub(crate) streams: usize,
    /// Users (the last of the tokens) who join after the start.
    pub(crate) late: usize,
    pub(crate) concurrency: usize,
    /// Longest the sale may take after the start.
    pub(crate) settle: Duration,
}

/// What one stream saw.
#[derive(Debug, Default)]
struct Watched {
    opened: bool,
    place: Option<u64>,
    /// When its order was answered, and how.
    ordered: Option<(Instant, u16)>,
    sold_out_at: Option<Instant>,
    events: usize,
}

/// Joins, holds the streams, buys on each turn; reports JSON.
pub(crate) async fn run(crowd: &Crowd, tokens: &[String], ready: &Path) -> anyhow::Result<Value> {
    anyhow::ensure!(crowd.late < tokens.len(), "more late joiners than tokens");
    let early = tokens.len() - crowd.late;
    let clients = super::h2_clients(crowd.concurrency.max(crowd.streams), Duration::from_secs(3_600))?;
    let client = |index: usize| clients[index % clients.len()].clone();
    let arrivals = Arc::new(AtomicUsize::new(0));
    let join_url = format!("{}/api/v1/vouchers/{}/queue", crowd.url, crowd.voucher);

    // The pre-queue: everyone joins, as fast as the ingress takes them.
    let joining = Instant::now();
    let joins = |range: std::ops::Range<usize>, at_once: usize| {
        let (arrivals, join_url) = (Arc::clone(&arrivals), join_url.clone());
        stream::iter(range)
            .map(move |index| {
                let request = client(index).post(join_url.clone()).bearer_auth(&tokens[index]);
                let arrivals = Arc::clone(&arrivals);
                async move {
                    let response = request.send().await.ok()?;
                    let arrival = arrivals.fetch_add(1, Ordering::SeqCst);
                    let status = response.status().as_u16();
                    let body: Value = response.json().await.ok()?;
                    (status == 201).then_some((index, arrival, body["place"].as_u64()))
                }
            })
            .buffer_unordered(at_once)
            .collect::<Vec<_>>()
    };
    let joined: Vec<(usize, usize, Option<u64>)> =
        joins(0..early, crowd.concurrency).await.into_iter().flatten().collect();
    let join_seconds = joining.elapsed().as_secs_f64();
    eprintln!("    {} of {early} joined in {join_seconds:.1} s", joined.len());
    let mut arrival_of = vec![usize::MAX; tokens.len()];
    for (index, arrival, _) in &joined {
        arrival_of[*index] = *arrival;
    }

    // Every k-th of the pre-queue keeps its place's stream open.
    let step = (early / crowd.streams.max(1)).max(1);
    let watchers: Vec<usize> = (0..early).step_by(step).take(crowd.streams).collect();
    let opened = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<tokio::task::JoinHandle<Watched>> = watchers
        .iter()
        .map(|&index| {
            let (client, token, opened) = (client(index), tokens[index].clone(), Arc::clone(&opened));
            let (url, voucher, settle) = (crowd.url.clone(), crowd.voucher.clone(), crowd.settle);
            tokio::spawn(async move {
                let watched = watch(&client, &url, &voucher, &token, &opened);
                tokio::time::timeout(settle + Duration::from_secs(120), watched).await.unwrap_or_default()
            })
        })
        .collect();
    let opening = Instant::now();
    while opened.load(Ordering::SeqCst) < watchers.len() && opening.elapsed() < Duration::from_secs(120) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    eprintln!("    {} streams open after {:.1} s", opened.load(Ordering::SeqCst), opening.elapsed().as_secs_f64());
    std::fs::write(ready, b"ready\n")?;
    let before_start = (crowd.begins_at - Utc::now()).to_std().unwrap_or_default();
    anyhow::ensure!(!before_start.is_zero(), "the pre-queue was not in before the start: give it more time");
    let start = Instant::now() + before_start;
    tokio::time::sleep_until(start.into()).await;

    // After the start: first come, first placed.
    tokio::time::sleep(Duration::from_millis(500)).await;
    // One at a time, so that "first" is well defined: each join is answered
    // before the next is sent.
    let late: Vec<(usize, usize, Option<u64>)> = joins(early..tokens.len(), 1).await.into_iter().flatten().collect();
    let me_url = format!("{}/api/v1/vouchers/{}/queue/me", crowd.url, crowd.voucher);
    let late_places: Vec<(usize, u64)> = stream::iter(late.iter().copied())
        .map(|(index, arrival, _)| {
            let request = client(index).get(me_url.clone()).bearer_auth(&tokens[index]);
            async move {
                let body: Value = request.send().await.ok()?.json().await.ok()?;
                Some((arrival, body["place"].as_u64()?))
            }
        })
        .buffer_unordered(crowd.concurrency)
        .filter_map(|placed| async move { placed })
        .collect()
        .await;

    let mut watched = Vec::with_capacity(tasks.len());
    for (task, index) in tasks.into_iter().zip(&watchers) {
        watched.push((*index, task.await.unwrap_or_default()));
    }

    let orders: Vec<(Instant, u16)> = watched.iter().filter_map(|(_, w)| w.ordered).collect();
    let sold: Vec<Instant> = orders.iter().filter(|(_, status)| *status == 202).map(|(at, _)| *at).collect();
    let last_sale = sold.iter().max().copied();
    let ms = |later: Instant, earlier: Instant| later.saturating_duration_since(earlier).as_secs_f64() * 1e3;
    let push: Vec<f64> = match last_sale {
        Some(last) => watched.iter().filter_map(|(_, w)| w.sold_out_at).map(|at| ms(at, last)).collect(),
        None => Vec::new(),
    };
    let pre: Vec<(f64, f64)> = watched
        .iter()
        .filter_map(|(index, w)| Some((arrival_of[*index] as f64, w.place? as f64)))
        .filter(|(arrival, _)| *arrival < usize::MAX as f64)
        .collect();
    let after: Vec<(f64, f64)> = late_places.iter().map(|&(arrival, place)| (arrival as f64, place as f64)).collect();
    Ok(json!({
        "joined": joined.len() + late.len(),
        "pre_queue": joined.len(),
        "joins_per_s": joined.len() as f64 / join_seconds.max(1e-9),
        "streams": watchers.len(),
        "streams_opened": watched.iter().filter(|(_, w)| w.opened).count(),
        "stream_events": watched.iter().map(|(_, w)| w.events).sum::<usize>(),
        "orders": orders.len(),
        "sold": sold.len(),
        "refused_orders": orders.iter().filter(|(_, status)| *status != 202).count(),
        "last_unit_sold_after_start_ms": last_sale.map(|last| ms(last, start)),
        "sold_out_push_ms": quantiles(push),
        "heard_sold_out": watched.iter().filter(|(_, w)| w.sold_out_at.is_some()).count(),
        "rank_correlation_pre_queue": spearman(&pre),
        "rank_correlation_after_start": spearman(&after),
    }))
}

/// Follows one user's place until the user ordered or heard `sold_out`,
/// buying with the entry token when the turn comes.
async fn watch(client: &reqwest::Client, url: &str, voucher: &str, token: &str, opened: &AtomicUsize) -> Watched {
    let mut watched = Watched::default();
    let request = client.get(format!("{url}/api/v1/vouchers/{voucher}/queue/me/stream")).bearer_auth(token);
    let Ok(mut response) = request.send().await else { return watched };
    if !response.status().is_success() {
        return watched;
    }
    watched.opened = true;
    opened.fetch_add(1, Ordering::SeqCst);
    let mut buffer = Vec::new();
    while let Ok(Some(chunk)) = response.chunk().await {
        buffer.extend_from_slice(&chunk);
        while let Some(end) = buffer.windows(2).position(|w| w == b"\n\n") {
            let event: Vec<u8> = buffer.drain(..end + 2).collect();
            let Some(status) = data(&event) else { continue };
            watched.events += 1;
            if watched.place.is_none() {
                watched.place = status["place"].as_u64();
            }
            match (status["state"].as_str(), status["entry_token"].as_str()) {
                (Some("your_turn"), Some(entry)) => {
                    let order = client
                        .post(format!("{url}/api/v1/vouchers/{voucher}/orders"))
                        .bearer_auth(token)
                        .json(&json!({ "entry_token": entry }))
                        .send()
                        .await;
                    let status = order.map(|answer| answer.status().as_u16()).unwrap_or(0);
                    watched.ordered = Some((Instant::now(), status));
                    return watched;
                }
                (Some("sold_out"), _) => {
                    watched.sold_out_at = Some(Instant::now());
                    return watched;
                }
                (Some("expired"), _) => return watched,
                _ => {}
            }
        }
    }
    watched
}

/// The JSON of an event's `data:` line.
fn data(event: &[u8]) -> Option<Value> {
    let text = std::str::from_utf8(event).ok()?;
    let line = text.lines().find_map(|line| line.strip_prefix("data:"))?;
    serde_json::from_str(line.trim_start()).ok()
}

/// Spearman's rank correlation of the pairs (None for fewer than two).
fn spearman(pairs: &[(f64, f64)]) -> Option<f64> {
    if pairs.len() < 2 {
        return None;
    }
    let ranks = |values: Vec<f64>| {
        let mut order: Vec<usize> = (0..values.len()).collect();
        order.sort_by(|&a, &b| values[a].total_cmp(&values[b]));
        let mut rank = vec![0.0; values.len()];
        for (position, index) in order.into_iter().enumerate() {
            rank[index] = position as f64;
        }
        rank
    };
    let x = ranks(pairs.iter().map(|p| p.0).collect());
    let y = ranks(pairs.iter().map(|p| p.1).collect());
    let n = x.len() as f64;
    let mean = (n - 1.0) / 2.0;
    let covariance: f64 = x.iter().zip(&y).map(|(a, b)| (a - mean) * (b - mean)).sum();
    let variance: f64 = x.iter().map(|a| (a - mean).powi(2)).sum();
    Some(covariance / variance)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rank_correlation_is_one_for_the_same_order_and_minus_one_reversed() {
        let same: Vec<(f64, f64)> = (0..10).map(|i| (f64::from(i), f64::from(i * 3))).collect();
        let reversed: Vec<(f64, f64)> = (0..10).map(|i| (f64::from(i), f64::from(-i))).collect();
        assert!((spearman(&same).expect("pairs") - 1.0).abs() < 1e-9);
        assert!((spearman(&reversed).expect("pairs") + 1.0).abs() < 1e-9);
        assert_eq!(spearman(&[(1.0, 1.0)]), None);
    }
}
