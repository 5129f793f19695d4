//! After the load: every admitted order final, and the sale's invariants.

use std::collections::HashMap;
use std::time::Duration;

use futures::stream::{self, StreamExt};
use seckill_core::config::RedisConfig;
use seckill_core::UserId;
use seckill_gate::Gate;
use serde_json::Value;

use crate::error::LoadgenError;
use crate::{Credentials, Plan};

/// What to check beyond the HTTP API, when reachable.
#[derive(Clone, Debug, Default)]
pub struct Checks {
    /// The processor's base URL, for the persistent stock.
    pub processor_url: Option<String>,
    /// The gate's Redis, for its remaining stock.
    pub redis_url: Option<String>,
    /// Or the seed nodes of the gate's Redis Cluster.
    pub redis_cluster_nodes: Vec<String>,
    /// The platform's Redis key prefix.
    pub redis_prefix: String,
}

/// Polls the voucher's counters in the status view until it has decided
/// (created or failed) `admitted` orders, or `timeout`. Returns how long
/// that took: how long the pipeline needed to catch up after the load.
pub(crate) async fn wait_drained(
    http: &reqwest::Client,
    plan: &Plan,
    voucher: &str,
    admitted: usize,
    timeout: Duration,
) -> Option<Duration> {
    let started = tokio::time::Instant::now();
    let url = format!("{}/api/v1/vouchers/{voucher}", plan.base_url);
    while started.elapsed() < timeout {
        if let Ok(response) = http.get(&url).send().await {
            if let Ok(view) = response.json::<Value>().await {
                let decided = view["created"].as_u64().unwrap_or(0) + view["failed"].as_u64().unwrap_or(0);
                if decided >= admitted as u64 {
                    return Some(started.elapsed());
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    None
}

/// An admitted order as the status view has it once final.
#[derive(Clone, Debug)]
pub(crate) struct FinalOrder {
    pub(crate) user: String,
    pub(crate) status: String,
    pub(crate) quantity: u64,
    /// `decided_at − accepted_at`, milliseconds.
    pub(crate) accept_to_final_ms: Option<f64>,
}

/// Polls the view, as each order's owner, until every order in `orders`
/// is final, or `timeout`. Returns the final rows found (missing ones are
/// not final in time).
pub(crate) async fn wait_final(
    http: &reqwest::Client,
    plan: &Plan,
    orders: &[(String, UserId)],
    timeout: Duration,
) -> Vec<FinalOrder> {
    let deadline = tokio::time::Instant::now() + timeout;
    stream::iter(orders)
        .map(|(order, user)| async move {
            let url = format!("{}/api/v1/orders/{order}", plan.base_url);
            loop {
                if let Some(row) = final_row(http, &plan.credentials, &url, user).await {
                    return Some(final_order(&row));
                }
                if tokio::time::Instant::now() >= deadline {
                    return None;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
        .buffer_unordered(32)
        .filter_map(|row| async move { row })
        .collect()
        .await
}

/// The order row at `url`, read as its owner `user`, if the view shows it
/// final (not `PENDING`); `None` while pending or unreadable.
pub(crate) async fn final_row(
    http: &reqwest::Client,
    credentials: &Credentials,
    url: &str,
    user: &UserId,
) -> Option<Value> {
    let response = credentials.as_user(http.get(url), user).send().await.ok()?;
    let row: Value = response.json().await.ok()?;
    (row["status"].is_string() && row["status"] != "PENDING").then_some(row)
}

fn final_order(row: &Value) -> FinalOrder {
    let time = |field: &str| row[field].as_str().and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok());
    let accept_to_final_ms = match (time("accepted_at"), time("decided_at")) {
        (Some(accepted), Some(decided)) => (decided - accepted).num_microseconds().map(|us| us as f64 / 1000.0),
        _ => None,
    };
    FinalOrder {
        user: row["user_id"].as_str().unwrap_or_default().to_owned(),
        status: row["status"].as_str().unwrap_or_default().to_owned(),
        quantity: row["quantity"].as_u64().unwrap_or_default(),
        accept_to_final_ms,
    }
}

/// Units held per user by created (or paid) orders.
pub(crate) fn units_per_user(orders: &[FinalOrder]) -> HashMap<&str, u64> {
    let mut units: HashMap<&str, u64> = HashMap::new();
    for order in orders.iter().filter(|o| o.status == "CREATED" || o.status == "PAID") {
        let held = units.entry(order.user.as_str()).or_default();
        *held = held.saturating_add(order.quantity);
    }
    units
}

/// Redis remaining and persistent remaining of `voucher`, once they agree
/// (compensations may still be on their way) or after a few seconds.
pub(crate) async fn remaining(
    http: &reqwest::Client,
    checks: &Checks,
    voucher: &str,
) -> Result<(Option<u64>, Option<u64>), LoadgenError> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let redis = match redis_config(checks) {
            Some(config) => Some(redis_remaining(&config, voucher).await?),
            None => None,
        };
        let persistent = match &checks.processor_url {
            Some(url) => {
                let stock: Value = http.get(format!("{url}/api/v1/stock/{voucher}")).send().await?.json().await?;
                stock["remaining"].as_u64()
            }
            None => None,
        };
        let agree = matches!((redis, persistent), (Some(a), Some(b)) if a == b);
        if agree || redis.is_none() || persistent.is_none() || tokio::time::Instant::now() >= deadline {
            return Ok((redis, persistent));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The gate's Redis (or Redis Cluster), when the checks name one.
fn redis_config(checks: &Checks) -> Option<RedisConfig> {
    if !checks.redis_cluster_nodes.is_empty() {
        return Some(RedisConfig::cluster(checks.redis_cluster_nodes.clone(), checks.redis_prefix.clone()));
    }
    Some(RedisConfig::new(checks.redis_url.clone()?, checks.redis_prefix.clone()))
}

/// What the gate still admits of `voucher`: every bucket together.
async fn redis_remaining(config: &RedisConfig, voucher: &str) -> Result<u64, LoadgenError> {
    let gate = Gate::connect(config).await?;
    let voucher_id = voucher.parse().map_err(|e| LoadgenError::Invalid(format!("voucher id {voucher}: {e}")))?;
    let remaining = gate.remaining(voucher_id).await?;
    remaining.ok_or_else(|| {
        LoadgenError::Invalid(format!("Redis has no voucher {voucher} under prefix {}", config.key_prefix))
    })
}
