//! The one invariant checker every fault test ends with.
//!
//! Once the platform is quiet it reads the whole log (both topics, from the
//! beginning) and checks, per voucher and per order:
//!
//! * every order a client got `202` for is final in the view, as its user's;
//! * every order in the log was decided exactly once (one decision event
//!   id), and its outcomes are in a legal order: a decision, then at most a
//!   confirmation, then at most a cancellation, `OrderCreated` before any;
//! * no voucher sold more than its stock (the definition plus every added
//!   stock in the log), and no user ever held more than the limit: from the
//!   log (at every moment), from the view and from Redis, which all agree on
//!   what each user holds;
//! * persistent, Redis and view remaining are equal, and equal the log's;
//! * `seckill stats` equals the view's counters, and `seckill rebuild-view
//!   --verify` finds the view equal to a rebuild from the log;
//! * every accepted cancellation ended its order (`CANCELLED`, or `FAILED`);
//! * every payment completed at the provider paid exactly one order or was
//!   refunded exactly once, and the provider's books agree (`paid`);
//! * the outbox is empty.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use reqwest::StatusCode;
use seckill_core::{Envelope, Event};
use seckill_devstack::user_token;
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
    pub limit: u32,
    /// Its created orders expire unless claimed or paid (`payment_seconds`
    /// > 0).
    pub holds: bool,
    /// Its orders are paid through the provider (a price above 0).
    pub priced: bool,
    /// Its orders need the waiting room's entry token (`mode` queue).
    pub queued: bool,
    /// A draw: only its winners order (`mode` draw).
    pub drawn: bool,
}

/// One outcome as the orders topic has it.
#[derive(Clone, Debug)]
struct Outcome {
    order: String,
    event_id: String,
    kind: &'static str,
    user: String,
    quantity: u64,
}

/// What the log holds, read to quiescence.
#[derive(Debug, Default)]
struct Log {
    /// voucher → the definition's stock plus every distinct addition.
    stock: HashMap<String, u64>,
    /// Outcomes in log order, per voucher (one partition each).
    outcomes: HashMap<String, Vec<Outcome>>,
    /// What the log says of payments.
    pub payments: crate::paid::Payments,
}

