//! The one invariant checker every fault test ends with.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use reqwest::StatusCode;
use seckill_core::{Envelope, Event};
use seckill_kafka::{BatchConsumer, ConsumerSettings, Message};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::cluster::{Cluster, Service};
use crate::load::Tally;

/// How long the platform gets to settle after the fault.
const QUIESCENCE: Duration = Duration::from_secs(120);

/// A voucher under test.
#[derive(Clone, Debug)]
pub struct Voucher {
    pub id: String,
    pub stock: u64,
    pub limit: u32,
}

/// One decision as the orders topic has it.
#[derive(Debug)]
struct Decision {
    event_id: String,
    created: bool,
    voucher: String,
    user: String,
    quantity: u64,
}

/// Waits for quiescence, then checks: every promised order is final in the
/// view; every order in the log was decided exactly once; no voucher sold
/// more than its stock and no user more than the limit; the persistent stock
/// moved by exactly the created units; Redis agrees with it; the view's
/// counters agree with the log; the outbox is empty. Prints the counts.
pub async fn check(cluster: &Cluster, vouchers: &[Voucher], tally: &Tally, fault: &str) {
    let deadline = tokio::time::Instant::now() + QUIESCENCE;
    let mut statuses: HashMap<String, u64> = HashMap::new();
    for promised in &tally.promised {
        let order = poll(deadline, &format!("order {} final in the view", promised.order), || async {
            let (status, body) =
                get(cluster, &format!("{}/api/v1/orders/{}", cluster.url(Service::Projector), promised.order)).await;
            (status == StatusCode::OK && body["status"] != "PENDING").then_some(body)
        })
        .await;
        assert_eq!(
            (order["user_id"].as_str(), order["voucher_id"].as_str()),
            (Some(promised.user.as_str()), Some(promised.voucher.as_str())),
            "{order}"
        );
        *statuses.entry(order["status"].as_str().unwrap_or("?").to_owned()).or_default() += 1;
    }

    let promised: HashSet<&str> = tally.promised.iter().map(|p| p.order.as_str()).collect();
    let decisions = read_decisions(cluster, &promised, deadline).await;
    let mut log_created: HashMap<&str, (u64, u64)> = HashMap::new();
    let mut per_user: HashMap<(&str, &str), u64> = HashMap::new();
    for (order, seen) in &decisions {
        let distinct: HashSet<&str> = seen.iter().map(|d| d.event_id.as_str()).collect();
        assert_eq!(distinct.len(), 1, "order {order} was decided more than once: {seen:?}");
        let decision = &seen[0];
        if decision.created {
            let entry = log_created.entry(decision.voucher.as_str()).or_default();
            entry.0 += 1;
            entry.1 += decision.quantity;
            *per_user.entry((decision.voucher.as_str(), decision.user.as_str())).or_default() += decision.quantity;
        }
    }
    for voucher in vouchers {
        let (created, units) = log_created.get(voucher.id.as_str()).copied().unwrap_or_default();
        assert!(units <= voucher.stock, "voucher {} sold {units} units of {}", voucher.id, voucher.stock);
        let over: Vec<_> =
            per_user.iter().filter(|((v, _), units)| *v == voucher.id && **units > u64::from(voucher.limit)).collect();
        assert!(over.is_empty(), "users above the limit: {over:?}");

        let stock = get_ok(cluster, &format!("{}/api/v1/stock/{}", cluster.url(Service::Processor), voucher.id)).await;
        let persistent = stock["remaining"].as_u64().expect("remaining");
        assert_eq!(persistent, voucher.stock - units, "the persistent stock moved once per created unit");
        let redis_remaining = poll(deadline, "Redis remaining == persistent remaining", || async {
            let remaining = redis_remaining(cluster, &voucher.id).await?;
            (remaining == persistent).then_some(remaining)
        })
        .await;
        let view = poll(deadline, "the view's counters equal the log's", || async {
            let (status, view) =
                get(cluster, &format!("{}/api/v1/vouchers/{}", cluster.url(Service::Projector), voucher.id)).await;
            (status == StatusCode::OK && view["created"] == created).then_some(view)
        })
        .await;
        assert_eq!(view["remaining"].as_u64(), Some(persistent), "{view}");
        println!(
            "[{fault}] voucher stock {}: created {created} ({units} units), persistent remaining {persistent}, \
             Redis remaining {redis_remaining}, view admitted {}",
            voucher.stock, view["admitted"]
        );
    }
    let outbox = poll(deadline, "the outbox drained", || async {
        let entries = outbox_len(cluster).await?;
        (entries == 0).then_some(entries)
    })
    .await;
    println!(
        "[{fault}] requests {}, 202 {}, refused {:?}, 503 {}, no answer {}; promised orders final: {statuses:?}; \
         orders in the log {}, each decided once; outbox {outbox}",
        tally.requests,
        tally.promised.len(),
        tally.refused,
        tally.unavailable,
        tally.no_answer,
        decisions.len(),
    );
}

