//! The gate against a real Redis and a real local Redis Cluster: the Lua
//! scripts, vouchers split into buckets, transfers between them and what
//! admin requests remember, one module per concern; the harness and the
//! fixtures every module uses are here. Most scenarios run twice, on one
//! Redis of their own and on the test process's shared cluster (three
//! masters) under a key prefix of their own ([`on_single_and_cluster`]).

// Test helpers are `pub(crate)` for the modules; nothing is exported.
#![allow(unreachable_pub)]

/// A script of `lua/` with its preludes before it, as the gate loads it
/// (`gate/src/gate.rs`, `preluded!`), for the modules that run a script
/// by hand.
macro_rules! preluded {
    ($($prelude:literal),+ => $script:literal) => {
        concat!($(include_str!(concat!("../../../lua/", $prelude)),)+ include_str!(concat!("../../../lua/", $script)))
    };
}

mod admin_requests;
mod admission;
mod beacon;
mod buckets;
mod draw;
mod draw_restore;
mod expiry;
mod failover;
mod proof;
mod replica_acks;
mod restore;
mod room;
mod room_beacon;
mod room_beacon_restore;
mod room_expiry;
mod room_restore_steps;
mod room_revealed_restore;
mod room_sealed_restore;
mod settle;
mod transfers;
mod validation;
mod windows;

use chrono::{DateTime, Utc};
use seckill_core::config::RedisConfig;
use seckill_core::event::VoucherCreated;
use seckill_core::{Envelope, UserId, VoucherId};
use seckill_devstack::{shared_test_cluster, Redis, RedisPersistence, TempDir};
use seckill_gate::{outbox_key, Gate, GateConnection, Ledger, VoucherAdmission};

pub(crate) struct Harness {
    pub(crate) gate: Gate,
    /// What a service would be configured with to reach the same keys.
    pub(crate) config: RedisConfig,
    pub(crate) connection: GateConnection,
    _redis: Option<(Redis, TempDir)>,
}

impl Harness {
    /// The outbox an order of `voucher` (one bucket) goes to.
    pub(crate) fn outbox_of(&self, voucher: VoucherId) -> String {
        if self.config.is_cluster() {
            self.gate.keys(voucher).outbox
        } else {
            outbox_key(&self.config.key_prefix)
        }
    }

    /// The gate's clock: Redis's `TIME`, which the scripts judge windows by
    /// (one machine's clock, whichever node of a cluster answers).
    pub(crate) async fn gate_now(&self) -> DateTime<Utc> {
        let (seconds, micros): (i64, i64) =
            redis::cmd("TIME").query_async(&mut self.connection.clone()).await.expect("TIME");
        DateTime::from_timestamp_micros(seconds * 1_000_000 + micros).expect("Redis's clock is in range")
    }
}

pub(crate) fn unique_prefix() -> String {
    format!("lua{}", &uuid::Uuid::now_v7().simple().to_string()[20..])
}

/// A Redis of the test's own.
pub(crate) async fn harness() -> Harness {
    let dir = TempDir::new().expect("temp dir");
    let redis = Redis::start(dir.path(), 0, RedisPersistence::None).expect("redis starts (run scripts/setup)");
    let config = RedisConfig::new(redis.url(), unique_prefix());
    connect(config, Some((redis, dir))).await
}

/// The process's shared Redis Cluster, under a prefix of the test's own.
pub(crate) async fn cluster_harness() -> Harness {
    let cluster = shared_test_cluster().expect("the Redis Cluster starts (run scripts/setup)");
    connect(RedisConfig::cluster(cluster.seed_urls(), unique_prefix()), None).await
}

async fn connect(config: RedisConfig, redis: Option<(Redis, TempDir)>) -> Harness {
    let connection = GateConnection::open(&config, std::time::Duration::from_secs(5)).await.expect("redis connects");
    let gate = Gate::new(connection.clone(), &config.key_prefix).await.expect("scripts load");
    Harness { gate, config, connection, _redis: redis }
}

/// Runs each scenario (`async fn(&Harness)`) as a test on a Redis of its
/// own and, unless `single_only`, as a test on the shared Redis Cluster.
#[macro_export]
macro_rules! on_single_and_cluster {
    (single_only: [$($single:ident),* $(,)?], both: [$($both:ident),* $(,)?] $(,)?) => {
        mod on_one_redis {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $both() {
                    super::$both(&$crate::harness().await).await
                }
            )*
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $single() {
                    super::$single(&$crate::harness().await).await
                }
            )*
        }
        mod on_the_cluster {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $both() {
                    super::$both(&$crate::cluster_harness().await).await
                }
            )*
        }
    };
}

pub(crate) fn user(name: &str) -> UserId {
    UserId::parse(name).expect("valid user id")
}

pub(crate) fn open_window() -> (DateTime<Utc>, DateTime<Utc>) {
    let now = Utc::now();
    (now - chrono::Duration::minutes(1), now + chrono::Duration::hours(1))
}

/// A voucher definition of `stock` units, `limit` per user, over `window`.
pub(crate) fn definition(
    stock: u64,
    limit: u32,
    (begins_at, ends_at): (DateTime<Utc>, DateTime<Utc>),
) -> VoucherCreated {
    VoucherCreated {
        voucher_id: VoucherId::generate(),
        stock,
        per_user_limit: limit,
        begins_at,
        ends_at,
        hold_seconds: 0,
        shards: 1,
        title: None,
        description: None,
        price: 0,
        currency: None,
        queue: None,
        draw: None,
        challenge_bits: 0,
    }
}

/// `definition` split into `shards` buckets.
pub(crate) fn split(definition: VoucherCreated, shards: u32) -> VoucherCreated {
    VoucherCreated { shards, ..definition }
}

/// The one voucher's state `log` gives, folded as `seckill reconcile`
/// folds the log: what a restore writes back.
pub(crate) fn state_of(log: &[Envelope]) -> VoucherAdmission {
    let mut ledger = Ledger::default();
    log.iter().for_each(|envelope| ledger.apply(envelope));
    let [state] = ledger.admissions().try_into().expect("one voucher");
    state
}

pub(crate) async fn voucher(gate: &Gate, stock: u64, limit: u32) -> VoucherId {
    let definition = definition(stock, limit, open_window());
    assert!(gate.load_voucher(&definition).await.expect("loads"));
    definition.voucher_id
}
