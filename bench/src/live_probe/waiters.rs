//! Thousands of long-polls, then the decisions that wake them.

use std::path::Path;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use futures::future::join_all;

/// Parks one long-poll per `token order_id` line; once the ingress counts
/// them all, writes `ready` (the bench then starts the processor) and
/// reports how long after each decision its waiter was answered.
pub(crate) async fn run(url: &str, orders: &[String], ready: &Path, wait: Duration) -> anyhow::Result<serde_json::Value> {
    let clients = super::h2_clients(orders.len(), wait + Duration::from_secs(30))?;
    let started = Instant::now();
    let polls = orders.iter().enumerate().map(|(index, line)| {
        let client = clients[index % clients.len()].clone();
        let (token, order) = line.split_once(' ').unwrap_or((line.as_str(), ""));
        let request = client
            .get(format!("{url}/api/v1/orders/{order}?wait={}s", wait.as_secs()))
            .bearer_auth(token);
        async move {
            let response = request.send().await.ok()?;
            let answered = Utc::now();
            let woken = response.headers().get("seckill-wait").is_some_and(|value| value == "changed");
            let body: serde_json::Value = response.json().await.ok()?;
            let decided: DateTime<Utc> = body["decided_at"].as_str()?.parse().ok()?;
            Some((woken, (answered - decided).num_microseconds().unwrap_or(0) as f64 / 1_000.0))
        }
    });
    let all = tokio::spawn(join_all(polls));
    wait_for_waiters(url, orders.len(), started).await?;
    std::fs::write(ready, b"ready\n")?;
    let answers = all.await?;
    let woken: Vec<f64> = answers.iter().flatten().filter(|(woken, _)| *woken).map(|(_, ms)| *ms).collect();
    let mut sorted = woken.clone();
    sorted.sort_by(f64::total_cmp);
    let quantile = |q: f64| sorted.get(((sorted.len() as f64 - 1.0) * q).round() as usize).copied().unwrap_or(0.0);
    Ok(serde_json::json!({
        "waiters": orders.len(),
        "answered": answers.iter().flatten().count(),
        "woken": woken.len(),
        "errors": answers.iter().filter(|a| a.is_none()).count(),
        "wake_ms": { "p50": quantile(0.5), "p90": quantile(0.9), "p99": quantile(0.99), "max": quantile(1.0) },
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