pub async fn check(cluster: &Cluster, vouchers: &[Voucher], tally: &Tally, fault: &str) {
    let deadline = tokio::time::Instant::now() + QUIESCENCE;
    let statuses = promised_orders_final(cluster, tally, deadline).await;
    let promised: HashSet<&str> = tally.promised.iter().map(|p| p.order.as_str()).collect();
    let holding: HashSet<&str> = vouchers.iter().filter(|v| v.holds).map(|v| v.id.as_str()).collect();
    let reported: HashSet<&str> = tally.paid.values().flatten().map(String::as_str).collect();
    let log = read_log(cluster, (&promised, &reported), &holding, deadline).await;

    let mut per_order: HashMap<&str, Vec<&Outcome>> = HashMap::new();
    for outcomes in log.outcomes.values() {
        for outcome in outcomes {
            per_order.entry(outcome.order.as_str()).or_default().push(outcome);
        }
    }
    for (order, outcomes) in &per_order {
        legal_history(order, outcomes);
    }
    // 202 or 503, never a wrong one: an order in the log was promised, or
    // named by a 503 as possibly admitted, or is one of the requests that
    // got no answer at all (the ingress died holding it): at most one each.
    let unpromised: Vec<&&str> =
        per_order.keys().filter(|order| !promised.contains(**order) && !tally.named_in_503.contains(**order)).collect();
    assert!(
        unpromised.len() as u64 <= tally.no_answer,
        "[{fault}] orders in the log nobody was told of ({}), more than the {} unanswered requests: {unpromised:?}",
        unpromised.len(),
        tally.no_answer
    );
    for order in &tally.cancel_requested {
        let last = per_order.get(order.as_str()).and_then(|o| o.last()).map(|o| o.kind);
        assert!(
            matches!(last, Some("OrderCancelled" | "OrderFailed")),
            "order {order}: cancel accepted, ends {last:?}"
        );
    }

    // A claim accepted, and answered before the order's pay_by, wins
    // however late it is decided (unless its owner also cancelled it).
    for (order, asked_at) in &tally.confirm_asked_at {
        if tally.cancel_requested.contains(order) {
            continue;
        }
        let row = get_ok(cluster, &format!("{}/api/v1/orders/{order}", cluster.url(Service::Projector))).await;
        let pay_by: Option<chrono::DateTime<chrono::Utc>> = row["pay_by"].as_str().and_then(|at| at.parse().ok());
        if pay_by.is_some_and(|pay_by| *asked_at < pay_by) {
            let kinds: Vec<&str> = per_order.get(order.as_str()).into_iter().flatten().map(|o| o.kind).collect();
            assert!(
                kinds.contains(&"OrderPaid"),
                "[{fault}] order {order}: claim answered at {asked_at}, before its pay_by, yet never paid: {kinds:?} {row}"
            );
        }
    }

    for voucher in vouchers {
        check_voucher(cluster, voucher, &log, deadline, fault).await;
    }
    let payments = crate::paid::check(cluster, tally, &log.payments, fault).await;
    for voucher in vouchers.iter().filter(|voucher| voucher.priced) {
        audit_with_provider(cluster, voucher, fault);
    }
    for voucher in vouchers.iter().filter(|voucher| voucher.queued && room_kept(fault)) {
        audit_room(cluster, voucher, fault, "queue_");
    }
    for voucher in vouchers.iter().filter(|voucher| voucher.drawn && draw_kept(fault)) {
        audit_room(cluster, voucher, fault, "draw_");
    }
    check_stats_and_rebuild(cluster, vouchers).await;
    let outbox = poll(deadline, "the outbox drained", || async {
        let entries = outbox_len(cluster).await?;
        (entries == 0).then_some(entries)
    })
    .await;
    println!(
        "[{fault}] requests {}, 202 {}, refused {:?}, 503 {} (naming {}), no answer {} (orders in the log not promised: \
         {}); retries answered alike {}; cancels {} and \
         confirms {} accepted; admin changes {} applied, {} refused or unanswered; promised orders final: \
         {statuses:?}; orders in the log {}, each decided once, outcomes in order; {payments}; outbox {outbox}",
        tally.requests,
        tally.promised.len(),
        tally.refused,
        tally.unavailable,
        tally.named_in_503.len(),
        tally.no_answer,
        unpromised.len(),
        tally.retries_answered_alike,
        tally.cancel_requested.len(),
        tally.confirm_requested.len(),
        tally.admin_changes.0,
        tally.admin_changes.1,
        per_order.len(),
    );
}

/// Decided once; `OrderCreated` before a confirmation or cancellation; a
/// failure alone; each outcome one event, however often it was sent.
fn legal_history(order: &str, outcomes: &[&Outcome]) {
    let mut kinds: Vec<&str> = Vec::new();
    let mut seen: HashMap<&str, &str> = HashMap::new();
    for outcome in outcomes {
        match seen.get(outcome.kind) {
            Some(event) => assert_eq!(*event, outcome.event_id, "order {order}: two different {}", outcome.kind),
            None => {
                seen.insert(outcome.kind, &outcome.event_id);
                kinds.push(outcome.kind);
            }
        }
    }
    let legal: &[&[&str]] = &[
        &["OrderFailed"],
        &["OrderCreated"],
        &["OrderCreated", "OrderPaid"],
        &["OrderCreated", "OrderCancelled"],
        &["OrderCreated", "OrderPaid", "OrderCancelled"],
    ];
    assert!(legal.contains(&kinds.as_slice()), "order {order}: outcomes in the log in this order: {kinds:?}");
}

