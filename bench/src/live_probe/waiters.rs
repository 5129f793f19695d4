//! Thousands of long-polls, then the decisions that wake them.
//!
//! The wake latency is measured from the moment each decision is readable
//! in the log: the probe follows the orders topic itself (like an ingress
//! does) and notes when it sees each order's outcome; the answer's arrival
//! minus that is how long the platform took from a visible decision to the
//! waiting client. The time since the processor decided (`decided_at`,
//! which also covers its store commit and the broker's acknowledgement) is
//! reported beside it.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use futures::future::join_all;
use seckill_core::{Envelope, Event, OrderId};
use seckill_kafka::{Follower, Message};
use tokio_util::sync::CancellationToken;

use super::quantiles;

/// Where decisions appear.
#[derive(Debug)]
pub(crate) struct Log {
    pub(crate) brokers: String,
    pub(crate) topic: String,
}

/// When the probe saw each order's first outcome in the log.
type Seen = Arc<Mutex<HashMap<OrderId, DateTime<Utc>>>>;

/// Follows the orders topic until `stop`, noting when each outcome shows.
async fn watch(follower: Follower, seen: Seen, stop: CancellationToken) {
    loop {
        let message = tokio::select! {
            () = stop.cancelled() => return,
            message = follower.recv() => message,
        };
        let Ok(message) = message else { continue };
        let at = Utc::now();
        let Some(Ok(envelope)) = message.payload().map(Envelope::decode) else { continue };
        let order = match &envelope.event {
            Event::OrderCreated(created) => created.order.order_id,
            Event::OrderFailed(failed) => failed.order.order_id,
            _ => continue,
        };
        seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner).entry(order).or_insert(at);
    }
}

/// Parks one long-poll per `token order_id` line; once the ingress counts
/// them all, writes `ready` (the bench then starts the processor) and
/// reports how long after each decision its waiter was answered.
pub(crate) async fn run(
    url: &str,
    log: &Log,
    orders: &[String],
    ready: &Path,
    wait: Duration,
) -> anyhow::Result<serde_json::Value> {
    let seen: Seen = Arc::default();
    let stop = CancellationToken::new();
    let follower = Follower::start_at_end(&log.brokers, &[&log.topic], Duration::from_millis(10)).await?;
    let watching = tokio::spawn(watch(follower, Arc::clone(&seen), stop.clone()));

    let clients = super::h2_clients(orders.len(), wait + Duration::from_secs(30))?;
    let started = Instant::now();
    let polls = orders.iter().enumerate().map(|(index, line)| {
        let client = clients[index % clients.len()].clone();
        let (token, order) = line.split_once(' ').unwrap_or((line.as_str(), ""));
        let request = client.get(format!("{url}/api/v1/orders/{order}?wait={}s", wait.as_secs())).bearer_auth(token);
        async move {
            let response = request.send().await.ok()?;
            let answered = Utc::now();
            let woken = response.headers().get("seckill-wait").is_some_and(|value| value == "changed");
            let body: serde_json::Value = response.json().await.ok()?;
            let order: OrderId = body["order_id"].as_str()?.parse().ok()?;
            let decided: DateTime<Utc> = body["decided_at"].as_str()?.parse().ok()?;
            Some((woken, order, answered, decided))
        }
    });
    let all = tokio::spawn(join_all(polls));
    wait_for_waiters(url, orders.len(), started).await?;
    std::fs::write(ready, b"ready\n")?;
    let answers = all.await?;
    // The follower may see the last outcomes a moment after their waiters.
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.cancel();
    let _ = watching.await;

    let seen = seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let millis =
        |later: DateTime<Utc>, earlier: DateTime<Utc>| (later - earlier).num_microseconds().unwrap_or(0) as f64 / 1e3;
    let woken: Vec<_> = answers.iter().flatten().filter(|(woken, ..)| *woken).collect();
    let from_visible: Vec<f64> = woken
        .iter()
        .filter_map(|(_, order, answered, _)| Some(millis(*answered, *seen.get(order)?).max(0.0)))
        .collect();
    let from_decided: Vec<f64> = woken.iter().map(|(_, _, answered, decided)| millis(*answered, *decided)).collect();
    Ok(serde_json::json!({
        "waiters": orders.len(),
        "answered": answers.iter().flatten().count(),
        "woken": woken.len(),
        "errors": answers.iter().filter(|a| a.is_none()).count(),
        "answered_before_the_probe_saw_the_decision": woken.iter().filter(|(_, order, answered, _)| seen.get(order).is_some_and(|at| at > answered)).count(),
        "wake_ms": quantiles(from_visible),
        "since_decided_ms": quantiles(from_decided),
    }))
}

/// Polls the ingress's `seckill_live_waiters` until it counts `expected`.
async fn wait_for_waiters(url: &str, expected: usize, started: Instant) -> anyhow::Result<()> {
    let client = reqwest::Client::new();
    loop {
        let metrics = client.get(format!("{url}/metrics")).send().await?.text().await?;
        let waiting = metrics
            .lines()
            .find(|line| line.starts_with("seckill_live_waiters{"))
            .and_then(|line| line.rsplit(' ').next())
            .and_then(|value| value.parse::<f64>().ok())
            .unwrap_or(0.0) as usize;
        if waiting >= expected {
            eprintln!("    {waiting} waiters parked after {:.1} s", started.elapsed().as_secs_f64());
            return Ok(());
        }
        anyhow::ensure!(started.elapsed() < Duration::from_secs(120), "only {waiting} of {expected} waiters parked");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