/// Waits until the outbox is empty and every promised order is final.
pub async fn drained(cluster: &Cluster, tally: &Tally) {
    let deadline = tokio::time::Instant::now() + QUIESCENCE;
    poll(deadline, "the outbox drained", || async { (outbox_len(cluster).await? == 0).then_some(()) }).await;
    for promised in &tally.promised {
        poll(deadline, &format!("order {} final in the view", promised.order), || async {
            let url = format!("{}/api/v1/orders/{}", cluster.url(Service::Projector), promised.order);
            let (status, body) = get(cluster, &url).await;
            (status == StatusCode::OK && body["status"] != "PENDING").then_some(())
        })
        .await;
    }
}

async fn get(cluster: &Cluster, url: &str) -> (StatusCode, Value) {
    match cluster.http.get(url).send().await {
        Ok(response) => {
            let status = response.status();
            (status, response.json().await.unwrap_or(Value::Null))
        }
        Err(_) => (StatusCode::BAD_GATEWAY, Value::Null),
    }
}

async fn get_ok(cluster: &Cluster, url: &str) -> Value {
    let (status, body) = get(cluster, url).await;
    assert_eq!(status, StatusCode::OK, "{url}: {body}");
    body
}

/// Polls `probe` until it yields, failing the test at `deadline`.
async fn poll<T, F, Fut>(deadline: tokio::time::Instant, what: &str, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    loop {
        if let Some(value) = probe().await {
            return value;
        }
        assert!(tokio::time::Instant::now() < deadline, "not within {QUIESCENCE:?}: {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn redis(cluster: &Cluster) -> Option<redis::aio::MultiplexedConnection> {
    let client = redis::Client::open(cluster.redis.url()).ok()?;
    client.get_multiplexed_async_connection().await.ok()
}

async fn redis_remaining(cluster: &Cluster, voucher: &str) -> Option<u64> {
    let key = seckill_gate::VoucherKeys::new(&cluster.namespace, voucher.parse().ok()?).voucher;
    redis::cmd("HGET").arg(key).arg("remaining").query_async(&mut redis(cluster).await?).await.ok()
}

async fn outbox_len(cluster: &Cluster) -> Option<u64> {
    let key = seckill_gate::outbox_key(&cluster.namespace);
    redis::cmd("XLEN").arg(key).query_async(&mut redis(cluster).await?).await.ok()
}

/// Every decision on the orders topic, by order id: read from the beginning
/// until each promised order has one and the topic has been quiet a moment.
async fn read_decisions(
    cluster: &Cluster,
    promised: &HashSet<&str>,
    deadline: tokio::time::Instant,
) -> HashMap<String, Vec<Decision>> {
    let reader = BatchConsumer::subscribe(
        &ConsumerSettings {
            brokers: cluster.broker.brokers(),
            group: format!("{}-checker-{}", cluster.namespace, uuid::Uuid::now_v7().simple()),
            max_batch: 1_000,
            max_wait: Duration::from_millis(50),
            fetch_wait: seckill_kafka::READER_FETCH_WAIT,
        },
        &[&format!("{}.orders", cluster.namespace)],
    )
    .expect("reader subscribes");
    let never = CancellationToken::new();
    let mut decisions: HashMap<String, Vec<Decision>> = HashMap::new();
    let mut quiet_since = None;
    loop {
        assert!(tokio::time::Instant::now() < deadline, "the orders topic lacks decisions of promised orders");
        let batch = tokio::time::timeout(Duration::from_millis(500), reader.next_batch(&never)).await;
        let batch = match batch {
            Ok(Ok(batch)) if !batch.is_empty() => batch,
            _ => {
                let complete = promised.iter().all(|order| decisions.contains_key(*order));
                let quiet = *quiet_since.get_or_insert_with(tokio::time::Instant::now);
                if complete && quiet.elapsed() >= Duration::from_secs(2) {
                    return decisions;
                }
                continue;
            }
        };
        quiet_since = None;
        for message in batch {
            // Injected garbage is the consumers' problem (dead letters), not a decision.
            let Ok(envelope) = Envelope::decode(message.payload().unwrap_or_default()) else { continue };
            let (order, created) = match envelope.event {
                Event::OrderCreated(c) => (c.order, true),
                Event::OrderFailed(f) => (f.order, false),
                _ => continue,
            };
            decisions.entry(order.order_id.to_string()).or_default().push(Decision {
                event_id: envelope.event_id.to_string(),
                created,
                voucher: order.voucher_id.to_string(),
                user: order.user_id.to_string(),
                quantity: u64::from(order.quantity),
            });
        }
    }
}
