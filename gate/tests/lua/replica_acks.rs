//! The wait for a replica before an admission is promised
//! (`redis.replica_acks`), against a real master and replica: what is
//! answered admitted is on the replica by the time of the answer; with the
//! replica frozen or gone the answer is "unacknowledged" within about the
//! timeout, naming the order; `auto` waits for nothing on a Redis without
//! replicas; a burst shares its waits; on a cluster the wait goes to the
//! bucket's own master; the processor's releases, the admin's updates and
//! the definitions loaded count only once a replica has them, unless the
//! master has no replica left to lose them to; a waiting room's place and a
//! draw's entry are promised only once a replica has them.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use chrono::Utc;
use futures::future::join_all;
use prometheus::Registry;
use seckill_core::config::{RedisConfig, ReplicaAcks};
use seckill_core::event::OrderAccepted;
use seckill_core::metrics::AdmissionMetrics;
use seckill_core::{OrderId, VoucherId};
use seckill_devstack::{Redis, RedisCluster, RedisPersistence, TempDir};
use seckill_gate::{Admission, Entered, Gate, GateConnection, Joined, RetryKey, Settlement, VoucherKeys};

use crate::{unique_prefix, user, voucher, Harness};

/// The wait's timeout in the tests that expect it to run out.
const SHORT_WAIT: Duration = Duration::from_millis(300);
/// How long the replica stays frozen in the test whose admissions must
/// outwait it.
const FROZEN_FOR: Duration = Duration::from_millis(400);

/// A master and its replica, in a directory of their own.
struct Pair {
    master: Redis,
    replica: Redis,
    _dir: TempDir,
}

impl Pair {
    fn start() -> Self {
        let dir = TempDir::new().expect("temp dir");
        let master = Redis::start(&dir.path().join("master"), 0, RedisPersistence::None).expect("the master starts");
        let replica = Redis::start_replica(&dir.path().join("replica"), &master).expect("the replica starts");
        Self { master, replica, _dir: dir }
    }

    /// What an ingress would be configured with, waiting `timeout`.
    fn config(&self, acks: ReplicaAcks, timeout: Duration) -> RedisConfig {
        RedisConfig {
            replica_acks: acks,
            replica_ack_timeout_ms: u64::try_from(timeout.as_millis()).expect("short"),
            ..RedisConfig::new(self.master.url(), unique_prefix())
        }
    }
}

/// A gate as the ingress builds it for `config`, with its metrics.
async fn acknowledging_gate(config: &RedisConfig) -> (Gate, AdmissionMetrics) {
    let metrics = AdmissionMetrics::register(&Registry::new());
    let gate = Gate::connect(config)
        .await
        .expect("connects")
        .with_metrics(metrics.clone())
        .with_replica_acks(config)
        .await
        .expect("the replica wait starts");
    (gate, metrics)
}

/// A plain connection to `url` (a replica's, to read what it has).
async fn connection(url: &str) -> redis::aio::MultiplexedConnection {
    redis::Client::open(url).expect("url").get_multiplexed_async_connection().await.expect("connects")
}

fn order(voucher: VoucherId, name: &str) -> OrderAccepted {
    OrderAccepted {
        order_id: OrderId::generate(),
        voucher_id: voucher,
        user_id: user(name),
        quantity: 1,
        accepted_at: Utc::now(),
        amount: 0,
        currency: None,
        idempotency_key: None,
    }
}

/// Calls of `command` the server at `url` counted (`INFO commandstats`).
async fn calls_of(url: &str, command: &str) -> u64 {
    let stats: String =
        redis::cmd("INFO").arg("commandstats").query_async(&mut connection(url).await).await.expect("INFO");
    let prefix = format!("cmdstat_{command}:calls=");
    stats
        .lines()
        .find_map(|line| line.trim().strip_prefix(prefix.as_str())?.split(',').next()?.parse().ok())
        .unwrap_or(0)
}