/// Every promised order final in the view, as the user and voucher the
/// client ordered with; the statuses counted.
async fn promised_orders_final(
    cluster: &Cluster,
    tally: &Tally,
    deadline: tokio::time::Instant,
) -> HashMap<String, u64> {
    let mut statuses: HashMap<String, u64> = HashMap::new();
    for promised in &tally.promised {
        let order = poll(deadline, &format!("order {} final in the view", promised.order), || async {
            let (status, body) =
                get(cluster, &format!("{}/api/v1/orders/{}", cluster.url(Service::Projector), promised.order)).await;
            (status == StatusCode::OK && body["status"] != "PENDING").then_some(body)
        })
        .await;
        assert_eq!(
            (order["user_id"].as_str(), order["voucher_id"].as_str(), order["quantity"].as_u64()),
            (Some(promised.user.as_str()), Some(promised.voucher.as_str()), Some(promised.quantity)),
            "{order}"
        );
        closed_in_time(&order);
        *statuses.entry(order["status"].as_str().unwrap_or("?").to_owned()).or_default() += 1;
    }
    statuses
}

/// How long past its `pay_by` an unpaid order may stay open, stated in
/// docs/GUARANTEES.md: the sweep finds it within a second when the log and
/// the provider answer; a request lost with a crashed broker or processor
/// is sent again after 30 s; the suite's faults last less than a minute.
const RECONCILIATION_BOUND: Duration = Duration::from_secs(120);

/// An order past its `pay_by` is closed, and was closed within
/// [`RECONCILIATION_BOUND`] of it.
fn closed_in_time(order: &Value) {
    let time = |field: &str| order[field].as_str().and_then(|t| t.parse::<chrono::DateTime<chrono::Utc>>().ok());
    let Some(pay_by) = time("pay_by") else { return };
    let bound = chrono::Duration::from_std(RECONCILIATION_BOUND).expect("a small bound");
    match order["status"].as_str() {
        Some("CREATED") => assert!(
            chrono::Utc::now() <= pay_by + bound,
            "order {} is still open {:?} after its pay_by: {order}",
            order["order_id"],
            chrono::Utc::now() - pay_by
        ),
        Some("CANCELLED") if order["reason"] == "expired" => {
            let closed = time("cancelled_at").expect("a cancelled order says when");
            assert!(
                closed <= pay_by + bound,
                "order {} closed {:?} after its pay_by: {order}",
                order["order_id"],
                closed - pay_by
            );
        }
        _ => {}
    }
}

