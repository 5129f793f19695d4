//! The platform on a real local Redis Cluster (three masters): the
//! contention test, the admission rules on vouchers split into buckets, a
//! hot voucher in eight buckets sold to twenty thousand users, and, each on
//! a cluster of its own, slots migrated and a master killed while a sale
//! runs.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use futures::future::join_all;
use reqwest::StatusCode;
use seckill_analytics::reconcile::{reconcile, Mode};
use seckill_core::config::{DrawConfig, ReplicaAcks};
use seckill_devstack::{shared_test_cluster, RedisCluster, TempDir};
use serde_json::Value;
use tokio::sync::Semaphore;

use crate::helpers::{eventually, Platform};

/// Requests in flight at once.
const CONCURRENCY: usize = 256;
/// Fewer, for a sale that must still run while slots move.
const SLOW_SALE: usize = 16;

fn seeds() -> Vec<String> {
    shared_test_cluster().expect("the Redis Cluster starts (run scripts/setup)").seed_urls()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_thousand_buyers_ten_units_on_the_cluster() {
    let platform = Platform::start_on_cluster(seeds(), 1).await;
    crate::contention::sell_out(Arc::new(platform), 5_000, 500).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_polling_waiter_is_not_skipped_as_idle_on_the_cluster() {
    crate::waiting_room::a_long_polling_waiter_is_not_skipped_as_idle_on(Platform::start_on_cluster(seeds(), 1).await)
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_count_units_across_orders_in_buckets() {
    crate::rules::a_limit_of_three_counts_units_across_orders_on(Platform::start_on_cluster(seeds(), 4).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_window_pause_and_admin_updates_reach_every_bucket() {
    let platform = Platform::start_on_cluster(seeds(), 4).await;
    crate::rules::the_window_pause_and_admin_updates_gate_admission_on(platform).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn added_stock_reaches_the_buckets_and_the_persistent_stock() {
    let platform = Platform::start_on_cluster(seeds(), 4).await;
    crate::rules::added_stock_reaches_redis_and_the_persistent_stock_on(platform).await;
}

/// One order request as a client saw it.
#[derive(Debug)]
struct Answer {
    user: String,
    quantity: u32,
    status: StatusCode,
    body: Value,
}

/// Whether a storm's clients send a request again after a `503` that says
/// nothing was admitted (right after a failover, the calls in flight to the
/// dead master are answered so).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RetryUnavailable {
    Yes,
    No,
}

/// Most times a client sends a request again after such a `503`.
const CLIENT_RETRIES: usize = 20;

/// Sends every `(user, quantity)` at once (at most `in_flight` at a time),
/// counting the admitted ones in `admitted`.
async fn storm(
    platform: &Arc<Platform>,
    voucher: &str,
    requests: Vec<(String, u32)>,
    in_flight: usize,
    admitted: &Arc<AtomicUsize>,
) -> Vec<Answer> {
    storm_retrying(platform, voucher, requests, in_flight, admitted, RetryUnavailable::No).await
}

/// [`storm`], the clients retrying as `retry_unavailable` says.
async fn storm_retrying(
    platform: &Arc<Platform>,
    voucher: &str,
    requests: Vec<(String, u32)>,
    in_flight: usize,
    admitted: &Arc<AtomicUsize>,
    retry_unavailable: RetryUnavailable,
) -> Vec<Answer> {
    let gate = Arc::new(Semaphore::new(in_flight));
    let sent = requests.into_iter().map(|(user, quantity)| {
        let (platform, voucher, gate, admitted) =
            (Arc::clone(platform), voucher.to_owned(), Arc::clone(&gate), Arc::clone(admitted));
        tokio::spawn(async move {
            let _permit = gate.acquire_owned().await.expect("semaphore open");
            let (status, body) = platform.order_units(&voucher, &user, quantity).await;
            // What a client does with a 503 that says nothing was admitted.
            let (status, body) = match retry_unavailable {
                RetryUnavailable::Yes
                    if status == StatusCode::SERVICE_UNAVAILABLE && body.get("order_id").is_none() =>
                {
                    let mut answer = (status, body);
                    for _ in 0..CLIENT_RETRIES {
                        answer = platform.order_units(&voucher, &user, quantity).await;
                        if answer.0 != StatusCode::SERVICE_UNAVAILABLE || answer.1.get("order_id").is_some() {
                            break;
                        }
                    }
                    answer
                }
                _ => (status, body),
            };
            if status == StatusCode::ACCEPTED {
                admitted.fetch_add(1, Ordering::Relaxed);
            }
            Answer { user, quantity, status, body }
        })
    });
    join_all(sent).await.into_iter().map(|answer| answer.expect("request task")).collect()
}

/// Every admitted order of `answers`, once final (as the view shows it).
async fn finals(platform: &Arc<Platform>, answers: &[Answer]) -> Vec<Value> {
    let gate = Arc::new(Semaphore::new(64));
    let waits = answers.iter().filter(|a| a.status == StatusCode::ACCEPTED).map(|answer| {
        let (platform, gate) = (Arc::clone(platform), Arc::clone(&gate));
        let order = answer.body["order_id"].as_str().expect("order_id").to_owned();
        async move {
            let _permit = gate.acquire_owned().await.expect("semaphore open");
            platform.wait_final(&order).await
        }
    });
    join_all(waits).await
}

/// Units each user holds by the created orders among `finals`.
fn held(finals: &[Value]) -> HashMap<String, u64> {
    let mut units: HashMap<String, u64> = HashMap::new();
    for order in finals.iter().filter(|o| o["status"] == "CREATED") {
        *units.entry(order["user_id"].as_str().expect("user").to_owned()).or_default() +=
            order["quantity"].as_u64().expect("quantity");
    }
    units
}

/// Every answer is a 202, one of the refusals a sale gives, or a `503`
/// saying nothing was admitted (a Redis call that timed out on a machine
/// the whole suite loads; the callers bound how many).
fn answers_are_a_sales(answers: &[Answer]) -> HashMap<String, usize> {
    let mut codes: HashMap<String, usize> = HashMap::new();
    for answer in answers {
        let code = if answer.status == StatusCode::ACCEPTED {
            "admitted".to_owned()
        } else if answer.status == StatusCode::SERVICE_UNAVAILABLE && answer.body["order_id"].is_null() {
            "unavailable".to_owned()
        } else {
            assert_eq!(answer.status, StatusCode::CONFLICT, "{}: {}", answer.user, answer.body);
            answer.body["error"].as_str().expect("error").to_owned()
        };
        assert!(
            ["admitted", "sold_out", "duplicate_order", "limit_exceeded", "unavailable"].contains(&code.as_str()),
            "{}: {}",
            answer.user,
            answer.body
        );
        *codes.entry(code).or_default() += 1;
    }
    codes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hot_voucher_in_eight_buckets_sells_exactly_its_stock_within_every_limit() {
    const USERS: usize = 20_000;
    const STOCK: u64 = 1_000;
    let platform = Arc::new(Platform::start_on_cluster(seeds(), 8).await);
    let voucher = platform.create_voucher(STOCK, 2).await;
    // Every user asks for one or two units; one in ten asks again for one.
    let mut requests: Vec<(String, u32)> =
        (0..USERS).map(|i| (format!("hot-{i}"), if i % 3 == 0 { 2 } else { 1 })).collect();
    requests.extend((0..USERS).step_by(10).map(|i| (format!("hot-{i}"), 1)));
    let answers = storm(&platform, &voucher, requests, CONCURRENCY, &Arc::new(AtomicUsize::new(0))).await;
    let codes = answers_are_a_sales(&answers);
    println!("hot voucher: {codes:?}");
    let unavailable = codes.get("unavailable").copied().unwrap_or(0);
    assert!(unavailable * 100 <= answers.len(), "at most 1% answered 503 (nothing admitted): {codes:?}");

    let asked: u64 = answers.iter().filter(|a| a.status == StatusCode::ACCEPTED).map(|a| u64::from(a.quantity)).sum();
    assert_eq!(asked, STOCK, "the gate admitted exactly the stock, from every bucket");
    let finals = finals(&platform, &answers).await;
    assert!(finals.iter().all(|o| o["status"] == "CREATED"), "no order had to be failed: the gate was exact");
    let held = held(&finals);
    assert_eq!(held.values().sum::<u64>(), STOCK);
    assert!(held.values().all(|units| *units <= 2), "every user within the limit");
    let shown = platform.wait_voucher(&voucher, |v| v["created"] == finals.len()).await;
    assert_eq!(shown["remaining"], 0, "{shown}");
    assert_eq!(platform.persistent_remaining(&voucher).await, 0);
    assert_eq!(platform.redis_remaining(&voucher).await, 0, "every bucket dry, nothing in transit");
}

/// A dedicated cluster for a test that breaks it, with its directory.
fn own_cluster(masters: usize, replicas: usize) -> (RedisCluster, TempDir) {
    let dir = TempDir::new().expect("temp dir");
    let cluster = RedisCluster::start(dir.path(), masters, replicas).expect("the Redis Cluster starts");
    (cluster, dir)
}

/// Admissions a paced sale lets through before the first slot moves, and
/// between two moves.
const BEFORE_FIRST_MOVE: usize = 50;
const BETWEEN_MOVES: usize = 100;

/// A sale that keeps going until every slot has moved and the voucher is
/// sold out, paced by the moves: it admits up to `BEFORE_FIRST_MOVE` orders,
/// then up to `BETWEEN_MOVES` more while each slot moves, waiting for the
/// move when it gets there. Every move therefore happens while the sale runs
/// (requests meet the slot half moved), and units are left for after the
/// last one. New users throughout, one unit each.
async fn paced_sale(
    platform: Arc<Platform>,
    voucher: String,
    moves: usize,
    moved: tokio::sync::watch::Receiver<usize>,
    admitted: Arc<AtomicUsize>,
) -> Vec<Answer> {
    const MOST_USERS: usize = 20_000;
    let next_user = Arc::new(AtomicUsize::new(0));
    let sold_out_after_moves = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let senders = (0..SLOW_SALE).map(|_| {
        let (platform, voucher, admitted, next_user, done, mut moved) = (
            Arc::clone(&platform),
            voucher.clone(),
            Arc::clone(&admitted),
            Arc::clone(&next_user),
            Arc::clone(&sold_out_after_moves),
            moved.clone(),
        );
        tokio::spawn(async move {
            let mut answers = Vec::new();
            while !done.load(Ordering::Relaxed) {
                let allowed = |moved: &usize| {
                    *moved >= moves || admitted.load(Ordering::Relaxed) < BEFORE_FIRST_MOVE + BETWEEN_MOVES * moved
                };
                moved.wait_for(allowed).await.expect("the moves go on");
                let i = next_user.fetch_add(1, Ordering::Relaxed);
                assert!(i < MOST_USERS, "the sale sold out within {MOST_USERS} users");
                let user = format!("moving-{i}");
                let (status, body) = platform.order_units(&voucher, &user, 1).await;
                if status == StatusCode::ACCEPTED {
                    admitted.fetch_add(1, Ordering::Relaxed);
                } else if body["error"] == "sold_out" && *moved.borrow() >= moves {
                    done.store(true, Ordering::Relaxed);
                }
                answers.push(Answer { user, quantity: 1, status, body });
            }
            answers
        })
    });
    join_all(senders).await.into_iter().flat_map(|answers| answers.expect("sender task")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slots_migrated_during_a_sale_lose_nothing() {
    const STOCK: u64 = 500;
    const BUCKETS_MOVED: [u32; 3] = [0, 3, 6];
    let (cluster, _dir) = own_cluster(3, 0);
    let platform = Arc::new(Platform::start_on_cluster(cluster.seed_urls(), 8).await);
    let voucher = platform.create_voucher(STOCK, 1).await;
    let layout = platform.redis_gate().await.layout(voucher.parse().expect("id")).await.expect("reads").expect("there");
    let admitted = Arc::new(AtomicUsize::new(0));
    let (moves, moved) = tokio::sync::watch::channel(0);
    let sale = tokio::spawn(paced_sale(
        Arc::clone(&platform),
        voucher.clone(),
        BUCKETS_MOVED.len(),
        moved,
        Arc::clone(&admitted),
    ));
    // Once the sale is under way, three buckets (bucket 0 among them) move
    // to the next master, keys, outbox streams and consumer groups alike.
    eventually(|| async { (admitted.load(Ordering::Relaxed) >= BEFORE_FIRST_MOVE).then_some(()) }).await;
    let masters = cluster.masters().expect("masters");
    let mut moved = Vec::new();
    for bucket in BUCKETS_MOVED {
        let slot = layout.slot(bucket);
        let from = cluster.master_of(slot).expect("served");
        let to = masters[(masters.iter().position(|m| *m == from).expect("a master") + 1) % masters.len()];
        let cluster_ref = &cluster;
        tokio::task::block_in_place(|| cluster_ref.migrate_slot(slot, to)).expect("migrates");
        moved.push((slot, to));
        moves.send_replace(moved.len());
    }
    let during = admitted.load(Ordering::Relaxed);
    let answers = sale.await.expect("the sale");
    println!("slots moved with {during} orders admitted; {:?}", answers_are_a_sales(&answers));
    assert!(during < STOCK as usize, "the slots moved while the sale ran");
    for (slot, to) in moved {
        assert_eq!(cluster.master_of(slot).expect("served"), to);
    }

    let finals = finals(&platform, &answers).await;
    assert_eq!(finals.len() as u64, STOCK, "every 202 reached the log, exactly the stock");
    assert!(finals.iter().all(|o| o["status"] == "CREATED"));
    assert!(held(&finals).values().all(|units| *units == 1));
    let shown = platform.wait_voucher(&voucher, |v| v["created"] == STOCK).await;
    assert_eq!(shown["remaining"], 0, "{shown}");
    assert_eq!(platform.persistent_remaining(&voucher).await, 0);
    assert_eq!(platform.redis_remaining(&voucher).await, 0);
    let gate = platform.redis_gate().await;
    assert!(gate.outbox_records(10).await.expect("reads").is_empty(), "every outbox drained");
}

/// What replication can lose: the writes a master acknowledged and had not
/// yet sent to its replica when it died. The test makes that window wide and
/// certain (the replica is frozen while the master admits, relays and sees
/// the orders decided; then the master is killed and the frozen replica
/// takes over): Redis forgets those admissions (their units and the users'
/// counts) while the log and the persistent stock keep them. The sale goes
/// on, Redis admits the forgotten units and users again, and the
/// processor's re-checks refuse the surplus (`sold_out`, `limit_exceeded`),
/// so the stock and every limit stay exact; `reconcile` then brings Redis
/// back to the log. The ingress does not wait for replicas here
/// (`replica_acks = off`): with the wait on, those 80 would have been
/// answered `503` (gate test `replica_acks`), and what this test shows is
/// what holds when Redis forgets anyway (the wait turned off, or a replica
/// promoted that had not acknowledged: docs/CLUSTER.md).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_master_killed_and_its_replica_promoted_keeps_stock_and_limits_exact() {
    const STOCK: u64 = 120;
    let (mut cluster, _dir) = own_cluster(3, 1);
    let platform = Arc::new(
        Platform::start_on_cluster_configured(cluster.seed_urls(), 1, |config| {
            config.redis.replica_acks = ReplicaAcks::Off;
        })
        .await,
    );
    let voucher = platform.create_voucher(STOCK, 1).await;
    let layout = platform.redis_gate().await.layout(voucher.parse().expect("id")).await.expect("reads").expect("there");
    let master = cluster.master_of(layout.slot(0)).expect("served");
    let replica = cluster.replica_of(master).expect("reads").expect("a replica");

    // The replica stops replicating; 80 buyers are admitted, relayed, decided.
    cluster.cut_off_replica(master, replica).expect("cuts the replica off");
    let first: Vec<(String, u32)> = (0..80).map(|i| (format!("early-{i}"), 1)).collect();
    let first = storm(&platform, &voucher, first, CONCURRENCY, &Arc::new(AtomicUsize::new(0))).await;
    assert!(first.iter().all(|a| a.status == StatusCode::ACCEPTED), "{:?}", answers_are_a_sales(&first));
    let decided = finals(&platform, &first).await;
    assert!(decided.iter().all(|o| o["status"] == "CREATED"));
    assert_eq!(platform.persistent_remaining(&voucher).await, STOCK - 80);

    // The master dies; the replica, which never saw those 80, takes over.
    cluster.kill(master);
    cluster.resume(replica);
    tokio::task::block_in_place(|| cluster.take_over(replica)).expect("the replica takes over");
    let forgotten = eventually(|| async {
        platform.redis_gate().await.remaining(voucher.parse().expect("id")).await.ok().flatten()
    })
    .await;
    assert_eq!(forgotten, STOCK, "Redis lost the 80 admissions with the master");

    // The sale goes on. The early buyers come back: Redis forgot they hold
    // a unit and admits them; the processor refuses every one past the
    // limit, and their units go back to Redis.
    let again: Vec<(String, u32)> = (0..80).map(|i| (format!("early-{i}"), 1)).collect();
    let again =
        storm_retrying(&platform, &voucher, again, CONCURRENCY, &Arc::new(AtomicUsize::new(0)), RetryUnavailable::Yes)
            .await;
    assert!(again.iter().all(|a| a.status == StatusCode::ACCEPTED), "{:?}", answers_are_a_sales(&again));
    let refused = finals(&platform, &again).await;
    assert!(refused.iter().all(|o| o["status"] == "FAILED" && o["reason"] == "limit_exceeded"), "{refused:?}");
    eventually(|| async { (platform.redis_remaining(&voucher).await == STOCK).then_some(()) }).await;

    // New buyers: Redis admits the 120 units it believes in; the processor
    // creates the 40 left and refuses the rest as sold out.
    let late: Vec<(String, u32)> = (0..200).map(|i| (format!("late-{i}"), 1)).collect();
    let late =
        storm_retrying(&platform, &voucher, late, CONCURRENCY, &Arc::new(AtomicUsize::new(0)), RetryUnavailable::Yes)
            .await;
    println!("after the failover: {:?}", answers_are_a_sales(&late));
    let late = finals(&platform, &late).await;
    let reasons: HashSet<&str> =
        late.iter().filter(|o| o["status"] == "FAILED").filter_map(|o| o["reason"].as_str()).collect();
    assert_eq!(reasons, HashSet::from(["sold_out"]), "the units Redis sold twice were refused");
    assert_eq!(late.iter().filter(|o| o["status"] == "CREATED").count(), 40);

    let all: Vec<Value> = decided.into_iter().chain(refused).chain(late).collect();
    let held = held(&all);
    assert_eq!(held.values().sum::<u64>(), STOCK, "exactly the stock sold");
    assert!(held.values().all(|units| *units == 1), "nobody past the limit");
    let created = all.iter().filter(|o| o["status"] == "CREATED").count();
    let shown = platform.wait_voucher(&voucher, |v| v["created"] == created).await;
    assert_eq!(shown["remaining"], 0, "{shown}");
    assert_eq!(platform.persistent_remaining(&voucher).await, 0);

    // Redis, which gave the refused orders' units back, still believes in
    // units the log sold; reconcile brings it back to the log.
    let gate = platform.redis_gate().await;
    let report =
        reconcile(&gate, &platform.kafka, &DrawConfig::default(), Mode::Write, async |_| {}).await.expect("reconciles");
    assert_eq!(report.vouchers.len(), 1, "{report:?}");
    assert_eq!(platform.redis_remaining(&voucher).await, 0);
    let bought = gate.admission_snapshot(voucher.parse().expect("id")).await.expect("reads").expect("there").bought;
    assert_eq!(bought.len(), STOCK as usize, "one unit per buyer the log says holds one");
}
