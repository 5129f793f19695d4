//! The relays' housekeeping of the outbox against a real Redis: claiming
//! walks the pending entries page by page, consumers of relays that are
//! gone leave the group once nothing is pending for them, and where Redis
//! has a replica only what it has is published.
//!
//! Idle times are set with `XCLAIM … IDLE`, as Redis allows, instead of
//! waiting for them to pass.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use redis::aio::ConnectionManager;
use seckill_core::config::RedisConfig;
use seckill_devstack::{Redis, RedisPersistence, TempDir};
use seckill_gate::{outbox_key, Outbox};

/// The group `Outbox` reads as.
const GROUP: &str = "relay";
/// What the relays' reads may block for in these tests.
const BLOCK: Duration = Duration::from_millis(10);

struct Harness {
    config: RedisConfig,
    stream: String,
    connection: ConnectionManager,
    _redis: Redis,
    _dir: TempDir,
}

async fn harness() -> Harness {
    let dir = TempDir::new().expect("temp dir");
    let redis = Redis::start(dir.path(), 0, RedisPersistence::None).expect("redis starts (run scripts/setup)");
    let connection =
        redis::Client::open(redis.url()).expect("url").get_connection_manager().await.expect("redis connects");
    let prefix = format!("outbox{}", &uuid::Uuid::now_v7().simple().to_string()[20..]);
    let config = RedisConfig::new(redis.url(), prefix.clone());
    Harness { stream: outbox_key(&prefix), config, connection, _redis: redis, _dir: dir }
}

impl Harness {
    async fn relay(&self, name: &str) -> Outbox {
        Outbox::connect(&self.config, name, BLOCK).await.expect("outbox connects")
    }

    /// Appends `count` entries as `admit.lua` writes them (a key and a
    /// record); returns their ids in order.
    async fn append(&self, count: usize) -> Vec<String> {
        let mut ids = Vec::with_capacity(count);
        for i in 0..count {
            let id: String = redis::cmd("XADD")
                .arg(&self.stream)
                .arg("*")
                .arg("key")
                .arg("voucher")
                .arg("record")
                .arg(format!("record {i}"))
                .query_async(&mut self.connection.clone())
                .await
                .expect("XADD");
            ids.push(id);
        }
        ids
    }

    /// Makes `ids` pending for `consumer` as if delivered `idle` ago.
    async fn pend_as_if_idle(&self, consumer: &str, ids: &[String], idle: Duration) {
        let _: redis::Value = redis::cmd("XCLAIM")
            .arg(&self.stream)
            .arg(GROUP)
            .arg(consumer)
            .arg(0)
            .arg(ids)
            .arg("IDLE")
            .arg(idle.as_millis() as u64)
            .arg("JUSTID")
            .query_async(&mut self.connection.clone())
            .await
            .expect("XCLAIM");
    }

    /// The replicas the master lists (`ROLE`).
    async fn replicas(&self) -> usize {
        let role: redis::Value = redis::cmd("ROLE").query_async(&mut self.connection.clone()).await.expect("ROLE");
        match role {
            redis::Value::Array(items) => match items.get(2) {
                Some(redis::Value::Array(replicas)) => replicas.len(),
                _ => 0,
            },
            _ => 0,
        }
    }

    /// The group's consumers: name → pending entries.
    async fn consumers(&self) -> Vec<(String, usize)> {
        let reply: redis::streams::StreamInfoConsumersReply = redis::cmd("XINFO")
            .arg("CONSUMERS")
            .arg(&self.stream)
            .arg(GROUP)
            .query_async(&mut self.connection.clone())
            .await
            .expect("XINFO CONSUMERS");
        reply.consumers.into_iter().map(|consumer| (consumer.name, consumer.pending)).collect()
    }
}

fn ids_of(entries: &[seckill_gate::OutboxEntry]) -> Vec<String> {
    entries.iter().map(|entry| entry.id.clone()).collect()
}

