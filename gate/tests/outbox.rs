//! The relays' housekeeping of the outbox against a real Redis: claiming
//! walks the pending entries page by page, and consumers of relays that are
//! gone leave the group once nothing is pending for them.
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
        claimed.extend(ids_of(&claimer.claim_idle(Duration::from_secs(60), 2).await.expect("claims")));
    }
    assert_eq!(claimed, stranded, "every stranded entry claimed once, none of the live relay's");

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
    gone_empty.remove(&ids_of(&published)).await.expect("removes");
    let stranded = h.append(3).await;
    assert_eq!(ids_of(&gone_pending.read_new(10, BLOCK).await.expect("reads")), stranded);
    // The live relay has published what it read: nothing pending.
    h.append(1).await;
    let read = live.read_new(10, BLOCK).await.expect("reads");
    assert_eq!(read.len(), 1);
    live.remove(&ids_of(&read)).await.expect("removes");

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
    live.remove(&stranded).await.expect("removes");
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