/// Stock, holdings and remaining of one voucher, from every side.
async fn check_voucher(cluster: &Cluster, voucher: &Voucher, log: &Log, deadline: tokio::time::Instant, fault: &str) {
    let stock = *log.stock.get(&voucher.id).expect("the voucher's definition is in the log");
    let outcomes = log.outcomes.get(&voucher.id).map(Vec::as_slice).unwrap_or_default();
    let (mut held, mut most, mut created) = (HashMap::<&str, u64>::new(), 0u64, 0u64);
    // Units out at each point of the log, not only at its end: an oversell
    // a later cancellation hides is still an oversell.
    let mut out = 0u64;
    for outcome in dedup(outcomes) {
        let units = held.entry(outcome.user.as_str()).or_default();
        match outcome.kind {
            "OrderCreated" => {
                *units += outcome.quantity;
                out += outcome.quantity;
                created += 1;
                assert!(
                    out <= stock,
                    "[{fault}] voucher {}: {out} units of {stock} out once order {} was created",
                    voucher.id,
                    outcome.order
                );
            }
            "OrderCancelled" => {
                *units -= outcome.quantity;
                out -= outcome.quantity;
            }
            _ => {}
        }
        most = most.max(*units);
    }
    let sold: u64 = held.values().sum();
    assert!(sold <= stock, "voucher {} holds {sold} units of {stock}", voucher.id);
    assert!(
        most <= u64::from(voucher.limit),
        "voucher {}: a user held {most} units, limit {}",
        voucher.id,
        voucher.limit
    );

    let url = |service, path: &str| format!("{}{path}", cluster.url(service));
    let level = get_ok(cluster, &url(Service::Processor, &format!("/api/v1/stock/{}", voucher.id))).await;
    let persistent = level["remaining"].as_u64().expect("remaining");
    assert_eq!(
        (level["stock"].as_u64(), persistent),
        (Some(stock), stock - sold),
        "persistent stock of {}",
        voucher.id
    );
    let redis_remaining = poll(
        deadline,
        &format!("Redis remaining == persistent remaining ({persistent}) of {}", voucher.id),
        || async {
            let remaining = redis_remaining(cluster, &voucher.id).await?;
            if remaining != persistent && tokio::time::Instant::now() + Duration::from_millis(150) >= deadline {
                eprintln!(
                    "Redis remaining {remaining}, persistent {persistent}, held per user {held:?}, Redis bought {:?}",
                    redis_bought(cluster, &voucher.id).await
                );
            }
            (remaining == persistent).then_some(remaining)
        },
    )
    .await;
    // The view takes orders and stock changes from two topics, each at its
    // own pace after a crash: wait for all three figures.
    let figures = (Some(persistent), Some(stock));
    let view =
        poll(deadline, &format!("the view's counters equal the log's (created {created}, {figures:?})"), || async {
            let (status, view) =
                get(cluster, &url(Service::Projector, &format!("/api/v1/vouchers/{}", voucher.id))).await;
            let settled = status == StatusCode::OK
                && view["created"] == created
                && (view["remaining"].as_u64(), view["stock"].as_u64()) == figures;
            if !settled && tokio::time::Instant::now() + Duration::from_millis(150) >= deadline {
                eprintln!("the view of {}: {view}", voucher.id);
            }
            settled.then_some(view)
        })
        .await;

    // What each user holds: the log, Redis and the view agree.
    let bought = redis_bought(cluster, &voucher.id).await;
    for (user, units) in &held {
        assert_eq!(bought.get(*user).copied().unwrap_or(0), *units, "Redis' count of {user} on {}", voucher.id);
        let (_, listed) =
            get(cluster, &url(Service::Projector, &format!("/api/v1/users/{user}/orders?limit=100"))).await;
        let in_view: u64 = listed["orders"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|o| {
                o["voucher_id"] == voucher.id.as_str() && matches!(o["status"].as_str(), Some("CREATED" | "PAID"))
            })
            .filter_map(|o| o["quantity"].as_u64())
            .sum();
        assert_eq!(in_view, *units, "the view's holdings of {user} on {}", voucher.id);
    }
    assert!(bought.keys().all(|user| held.contains_key(user.as_str())), "Redis counts users the log does not");
    println!(
        "[{fault}] voucher stock {stock} (limit {}): created {created}, {sold} units held, most by one user {most}; \
         persistent, Redis and view remaining {persistent} ({redis_remaining} in Redis); view admitted {}",
        voucher.limit, view["admitted"]
    );
}

/// Each outcome once (by event id), in log order.
fn dedup(outcomes: &[Outcome]) -> impl Iterator<Item = &Outcome> {
    let mut seen = HashSet::new();
    outcomes.iter().filter(move |outcome| seen.insert(outcome.event_id.as_str()))
}