#[tokio::test]
async fn claiming_continues_past_a_head_of_entries_that_are_not_idle() {
    let h = harness().await;
    let live = h.relay("relay-live").await;
    let dead = h.relay("relay-dead").await;

    // A live relay holds the first 25 entries, just read: not idle.
    let head = h.append(25).await;
    assert_eq!(ids_of(&live.read_new(100, BLOCK).await.expect("reads")), head);
    // A dead relay read the next 5 an hour ago and never acknowledged them.
    let stranded = h.append(5).await;
    assert_eq!(ids_of(&dead.read_new(100, BLOCK).await.expect("reads")), stranded);
    h.pend_as_if_idle("relay-dead", &stranded, Duration::from_secs(3600)).await;

    // Claiming two at a time scans at most 20 pending entries a call: the
    // first call sees only the live relay's, later ones must go on from
    // there instead of rescanning them.
    let claimer = h.relay("relay-claimer").await;
    let mut claimed = Vec::new();
    for _ in 0..6 {
        claimed.extend(claimer.claim_idle(Duration::from_secs(60), 2).await.expect("claims"));
    }
    assert_eq!(ids_of(&claimed), stranded, "every stranded entry claimed once, none of the live relay's");

    // The scan wraps around: once those are published and removed, entries
    // stranded at the head are found again.
    claimer.remove(&claimed).await.expect("removes");
    h.pend_as_if_idle("relay-live", &head[..3], Duration::from_secs(3600)).await;
    let mut again = Vec::new();
    for _ in 0..3 {
        again.extend(ids_of(&claimer.claim_idle(Duration::from_secs(60), 10).await.expect("claims")));
    }
    assert_eq!(again, head[..3].to_vec());
}