/// Whether `replica` has `order` in the admitted hash of `keys`.
async fn replica_has(replica: &mut redis::aio::MultiplexedConnection, keys: &VoucherKeys, order: OrderId) -> bool {
    let recorded: Option<String> =
        redis::cmd("HGET").arg(&keys.admitted).arg(order.to_string()).query_async(replica).await.expect("HGET");
    recorded.is_some()
}

/// `field` of the `INFO replication` of the server at `url`.
async fn replication_offset(url: &str, field: &str) -> Option<u64> {
    let info: String =
        redis::cmd("INFO").arg("replication").query_async(&mut connection(url).await).await.expect("INFO");
    info.lines().find_map(|line| line.trim().strip_prefix(field)?.strip_prefix(':')?.parse().ok())
}

/// Until the replica has everything the master wrote so far (the setup's
/// writes, made without waiting).
async fn replicated(pair: &Pair) {
    let written = replication_offset(&pair.master.url(), "master_repl_offset").await.expect("an offset");
    let deadline = Instant::now() + Duration::from_secs(10);
    while replication_offset(&pair.replica.url(), "slave_repl_offset").await < Some(written) {
        assert!(Instant::now() < deadline, "the replica did not catch up");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_replica_an_admission_is_answered_once_the_replica_has_it() {
    let pair = Pair::start();
    let config = pair.config(ReplicaAcks::Auto, Duration::from_secs(5));
    let (gate, metrics) = acknowledging_gate(&config).await;
    assert!(gate.replica_acks_on(), "auto turns the wait on: the master has a replica");
    assert_eq!(metrics.replica_acks_on.get(), 1);
    let v = voucher(&gate, 1_000, 1).await;
    let keys = gate.keys(v);
    replicated(&pair).await;

    // The replica frozen for a while: every answer waits for it.
    pair.replica.pause();
    let orders: Vec<OrderAccepted> = (0..50).map(|i| order(v, &format!("frozen-{i}"))).collect();
    let admissions = join_all(orders.iter().map(|order| {
        let (gate, keys, replica_url) = (gate.clone(), keys.clone(), pair.replica.url());
        async move {
            let answer = gate.admit_order(order, None).await.expect("admits");
            let answered_at = Instant::now();
            // Right after the answer, no waiting: the replica has it.
            let on_replica = replica_has(&mut connection(&replica_url).await, &keys, order.order_id).await;
            (answer, answered_at, on_replica)
        }
    }));
    let thaw = async {
        tokio::time::sleep(FROZEN_FOR).await;
        let resumed_at = Instant::now();
        pair.replica.resume();
        resumed_at
    };
    let (answers, resumed_at) = tokio::join!(admissions, thaw);
    for (answer, answered_at, on_replica) in &answers {
        assert!(matches!(answer, Admission::Admitted { .. }), "{answer:?}");
        assert!(*answered_at >= resumed_at, "answered while the replica was frozen: not acknowledged by it");
        assert!(on_replica, "the replica has every order admitted by the time of its answer");
    }
    assert_eq!(metrics.replica_ack_timeouts.get(), 0);

    // Unfrozen, a burst: every answer on the replica, the waits shared.
    let before = calls_of(&pair.master.url(), "wait").await;
    let orders: Vec<OrderAccepted> = (0..400).map(|i| order(v, &format!("burst-{i}"))).collect();
    let answers = join_all(orders.iter().map(|order| gate.admit_order(order, None))).await;
    let mut replica = connection(&pair.replica.url()).await;
    for (order, answer) in orders.iter().zip(&answers) {
        assert!(matches!(answer, Ok(Admission::Admitted { .. })), "{answer:?}");
        assert!(replica_has(&mut replica, &keys, order.order_id).await, "on the replica when answered");
    }
    let waits = calls_of(&pair.master.url(), "wait").await - before;
    assert!((1..=100).contains(&waits), "{waits} WAITs for 400 admissions: one per pipeline, not per admission");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_replica_frozen_or_gone_the_answer_names_the_order_within_about_the_timeout() {
    let mut pair = Pair::start();
    let config = pair.config(ReplicaAcks::Auto, SHORT_WAIT);
    let (gate, metrics) = acknowledging_gate(&config).await;
    let v = voucher(&gate, 10, 1).await;
    replicated(&pair).await;

    // Frozen: its connection stays open, it acknowledges nothing.
    pair.replica.pause();
    let admitted = order(v, "frozen");
    let started = Instant::now();
    let answer = gate.admit_order(&admitted, None).await.expect("answers");
    let took = started.elapsed();
    assert_eq!(answer, Admission::Unacknowledged { order: admitted.order_id });
    assert!(took >= SHORT_WAIT && took < SHORT_WAIT + Duration::from_secs(2), "answered after {took:?}");
    assert_eq!(gate.remaining(v).await.expect("reads"), Some(9), "the order stands on the master");
    assert!(metrics.replica_ack_timeouts.get() >= 1);
    // Settling it is no promise either.
    let settled = gate.settle(v, &admitted.user_id, admitted.order_id).await.expect("settles");
    assert_eq!(settled, Settlement::Unacknowledged);

    // Gone (killed): the master counts no replica; still no promise.
    pair.replica.kill();
    let lost = order(v, "gone");
    let started = Instant::now();
    assert_eq!(
        gate.admit_order(&lost, None).await.expect("answers"),
        Admission::Unacknowledged { order: lost.order_id }
    );
    assert!(started.elapsed() < SHORT_WAIT + Duration::from_secs(2));
    assert!(gate.replica_acks_on(), "auto stays on once a replica was seen: losing it is what the wait is for");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeated_call_or_a_replay_is_promised_only_once_the_replica_has_the_first() {
    let pair = Pair::start();
    let config = pair.config(ReplicaAcks::On, SHORT_WAIT);
    // The first admissions over a gate that does not wait, while the
    // replica is frozen: on the master only.
    let plain = Gate::connect(&config).await.expect("connects");
    let (gate, _) = acknowledging_gate(&config).await;
    let v = voucher(&plain, 10, 2).await;
    replicated(&pair).await;
    pair.replica.pause();
    let first = order(v, "first");
    assert!(matches!(plain.admit_order(&first, None).await.expect("admits"), Admission::Admitted { .. }));
    let key = RetryKey::new(&user("keyed"), "k-1").expect("key");
    let keyed = order(v, "keyed");
    assert!(matches!(plain.admit_order(&keyed, Some(&key)).await.expect("admits"), Admission::Admitted { .. }));

    // The same id again, and the same key again, over the waiting gate,
    // whose connection wrote nothing: its WAIT must still cover them.
    assert_eq!(
        gate.admit_order(&first, None).await.expect("answers"),
        Admission::Unacknowledged { order: first.order_id }
    );
    let retried = order(v, "keyed");
    assert_eq!(
        gate.admit_order(&retried, Some(&key)).await.expect("answers"),
        Admission::Unacknowledged { order: keyed.order_id }
    );

    pair.replica.resume();
    assert!(matches!(gate.admit_order(&first, None).await.expect("answers"), Admission::Admitted { .. }));
    assert_eq!(
        gate.admit_order(&retried, Some(&key)).await.expect("answers"),
        Admission::Replayed { order: keyed.order_id, quantity: Some(1) }
    );
    assert_eq!(gate.settle(v, &first.user_id, first.order_id).await.expect("settles"), Settlement::Admitted);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_an_update_or_a_load_no_replica_acknowledged_fails_and_its_repeat_acts_once() {
    let pair = Pair::start();
    let config = pair.config(ReplicaAcks::Auto, SHORT_WAIT);
    let (gate, _) = acknowledging_gate(&config).await;
    let v = voucher(&gate, 10, 1).await;
    let bought = order(v, "returns-it");
    assert!(matches!(gate.admit_order(&bought, None).await.expect("admits"), Admission::Admitted { .. }));
    replicated(&pair).await;

    // The replica frozen: the units go back on the master alone, which a
    // promoted replica would not have. The follower must not take that
    // for done (it would store its offset, and nothing would release the
    // order again): it is an error, and the follower asks again.
    pair.replica.pause();
    let release = || gate.release(v, &bought.user_id, 1, bought.order_id, None);
    let refused = release().await.expect_err("no replica acknowledged it");
    assert!(refused.to_string().contains("no replica acknowledged"), "{refused}");
    assert!(refused.to_string().contains(&bought.order_id.to_string()), "names the order: {refused}");
    assert_eq!(gate.remaining(v).await.expect("reads"), Some(10), "given back on the master");
    let update = seckill_core::event::VoucherUpdated { voucher_id: v, paused: Some(true), ends_at: None, add_stock: 5 };
    let update_id = uuid::Uuid::now_v7();
    let refused = gate.update_voucher(update_id, &update).await.expect_err("no replica acknowledged it");
    assert!(refused.to_string().contains(&update_id.to_string()), "names the update: {refused}");

    // Asked again once the replica is back: acknowledged, and each acted
    // once (the units went back once, the stock was added once).
    pair.replica.resume();
    assert!(!release().await.expect("acknowledged"), "released before: nothing more goes back");
    assert!(matches!(
        gate.update_voucher(update_id, &update).await.expect("acknowledged"),
        seckill_gate::UpdateResult::Repeated(_)
    ));
    assert_eq!(gate.remaining(v).await.expect("reads"), Some(15));
    let mut replica = connection(&pair.replica.url()).await;
    let keys = gate.keys(v);
    let on_replica: (Option<u64>, Option<String>) = redis::cmd("HMGET")
        .arg(&keys.voucher)
        .arg(&["remaining", "paused"])
        .query_async(&mut replica)
        .await
        .expect("HMGET");
    assert_eq!(on_replica, (Some(15), Some("1".to_owned())), "the replica has both, as answered");

    // A voucher's definition, loaded by the follower for an ingress that
    // logged it and died: the same.
    pair.replica.pause();
    let definition = crate::definition(10, 1, crate::open_window());
    let refused = gate.load_voucher(&definition).await.expect_err("no replica acknowledged it");
    assert!(refused.to_string().contains(&definition.voucher_id.to_string()), "names the voucher: {refused}");
    pair.replica.resume();
    assert!(!gate.load_voucher(&definition).await.expect("acknowledged"), "loaded before: loaded once");
    let keys = gate.keys(definition.voucher_id);
    let stock: Option<u64> =
        redis::cmd("HGET").arg(&keys.voucher).arg("stock").query_async(&mut replica).await.expect("HGET");
    assert_eq!(stock, Some(10), "on the replica");

    // The replica gone (killed, as when a master dies and its only replica
    // is promoted): nothing can acknowledge, and nothing can be promoted
    // without the write. The follower must go on: the release stands.
    // (On the voucher loaded last: the first is paused by now.)
    let other = order(definition.voucher_id, "returns-it-too");
    assert!(matches!(gate.admit_order(&other, None).await.expect("answers"), Admission::Admitted { .. }));
    let mut pair = pair;
    pair.replica.kill();
    let deadline = Instant::now() + Duration::from_secs(10);
    while replication_offset(&pair.master.url(), "connected_slaves").await != Some(0) {
        assert!(Instant::now() < deadline, "the master still counts its replica");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(gate.release(other.voucher_id, &other.user_id, 1, other.order_id, None).await.expect("stands alone"));
    // Not waited on again for a while: the next call is answered at once.
    let started = Instant::now();
    let update =
        seckill_core::event::VoucherUpdated { voucher_id: v, paused: Some(false), ends_at: None, add_stock: 0 };
    assert!(gate.update_voucher(uuid::Uuid::now_v7(), &update).await.is_ok());
    assert!(started.elapsed() < SHORT_WAIT, "no wait on a master known alone: {:?}", started.elapsed());
}

/// Whether `replica` has `user`'s place or entry in the places hash of `keys`.
async fn replica_has_place(replica: &mut redis::aio::MultiplexedConnection, keys: &VoucherKeys, user: &str) -> bool {
    let place: Option<String> =
        redis::cmd("HGET").arg(&keys.places).arg(user).query_async(replica).await.expect("HGET");
    place.is_some()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_place_or_a_draw_entry_is_promised_only_once_a_replica_has_it() {
    let pair = Pair::start();
    let config = pair.config(ReplicaAcks::On, SHORT_WAIT);
    let (gate, _) = acknowledging_gate(&config).await;
    let own = GateConnection::open(&config, Duration::from_secs(5)).await.expect("connects");
    let h = Harness { gate, config: config.clone(), connection: own, _redis: None };
    let plain = Gate::connect(&config).await.expect("connects");
    let room = crate::room::queue_definition(10, 1, 100);
    crate::room::open(&h, &room).await;
    let draw = crate::draw::draw_definition(10, 1);
    crate::draw::open(&h, &draw).await;
    let (room_keys, draw_keys) = (h.gate.keys(room.voucher_id), h.gate.keys(draw.voucher_id));
    let mut replica = connection(&pair.replica.url()).await;
    replicated(&pair).await;

    // While the replica keeps up: promised, and on the replica when answered.
    let ann = user("ann");
    assert_eq!(h.gate.join_queue(room.voucher_id, &ann, None).await.expect("joins"), Joined::Placed { attempt: 1 });
    assert!(replica_has_place(&mut replica, &room_keys, ann.as_str()).await);
    assert_eq!(h.gate.enter_draw(draw.voucher_id, &ann, None).await.expect("enters"), Entered::New { seq: 1 });
    assert!(replica_has_place(&mut replica, &draw_keys, ann.as_str()).await);

    // The replica frozen: a new place or entry is no promise, nor is
    // joining or entering again while the replica still lacks it.
    pair.replica.pause();
    let bob = user("bob");
    let joined = h.gate.join_queue(room.voucher_id, &bob, None).await.expect("answers");
    assert_eq!(joined, Joined::Unacknowledged { placed: true });
    let entered = h.gate.enter_draw(draw.voucher_id, &bob, None).await.expect("answers");
    assert_eq!(entered, Entered::Unacknowledged { entered: true });
    let joined = h.gate.join_queue(room.voucher_id, &bob, None).await.expect("answers");
    assert_eq!(joined, Joined::Unacknowledged { placed: false });
    let entered = h.gate.enter_draw(draw.voucher_id, &bob, None).await.expect("answers");
    assert_eq!(entered, Entered::Unacknowledged { entered: false });
    // Taken over a gate that does not wait (another ingress's connection):
    // the waiting gate's repeat must still cover it.
    let cy = user("cy");
    assert_eq!(plain.join_queue(room.voucher_id, &cy, None).await.expect("joins"), Joined::Placed { attempt: 1 });
    assert_eq!(plain.enter_draw(draw.voucher_id, &cy, None).await.expect("enters"), Entered::New { seq: 3 });
    let joined = h.gate.join_queue(room.voucher_id, &cy, None).await.expect("answers");
    assert_eq!(joined, Joined::Unacknowledged { placed: false });
    let entered = h.gate.enter_draw(draw.voucher_id, &cy, None).await.expect("answers");
    assert_eq!(entered, Entered::Unacknowledged { entered: false });

    // The replica back: joining and entering again are promises now.
    pair.replica.resume();
    for holder in [&bob, &cy] {
        let joined = h.gate.join_queue(room.voucher_id, holder, None).await.expect("answers");
        assert!(matches!(joined, Joined::Held { attempt: 1 }), "{joined:?}");
        assert!(replica_has_place(&mut replica, &room_keys, holder.as_str()).await);
        assert_eq!(h.gate.enter_draw(draw.voucher_id, holder, None).await.expect("answers"), Entered::Held);
        assert!(replica_has_place(&mut replica, &draw_keys, holder.as_str()).await);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_waits_for_nothing_on_a_redis_without_replicas_and_on_waits_in_vain() {
    let dir = TempDir::new().expect("temp dir");
    let redis = Redis::start(dir.path(), 0, RedisPersistence::None).expect("redis starts");
    let config = RedisConfig::new(redis.url(), unique_prefix());
    assert_eq!(config.replica_acks, ReplicaAcks::Auto, "the default");
    let (gate, metrics) = acknowledging_gate(&config).await;
    assert!(!gate.replica_acks_on());
    assert_eq!(metrics.replica_acks_on.get(), 0);
    let v = voucher(&gate, 10, 1).await;
    assert!(matches!(gate.admit_order(&order(v, "alone"), None).await.expect("admits"), Admission::Admitted { .. }));
    assert_eq!(calls_of(&redis.url(), "wait").await, 0, "no WAIT was sent");

    // Forced on, a Redis without replicas never acknowledges.
    let forced = RedisConfig { replica_acks: ReplicaAcks::On, replica_ack_timeout_ms: 50, ..config };
    let (gate, _) = acknowledging_gate(&forced).await;
    let unpromised = order(v, "forced");
    assert_eq!(
        gate.admit_order(&unpromised, None).await.expect("answers"),
        Admission::Unacknowledged { order: unpromised.order_id }
    );
    assert!(calls_of(&redis.url(), "wait").await >= 1);
}

/// On a cluster the pipeline goes to the bucket's master, WAIT with it:
/// acknowledged while its replica follows, not once it is cut off (another
/// master's replica does not count).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_cluster_the_wait_is_on_the_buckets_own_master() {
    let dir = TempDir::new().expect("temp dir");
    let cluster = RedisCluster::start(dir.path(), 3, 1).expect("the Redis Cluster starts");
    let config = RedisConfig {
        replica_acks: ReplicaAcks::Auto,
        replica_ack_timeout_ms: u64::try_from(SHORT_WAIT.as_millis()).expect("short"),
        ..RedisConfig::cluster(cluster.seed_urls(), unique_prefix())
    };
    let (gate, _) = acknowledging_gate(&config).await;
    assert!(gate.replica_acks_on());
    let mut masters: HashMap<VoucherId, u16> = HashMap::new();
    for _ in 0..3 {
        let v = voucher(&gate, 100, 1).await;
        let slot = gate.layout(v).await.expect("reads").expect("loaded").slot(0);
        masters.insert(v, cluster.master_of(slot).expect("served"));
    }
    let vouchers: Vec<VoucherId> = masters.keys().copied().collect();
    for v in &vouchers {
        let orders: Vec<OrderAccepted> = (0..20).map(|i| order(*v, &format!("c-{i}"))).collect();
        let answers = join_all(orders.iter().map(|order| gate.admit_order(order, None))).await;
        assert!(answers.iter().all(|a| matches!(a, Ok(Admission::Admitted { .. }))), "{answers:?}");
    }

    // One master's replica cut off: its buckets' admissions are not promised, the others' are.
    let cut = masters[&vouchers[0]];
    let replica = cluster.replica_of(cut).expect("reads").expect("a replica");
    cluster.cut_off_replica(cut, replica).expect("cuts off");
    for v in &vouchers {
        let next = order(*v, "after-the-cut");
        let answer = gate.admit_order(&next, None).await.expect("answers");
        if masters[v] == cut {
            assert_eq!(answer, Admission::Unacknowledged { order: next.order_id });
        } else {
            assert!(matches!(answer, Admission::Admitted { .. }), "{answer:?}");
        }
    }
    cluster.resume(replica);
}