/// `seckill stats` against the view's counters; `rebuild-view --verify`.
async fn check_stats_and_rebuild(cluster: &Cluster, vouchers: &[Voucher]) {
    let output = tokio::task::block_in_place(|| cluster.command(Service::Ingress, &["stats", "--json"]).output())
        .expect("stats runs");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let stats: Vec<Value> = serde_json::from_slice(&output.stdout).expect("stats JSON");
    for voucher in vouchers {
        let row = stats.iter().find(|s| s["voucher_id"] == voucher.id.as_str()).expect("the voucher's stats");
        let view =
            get_ok(cluster, &format!("{}/api/v1/vouchers/{}", cluster.url(Service::Projector), voucher.id)).await;
        for (counter, in_view) in
            [("created", "created"), ("failed", "failed"), ("cancelled", "cancelled"), ("paid", "paid")]
        {
            assert_eq!(row[counter], view[in_view], "stats' {counter} of {} vs the view's", voucher.id);
        }
    }
    let into = cluster.dir.path().join(format!("rebuilt-{}.redb", uuid::Uuid::now_v7().simple()));
    let args = ["rebuild-view", "--into", into.to_str().expect("utf-8"), "--verify", "--live-url"];
    let live = cluster.url(Service::Projector);
    let mut command = cluster.command(Service::Projector, &args);
    command.arg(&live);
    let output = tokio::task::block_in_place(|| command.output()).expect("rebuild-view runs");
    assert!(
        output.status.success(),
        "rebuild-view --verify differs:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// `seckill audit` of a priced sale, against the live stores and the
/// payment provider (the ingress's environment names it): every rule PASS.
fn audit_with_provider(cluster: &Cluster, voucher: &Voucher, fault: &str) {
    let (view, processor) = (cluster.url(Service::Projector), cluster.url(Service::Processor));
    let args =
        ["audit", "--voucher", &voucher.id, "--live", "--view-url", &view, "--processor-url", &processor, "--json"];
    let output = tokio::task::block_in_place(|| cluster.command(Service::Ingress, &args).output()).expect("audit runs");
    let report: Value = serde_json::from_slice(&output.stdout).unwrap_or(Value::Null);
    assert!(
        output.status.success() && report["pass"] == true && report["provider"] == true,
        "[{fault}] seckill audit of {} with the provider:\n{}\n{}",
        voucher.id,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let rules = report.pointer("/vouchers/0/rules").and_then(Value::as_array).map_or(0, Vec::len);
    println!("[{fault}] seckill audit --live with the provider: {rules} rules PASS");
}

/// Whether a waiting room's state lives through `fault`. The room is in
/// Redis alone (docs/OPERATIONS.md, Waiting rooms): a Redis that loses its
/// last second of writes (SIGKILL with `appendfsync everysec`, a data loss)
/// may serve a place again whose first service the log already has, so the
/// room's audit rules hold across every fault but those. The order
/// invariants above hold across all of them.
fn room_kept(fault: &str) -> bool {
    !(fault.contains("SIGKILL") && fault.contains("Redis") || fault.contains("data loss"))
}

/// Whether a draw's log is whole after `fault`: a draw Redis lost after it
/// was made is rebuilt from the log by `seckill reconcile` (the data-loss
/// fault waits for the draw before it flushes Redis); a Redis killed under
/// load may still lose the last records its outbox held.
fn draw_kept(fault: &str) -> bool {
    !(fault.contains("SIGKILL") && fault.contains("Redis"))
}

/// Waits until `voucher`'s draw has chosen its winners, as an entrant
/// reading it through the ingress sees.
pub async fn until_drawn(cluster: &Cluster, voucher: &Voucher) {
    let deadline = tokio::time::Instant::now() + QUIESCENCE;
    let url = format!("{}/api/v1/vouchers/{}/entries/me", cluster.url(Service::Ingress), voucher.id);
    poll(deadline, "the draw chose its winners", || async {
        let response = cluster.http.get(&url).bearer_auth(user_token("onlooker")).send().await.ok()?;
        let body: Value = response.json().await.ok()?;
        body["winners"].as_u64()
    })
    .await;
}

/// `seckill audit` of a queue-mode sale or a draw from the log: its rules
/// (named `prefix…`: for a waiting room a committed seed, places served in
/// the shuffle's order, one order per entry; for a draw a committed seed,
/// the ranking reproduced from the log, orders by winners only, once each)
/// PASS, like every other rule.
fn audit_room(cluster: &Cluster, voucher: &Voucher, fault: &str, prefix: &str) {
    let args = ["audit", "--voucher", &voucher.id, "--json"];
    let output = tokio::task::block_in_place(|| cluster.command(Service::Ingress, &args).output()).expect("audit runs");
    let report: Value = serde_json::from_slice(&output.stdout).unwrap_or(Value::Null);
    let rules = report.pointer("/vouchers/0/rules").and_then(Value::as_array).cloned().unwrap_or_default();
    let room: Vec<&Value> =
        rules.iter().filter(|rule| rule["rule"].as_str().is_some_and(|name| name.starts_with(prefix))).collect();
    assert!(
        output.status.success() && report["pass"] == true && room.len() >= 3,
        "[{fault}] seckill audit of the {prefix}… rules of sale {}:\n{}\n{}",
        voucher.id,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let details: Vec<String> = room.iter().map(|rule| format!("{}: {}", rule["rule"], rule["detail"])).collect();
    println!("[{fault}] seckill audit: {} {prefix}… rules PASS ({})", room.len(), details.join("; "));
}

/// Waits until the outbox is empty and every promised order is final.
pub async fn drained(cluster: &Cluster, tally: &Tally) {
    let deadline = tokio::time::Instant::now() + QUIESCENCE;
    poll(deadline, "the outbox drained", || async { (outbox_len(cluster).await? == 0).then_some(()) }).await;
    promised_orders_final(cluster, tally, deadline).await;
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

/// A connection to the platform's Redis: the one server, or its cluster
/// (each call routed to the master of its key's slot).
enum Connection {
    Single(redis::aio::MultiplexedConnection),
    Cluster(seckill_gate::GateConnection),
}

impl Connection {
    async fn query<T: redis::FromRedisValue>(&mut self, command: &redis::Cmd) -> redis::RedisResult<T> {
        match self {
            Self::Single(connection) => command.query_async(connection).await,
            Self::Cluster(connection) => command.query_async(connection).await,
        }
    }
}

async fn redis(cluster: &Cluster) -> Option<Connection> {
    match &cluster.redis {
        crate::cluster::Gate::Single(redis) => {
            let client = redis::Client::open(redis.url()).ok()?;
            client.get_multiplexed_async_connection().await.ok().map(Connection::Single)
        }
        crate::cluster::Gate::Cluster(nodes) => {
            let config = seckill_core::config::RedisConfig::cluster(nodes.seed_urls(), &cluster.namespace);
            // The services' own bound on a call: a node cut off fails the
            // call, as it fails theirs.
            let connection =
                seckill_gate::GateConnection::open_when_ready(&config, Duration::from_secs(2), Duration::ZERO);
            connection.await.ok().map(Connection::Cluster)
        }
    }
}

fn keys(cluster: &Cluster, voucher: &str) -> Option<seckill_gate::VoucherKeys> {
    Some(seckill_gate::VoucherKeys::new(&cluster.namespace, voucher.parse().ok()?))
}

async fn redis_remaining(cluster: &Cluster, voucher: &str) -> Option<u64> {
    let key = keys(cluster, voucher)?.voucher;
    redis(cluster).await?.query(redis::cmd("HGET").arg(key).arg("remaining")).await.ok()
}

async fn redis_bought(cluster: &Cluster, voucher: &str) -> HashMap<String, u64> {
    let key = keys(cluster, voucher).expect("a voucher id").bought;
    let mut connection = redis(cluster).await.expect("Redis answers");
    let bought: HashMap<String, u64> = connection.query(redis::cmd("HGETALL").arg(key)).await.expect("HGETALL");
    bought.into_iter().filter(|(_, units)| *units > 0).collect()
}

/// How many orders wait in the outbox: the one stream of a single Redis,
/// or every bucket's own on a cluster (on each master).
pub async fn outbox_len(cluster: &Cluster) -> Option<u64> {
    let mut connection = redis(cluster).await?;
    let streams = match &connection {
        Connection::Single(_) => vec![seckill_gate::outbox_key(&cluster.namespace)],
        Connection::Cluster(nodes) => {
            nodes.scan(&format!("{}:{{v:*}}:outbox", cluster.namespace), "stream").await.ok()?
        }
    };
    let mut len = 0;
    for stream in streams {
        len += connection.query::<u64>(redis::cmd("XLEN").arg(stream)).await.ok()?;
    }
    Some(len)
}

/// Both topics from the beginning, until every promised order is decided,
/// every created order of a voucher with holds is confirmed or cancelled
/// (its hold expired: nothing will change it any more), and the topics have
/// been quiet a moment.
async fn read_log(
    cluster: &Cluster,
    (promised, reported): (&HashSet<&str>, &HashSet<&str>),
    holding: &HashSet<&str>,
    deadline: tokio::time::Instant,
) -> Log {
    let reader = BatchConsumer::subscribe(
        &ConsumerSettings::reader(
            &cluster.brokers,
            format!("{}-checker-{}", cluster.namespace, uuid::Uuid::now_v7().simple()),
        ),
        &[&format!("{}.sales", cluster.namespace), &format!("{}.orders", cluster.namespace)],
    )
    .expect("reader subscribes");
    let never = CancellationToken::new();
    let mut log = Log::default();
    let (mut definitions, mut additions): (HashMap<String, u64>, HashMap<String, HashMap<String, u64>>) =
        Default::default();
    let mut decided: HashSet<String> = HashSet::new();
    // Orders of vouchers with holds: created, and confirmed or cancelled
    // (in whatever order re-sent duplicates arrive).
    let (mut created_held, mut resolved): (HashSet<String>, HashSet<String>) = Default::default();
    let mut quiet_since = None;
    loop {
        let held: Vec<&String> = created_held.difference(&resolved).collect();
        let unsettled = log.payments.unsettled(reported);
        if tokio::time::Instant::now() >= deadline {
            let undecided: Vec<&&str> = promised.iter().filter(|order| !decided.contains(**order)).collect();
            panic!(
                "the log lacks decisions of promised orders {undecided:?}, or outcomes of held orders {held:?}, \
                 or payments completed at the provider are not settled: {unsettled:?}"
            );
        }
        let batch = reader.next_batch_or_idle(Duration::from_millis(500), &never).await;
        let batch = match batch {
            Ok(batch) if !batch.is_empty() => batch,
            _ => {
                let complete =
                    promised.iter().all(|order| decided.contains(*order)) && held.is_empty() && unsettled.is_empty();
                let quiet = *quiet_since.get_or_insert_with(tokio::time::Instant::now);
                if complete && quiet.elapsed() >= Duration::from_secs(2) {
                    break;
                }
                continue;
            }
        };
        quiet_since = None;
        for message in batch {
            // Injected garbage is the consumers' problem (dead letters).
            let Ok(envelope) = Envelope::decode(message.payload().unwrap_or_default()) else { continue };
            let kind = envelope.kind();
            match &envelope.event {
                Event::VoucherCreated(created) => {
                    definitions.insert(created.voucher_id.to_string(), created.stock);
                }
                Event::VoucherUpdated(update) => {
                    let voucher = additions.entry(update.voucher_id.to_string()).or_default();
                    voucher.insert(envelope.event_id.to_string(), update.add_stock);
                }
                Event::OrderCreated(_) | Event::OrderFailed(_) | Event::OrderPaid(_) | Event::OrderCancelled(_) => {
                    let order = envelope.event.order().expect("an outcome carries its order");
                    let id = order.order_id.to_string();
                    if matches!(kind, "OrderCreated" | "OrderFailed") {
                        decided.insert(id.clone());
                    }
                    if holding.contains(order.voucher_id.to_string().as_str()) {
                        match kind {
                            "OrderCreated" => {
                                created_held.insert(id);
                            }
                            "OrderPaid" | "OrderCancelled" => {
                                resolved.insert(id);
                            }
                            _ => {}
                        }
                    }
                    log.outcomes.entry(order.voucher_id.to_string()).or_default().push(Outcome {
                        order: order.order_id.to_string(),
                        event_id: envelope.event_id.to_string(),
                        kind,
                        user: order.user_id.to_string(),
                        quantity: u64::from(order.quantity),
                    });
                }
                _ => {}
            }
            // Refund requests are per payment, not steps of the order:
            // checked with the payments.
            log.payments.take(&envelope);
        }
    }
    for (voucher, stock) in definitions {
        let added: u64 = additions.get(&voucher).map(|a| a.values().sum()).unwrap_or(0);
        log.stock.insert(voucher, stock + added);
    }
    log
}
