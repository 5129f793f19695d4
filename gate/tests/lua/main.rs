//! The gate against a real Redis: the Lua scripts and what admin requests
//! remember, one module per concern; the harness and the fixtures every
//! module uses are here.

// Test helpers are `pub(crate)` for the modules; nothing is exported.
#![allow(unreachable_pub)]

mod admin_requests;
mod admission;
mod expiry;
mod restore;
mod settle;

use chrono::{DateTime, Utc};
use redis::aio::ConnectionManager;
use seckill_core::event::VoucherCreated;
use seckill_core::{UserId, VoucherId};
use seckill_devstack::{Redis, RedisPersistence, TempDir};
use seckill_gate::Gate;

pub(crate) struct Harness {
    pub(crate) gate: Gate,
    pub(crate) url: String,
    pub(crate) connection: ConnectionManager,
    _redis: Redis,
    _dir: TempDir,
}

pub(crate) async fn harness() -> Harness {
    let dir = TempDir::new().expect("temp dir");
    let redis = Redis::start(dir.path(), 0, RedisPersistence::None).expect("redis starts (run scripts/setup)");
    let connection =
        redis::Client::open(redis.url()).expect("url").get_connection_manager().await.expect("redis connects");
    let prefix = format!("lua{}", &uuid::Uuid::now_v7().simple().to_string()[20..]);
    let gate = Gate::new(connection.clone(), &prefix).await.expect("scripts load");
    Harness { gate, connection, url: redis.url(), _redis: redis, _dir: dir }
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
    }
}

pub(crate) async fn voucher(gate: &Gate, stock: u64, limit: u32) -> VoucherId {
    let definition = definition(stock, limit, open_window());
    assert!(gate.load_voucher(&definition).await.expect("loads"));
    definition.voucher_id
}