/// Where Redis has a replica, a relay publishes only what the replica has:
/// entries written while it is frozen (a master cut off from it) are left
/// pending, claimed once the replica has them; a master with no replica at
/// all is published from at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_publishes_only_what_a_replica_has_or_a_master_alone_wrote() {
    let dir = TempDir::new().expect("temp dir");
    let master = Redis::start(&dir.path().join("master"), 0, RedisPersistence::None).expect("the master starts");
    let mut replica = Redis::start_replica(&dir.path().join("replica"), &master).expect("the replica starts");
    let prefix = format!("outbox{}", &uuid::Uuid::now_v7().simple().to_string()[20..]);
    let config = RedisConfig { replica_ack_timeout_ms: 200, ..RedisConfig::new(master.url(), prefix.clone()) };
    let connection =
        redis::Client::open(master.url()).expect("url").get_connection_manager().await.expect("redis connects");
    let harness = Harness { stream: outbox_key(&prefix), config, connection, _redis: master, _dir: dir };
    let relay = harness.relay("r1").await;
    // Until the master lists its replica (it connects and syncs after it
    // starts): before that the master is alone, and published from at once.
    let started = Instant::now();
    while harness.replicas().await != 1 {
        assert!(started.elapsed() < Duration::from_secs(10), "the replica never connected");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let replicated = harness.append(2).await;
    assert_eq!(ids_of(&relay.read_new(10, BLOCK).await.expect("reads")), replicated, "the replica has them");

    replica.pause();
    let alone = harness.append(3).await;
    let started = Instant::now();
    assert!(relay.read_new(10, BLOCK).await.expect("reads").is_empty(), "not published: the replica lacks them");
    assert!(started.elapsed() >= Duration::from_millis(200), "after the wait: {:?}", started.elapsed());
    assert_eq!(harness.consumers().await, [("r1".to_owned(), 5)], "left pending, beside the two not removed yet");

    replica.resume();
    let claimed = relay.claim_idle(Duration::ZERO, 10).await.expect("claims");
    assert_eq!(ids_of(&claimed), [replicated, alone].concat(), "claimed once the replica has them");

    // No replica at all: nothing can be promoted without these.
    replica.kill();
    let started = Instant::now();
    while harness.replicas().await != 0 {
        assert!(started.elapsed() < Duration::from_secs(10), "the master still lists its replica");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let master_alone = harness.append(1).await;
    assert_eq!(ids_of(&relay.read_new(10, BLOCK).await.expect("reads")), master_alone);
}

#[tokio::test]
async fn consumers_of_gone_relays_leave_the_group_once_nothing_is_pending_for_them() {
    let h = harness().await;
    let live = h.relay("relay-live").await;
    let gone_empty = h.relay("relay-gone-empty").await;
    let gone_pending = h.relay("relay-gone-pending").await;

    // One gone relay published and removed all it read; another died
    // holding entries.
    h.append(2).await;
    let published = gone_empty.read_new(2, BLOCK).await.expect("reads");
    gone_empty.remove(&published).await.expect("removes");
    let stranded = h.append(3).await;
    let stranded_entries = gone_pending.read_new(10, BLOCK).await.expect("reads");
    assert_eq!(ids_of(&stranded_entries), stranded);
    // The live relay has published what it read: nothing pending.
    h.append(1).await;
    let read = live.read_new(10, BLOCK).await.expect("reads");
    assert_eq!(read.len(), 1);
    live.remove(&read).await.expect("removes");

    // None has been idle for an hour: nothing goes.
    assert!(live.retire_idle_consumers(Duration::from_secs(3600)).await.expect("retires").is_empty());
    assert_eq!(h.consumers().await.len(), 3);

    // Idle at all (a bound of 0 ms): the gone relay with nothing pending
    // goes; the one holding entries stays, and so does the caller.
    let deadline = Instant::now() + Duration::from_secs(5);
    let removed = loop {
        let removed = live.retire_idle_consumers(Duration::ZERO).await.expect("retires");
        if !removed.is_empty() || Instant::now() >= deadline {
            break removed;
        }
    };
    assert_eq!(removed, vec!["relay-gone-empty".to_owned()]);
    let left: BTreeSet<(String, usize)> = h.consumers().await.into_iter().collect();
    assert_eq!(left, BTreeSet::from([("relay-gone-pending".to_owned(), 3), ("relay-live".to_owned(), 0)]));

    // Once its entries are claimed (and published), it goes too.
    h.pend_as_if_idle("relay-gone-pending", &stranded, Duration::from_secs(3600)).await;
    let claimed = live.claim_idle(Duration::from_secs(60), 10).await.expect("claims");
    assert_eq!(ids_of(&claimed), stranded);
    live.remove(&stranded_entries).await.expect("removes");
    let deadline = Instant::now() + Duration::from_secs(5);
    let removed = loop {
        let removed = live.retire_idle_consumers(Duration::ZERO).await.expect("retires");
        if !removed.is_empty() || Instant::now() >= deadline {
            break removed;
        }
    };
    assert_eq!(removed, vec!["relay-gone-pending".to_owned()]);
    assert_eq!(h.consumers().await, vec![("relay-live".to_owned(), 0)], "the caller is never removed");
    assert_eq!(live.len().await.expect("len"), 0, "nothing was lost on the way");
}

/// Relays on a Redis Cluster: one outbox per voucher bucket, on every
/// master, found and drained; a dead relay's entries claimed; outboxes of
/// sales that are gone removed.
mod across_shards {
    use std::collections::{BTreeSet, HashMap};
    use std::time::{Duration, Instant};

    use chrono::Utc;
    use seckill_core::config::RedisConfig;
    use seckill_core::event::VoucherCreated;
    use seckill_core::{Envelope, Event, OrderId, UserId, VoucherId};
    use seckill_devstack::shared_test_cluster;
    use seckill_gate::{Admission, Gate, Outbox, OutboxEntry, OutboxHints};

    use super::BLOCK;

    fn order_of(entry: &OutboxEntry) -> OrderId {
        match Envelope::decode(&entry.record).expect("an event").event {
            Event::OrderAccepted(order) => order.order_id,
            other => panic!("not an order: {other:?}"),
        }
    }

    async fn split_voucher(gate: &Gate, shards: u32) -> VoucherId {
        let now = Utc::now();
        let definition = VoucherCreated {
            voucher_id: VoucherId::generate(),
            stock: 1_000,
            per_user_limit: 1,
            begins_at: now - chrono::Duration::minutes(1),
            ends_at: now + chrono::Duration::hours(1),
            hold_seconds: 0,
            shards,
            title: None,
            description: None,
            price: 0,
            currency: None,
            queue: None,
            draw: None,
            challenge_bits: 0,
        };
        assert!(gate.load_voucher(&definition).await.expect("loads"));
        definition.voucher_id
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn orders_for_unknown_vouchers_and_hints_that_resolve_to_nothing_cost_the_relay_nothing() {
        let cluster = shared_test_cluster().expect("the Redis Cluster starts (run scripts/setup)");
        let prefix = format!("phantom{}", &uuid::Uuid::now_v7().simple().to_string()[20..]);
        let config = RedisConfig::cluster(cluster.seed_urls(), prefix.clone());
        let hints = OutboxHints::new();
        let gate = Gate::connect(&config).await.expect("connects").with_outbox_hints(hints.clone());
        let relay =
            Outbox::connect(&config, "relay-phantoms", BLOCK).await.expect("connects").with_hints(hints.clone());
        assert!(relay.read_new(10, BLOCK).await.expect("reads").is_empty(), "the first full read");

        // A thousand orders for voucher ids nobody created: nothing for the
        // relay to read, so nothing hinted.
        for i in 0..1_000 {
            let user = UserId::parse(&format!("prober{i}")).expect("valid");
            let refused = gate.admit(VoucherId::generate(), &user, 1, OrderId::generate(), None).await.expect("admit");
            assert_eq!(refused, Admission::Rejected(seckill_gate::Rejection::UnknownVoucher));
        }
        assert_eq!(hints.len(), 0, "an unknown voucher hints nothing");

        // Hints of outboxes that do not exist (admission calls that timed
        // out before they ran) are dropped at the first read, not re-hinted.
        for _ in 0..1_000 {
            hints.touch(&gate.keys(VoucherId::generate()).outbox);
        }
        assert!(relay.read_new(500, BLOCK).await.expect("reads").is_empty());
        assert_eq!(hints.len(), 0, "a hint that does not resolve expires");

        // So the relay at idle waits for hints again instead of spinning
        // on phantoms: its next read finds nothing hinted.
        assert!(relay.read_new(500, BLOCK).await.expect("reads").is_empty());
        assert_eq!(hints.len(), 0);

        // A real order is read by the next call.
        let fresh = split_voucher(&gate, 1).await;
        let order = OrderId::generate();
        let buyer = UserId::parse("real").expect("valid");
        assert!(matches!(gate.admit(fresh, &buyer, 1, order, None).await.expect("admits"), Admission::Admitted { .. }));
        assert_eq!(hints.len(), 1, "its outbox hinted");
        let read = relay.read_new(10, BLOCK).await.expect("reads");
        assert_eq!(read.iter().map(order_of).collect::<Vec<_>>(), vec![order]);
        relay.remove(&read).await.expect("removes");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_outbox_on_every_master_is_relayed_and_a_dead_relays_entries_are_claimed() {
        let cluster = shared_test_cluster().expect("the Redis Cluster starts (run scripts/setup)");
        let prefix = format!("relay{}", &uuid::Uuid::now_v7().simple().to_string()[20..]);
        let config = RedisConfig::cluster(cluster.seed_urls(), prefix.clone());
        let gate = Gate::connect(&config).await.expect("connects");
        let vouchers = [split_voucher(&gate, 4).await, split_voucher(&gate, 4).await, split_voucher(&gate, 1).await];
        let mut admitted = BTreeSet::new();
        for i in 0..60 {
            let voucher = vouchers[i % 3];
            let (order, user) = (OrderId::generate(), UserId::parse(&format!("u{i}")).expect("valid"));
            assert!(matches!(
                gate.admit(voucher, &user, 1, order, None).await.expect("admits"),
                Admission::Admitted { .. }
            ));
            admitted.insert(order);
        }
        // The outboxes are where their buckets are: on every master.
        let mut masters = BTreeSet::new();
        for voucher in vouchers {
            let layout = gate.layout(voucher).await.expect("reads").expect("loaded");
            for bucket in 0..layout.shards() {
                masters.insert(cluster.master_of(layout.slot(bucket)).expect("a master serves it"));
            }
        }
        assert_eq!(masters.len(), 3, "the buckets span the three masters");

        // A relay reads a first batch and dies without acknowledging it.
        let dead = Outbox::connect(&config, "relay-dead", BLOCK).await.expect("connects");
        assert_eq!(dead.streams().len(), 9, "found by walking every master: {:?}", dead.streams());
        let stranded = dead.read_new(7, BLOCK).await.expect("reads");
        assert_eq!(stranded.len(), 7);

        // A live relay drains the rest, then claims the dead one's once idle.
        let live = Outbox::connect(&config, "relay-live", BLOCK).await.expect("connects");
        let mut relayed: HashMap<OrderId, usize> = HashMap::new();
        let deadline = Instant::now() + Duration::from_secs(30);
        while relayed.len() < admitted.len() {
            assert!(Instant::now() < deadline, "relayed {} of {}", relayed.len(), admitted.len());
            let mut batch = live.read_new(10, BLOCK).await.expect("reads");
            batch.extend(live.claim_idle(Duration::from_millis(200), 10).await.expect("claims"));
            for entry in &batch {
                *relayed.entry(order_of(entry)).or_default() += 1;
            }
            live.remove(&batch).await.expect("removes");
        }
        assert_eq!(relayed.keys().copied().collect::<BTreeSet<_>>(), admitted);
        assert!(relayed.values().all(|times| *times == 1), "each entry relayed once: {relayed:?}");
        assert_eq!(live.len().await.expect("len"), 0, "every outbox drained");

        // An ingress's own admissions are read at once, through its hints,
        // from an outbox no walk has found yet.
        let hints = OutboxHints::new();
        let hinting = gate.clone().with_outbox_hints(hints.clone());
        let relay = Outbox::connect(&config, "relay-hinted", BLOCK).await.expect("connects").with_hints(hints);
        assert!(relay.read_new(10, BLOCK).await.expect("reads").is_empty(), "the first full read");
        let fresh = split_voucher(&gate, 1).await;
        let order = OrderId::generate();
        let buyer = UserId::parse("hinted").expect("valid");
        assert!(matches!(
            hinting.admit(fresh, &buyer, 1, order, None).await.expect("admits"),
            Admission::Admitted { .. }
        ));
        let read = relay.read_new(10, Duration::from_millis(900)).await.expect("reads");
        assert_eq!(read.iter().map(order_of).collect::<Vec<_>>(), vec![order]);
        relay.remove(&read).await.expect("removes");

        // An outbox whose bucket expired but that still holds an order is
        // kept (retire_outbox.lua refuses it): the order is relayed first.
        let unrelayed = split_voucher(&gate, 1).await;
        let waiting = OrderId::generate();
        let waiter = UserId::parse("waiting").expect("valid");
        assert!(matches!(
            gate.admit(unrelayed, &waiter, 1, waiting, None).await.expect("admits"),
            Admission::Admitted { .. }
        ));
        let unrelayed_keys = gate.keys(unrelayed);
        let mut connection = gate.connection().clone();
        let _: () = redis::cmd("DEL").arg(&unrelayed_keys.voucher).query_async(&mut connection).await.expect("DEL");
        relay.discover().await.expect("walks");
        let kept: u32 =
            redis::cmd("XLEN").arg(&unrelayed_keys.outbox).query_async(&mut connection).await.expect("XLEN");
        assert_eq!(kept, 1, "a non-empty outbox is never removed");
        // Found by the walk, read at the next full read.
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let read = relay.read_new(10, BLOCK).await.expect("reads");
            relay.remove(&read).await.expect("removes");
            if read.iter().any(|entry| order_of(entry) == waiting) {
                break;
            }
            assert!(Instant::now() < deadline, "the order in the kept outbox was never read");
        }

        // The sale's keys expire: its empty outbox goes at the next walk.
        let keys = gate.keys(fresh);
        let mut connection = gate.connection().clone();
        let _: () = redis::cmd("DEL").arg(&keys.voucher).query_async(&mut connection).await.expect("DEL");
        relay.discover().await.expect("walks");
        let left: u32 = redis::cmd("EXISTS").arg(&keys.outbox).query_async(&mut connection).await.expect("EXISTS");
        assert_eq!(left, 0);
        assert!(!relay.streams().contains(&keys.outbox));
    }
}
