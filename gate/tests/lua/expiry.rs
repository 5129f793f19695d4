//! A voucher's keys expire a configured time after its sale ends, the end
//! moving with the admin's updates; a sale over and cleaned is never loaded
//! again.

use std::time::Duration;

use chrono::{DateTime, Utc};
use seckill_core::event::VoucherUpdated;
use seckill_core::{OrderId, VoucherId};
use seckill_gate::{Gate, RetryKey, Settlement, UpdateResult, VoucherKeys};

use crate::{definition, user, Harness};

/// How long the keys outlive the sale in these tests.
const TTL: Duration = Duration::from_secs(1);

/// Every key the voucher has in Redis, with its expiry (Unix ms; -1: none).
async fn expiries(h: &Harness, keys: &VoucherKeys) -> Vec<(String, i64)> {
    let mut found = Vec::new();
    for key in keys.all() {
        let at: i64 =
            redis::cmd("PEXPIRETIME").arg(key).query_async(&mut h.connection.clone()).await.expect("PEXPIRETIME");
        if at != -2 {
            found.push((key.to_owned(), at));
        }
    }
    found
}

async fn redis_now_ms(h: &Harness) -> i64 {
    h.gate_now().await.timestamp_millis()
}

/// A sale open for the next hour, with every key it can have written:
/// holders, orders, a retry key, admitted and released orders, a fenced id
/// and an applied update that added stock. Tests move its end once it is
/// busy, so how long that takes never decides what it holds.
async fn busy_sale(gate: &Gate) -> VoucherId {
    let sale = definition(10, 2, (Utc::now() - chrono::Duration::minutes(1), Utc::now() + chrono::Duration::hours(1)));
    assert!(gate.load_voucher(&sale).await.expect("loads"));
    let v = sale.voucher_id;
    let (kept, given_back) = (OrderId::generate(), OrderId::generate());
    let key = RetryKey::new(&user("keeper"), "k").expect("valid");
    gate.admit(v, &user("keeper"), 1, kept, Some(&key)).await.expect("admits");
    gate.admit(v, &user("giver"), 1, given_back, None).await.expect("admits");
    assert!(gate.release(v, &user("giver"), 1, given_back, None).await.expect("releases"));
    assert_eq!(gate.settle(v, &user("nobody"), OrderId::generate()).await.expect("settles"), Settlement::NotAdmitted);
    let update = VoucherUpdated { voucher_id: v, paused: None, ends_at: None, add_stock: 1 };
    gate.update_voucher(uuid::Uuid::now_v7(), &update).await.expect("updates");
    v
}

/// Moves `voucher`'s end to `ends_at`.
async fn end_at(gate: &Gate, voucher: VoucherId, ends_at: DateTime<Utc>) {
    let update = VoucherUpdated { voucher_id: voucher, paused: None, ends_at: Some(ends_at), add_stock: 0 };
    gate.update_voucher(uuid::Uuid::now_v7(), &update).await.expect("updates");
}

async fn every_key_of_a_sale_expires_its_ttl_after_the_end(h: &Harness) {
    let gate = h.gate.clone().with_ended_sale_ttl(TTL);
    let v = busy_sale(&gate).await;
    let ends_at = h.gate_now().await + chrono::Duration::milliseconds(500);
    end_at(&gate, v, ends_at).await;
    let keys = gate.keys(v);
    let written = expiries(h, &keys).await;
    assert_eq!(written.len(), 8, "the sale wrote every key: {written:?}");
    let expected = ends_at.timestamp_millis() + 1_000;
    assert!(written.iter().all(|(_, at)| *at == expected), "each expires at the end plus the TTL: {written:?}");

    // The cleaning itself: gone once Redis's clock passes that time.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !expiries(h, &keys).await.is_empty() {
        assert!(tokio::time::Instant::now() < deadline, "still there: {:?}", expiries(h, &keys).await);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(redis_now_ms(h).await >= expected);
}

async fn moving_the_end_moves_the_expiry_of_every_key(h: &Harness) {
    let gate = h.gate.clone().with_ended_sale_ttl(TTL);
    let v = busy_sale(&gate).await;
    let first_end = h.gate_now().await + chrono::Duration::milliseconds(500);
    end_at(&gate, v, first_end).await;
    let later = Utc::now() + chrono::Duration::hours(1);
    end_at(&gate, v, later).await;
    let keys = gate.keys(v);
    let moved = expiries(h, &keys).await;
    assert_eq!(moved.len(), 8, "{moved:?}");
    assert!(moved.iter().all(|(_, at)| *at == later.timestamp_millis() + 1_000), "{moved:?}");

    // Past the first end's expiry, the sale is still there and still sells.
    let first_expiry = first_end.timestamp_millis() + 1_000;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while redis_now_ms(h).await <= first_expiry {
        assert!(tokio::time::Instant::now() < deadline, "Redis's clock stands still");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(expiries(h, &keys).await.len(), 8);
    assert!(matches!(
        gate.admit(v, &user("late-comer"), 1, OrderId::generate(), None).await.expect("admits"),
        seckill_gate::Admission::Admitted { .. }
    ));
}

async fn a_sale_over_and_expired_is_not_loaded_again_and_a_fence_of_an_unknown_voucher_expires(h: &Harness) {
    let gate = h.gate.clone().with_ended_sale_ttl(TTL);
    let now = Utc::now();
    // The log's definition of a sale long over, delivered again.
    let old = definition(5, 1, (now - chrono::Duration::days(30), now - chrono::Duration::days(29)));
    assert!(!gate.load_voucher(&old).await.expect("answers"), "not loaded");
    assert!(expiries(h, &gate.keys(old.voucher_id)).await.is_empty(), "nothing written");

    let unknown = VoucherId::generate();
    assert_eq!(
        gate.settle(unknown, &user("nobody"), OrderId::generate()).await.expect("settles"),
        Settlement::NotAdmitted
    );
    let fenced = expiries(h, &gate.keys(unknown)).await;
    let now_ms = redis_now_ms(h).await;
    assert!(
        matches!(fenced.as_slice(), [(_, at)] if *at > now_ms && *at <= now_ms + 1_000),
        "the fence lasts the TTL: {fenced:?}"
    );
}

async fn a_sale_whose_end_was_moved_earlier_is_not_brought_back_by_its_definition(h: &Harness) {
    let gate = h.gate.clone().with_ended_sale_ttl(TTL);
    let sale = definition(10, 2, (Utc::now() - chrono::Duration::minutes(1), Utc::now() + chrono::Duration::hours(1)));
    assert!(gate.load_voucher(&sale).await.expect("loads"));
    let v = sale.voucher_id;
    end_at(&gate, v, h.gate_now().await + chrono::Duration::milliseconds(300)).await;
    let keys = gate.keys(v);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !expiries(h, &keys).await.is_empty() {
        assert!(tokio::time::Instant::now() < deadline, "still there: {:?}", expiries(h, &keys).await);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // A processor replaying the log (a new consumer group) delivers the
    // definition, with its first end an hour away, and an update adding
    // stock: the sale stays over.
    assert!(!gate.load_voucher(&sale).await.expect("answers"), "not loaded again");
    assert_eq!(gate.voucher(v).await.expect("reads"), None);
    let add = VoucherUpdated { voucher_id: v, paused: None, ends_at: None, add_stock: 5 };
    assert_eq!(gate.update_voucher(uuid::Uuid::now_v7(), &add).await.expect("answers"), UpdateResult::UnknownVoucher);
    assert!(expiries(h, &keys).await.is_empty(), "nothing written: {:?}", expiries(h, &keys).await);
}

async fn an_end_moved_into_the_past_ends_the_sale_and_removes_its_keys(h: &Harness) {
    let gate = h.gate.clone().with_ended_sale_ttl(TTL);
    let v = busy_sale(&gate).await;
    let keys = gate.keys(v);
    assert_eq!(expiries(h, &keys).await.len(), 8);
    // An admin ends the sale a minute ago: its keys' time (end + TTL) has
    // passed, so they go at once, and nothing is admitted any more.
    let past = Utc::now() - chrono::Duration::seconds(30);
    let end_it = VoucherUpdated { voucher_id: v, paused: None, ends_at: Some(past), add_stock: 0 };
    gate.update_voucher(uuid::Uuid::now_v7(), &end_it).await.expect("updates");
    assert!(expiries(h, &keys).await.is_empty(), "left: {:?}", expiries(h, &keys).await);
    assert_eq!(
        gate.admit(v, &user("too-late"), 1, OrderId::generate(), None).await.expect("answers"),
        seckill_gate::Admission::Rejected(seckill_gate::Rejection::UnknownVoucher)
    );
}

async fn holders_emptied_by_a_release_and_written_again_still_expire(h: &Harness) {
    let gate = h.gate.clone().with_ended_sale_ttl(TTL);
    let ends_at = Utc::now() + chrono::Duration::hours(1);
    let sale = definition(3, 1, (Utc::now() - chrono::Duration::minutes(1), ends_at));
    assert!(gate.load_voucher(&sale).await.expect("loads"));
    let (v, only) = (sale.voucher_id, user("only"));
    let first = OrderId::generate();
    gate.admit(v, &only, 1, first, None).await.expect("admits");
    // The one holder gives back: the holders' hashes are emptied, so gone.
    assert!(gate.release(v, &only, 1, first, None).await.expect("releases"));
    gate.admit(v, &only, 1, OrderId::generate(), None).await.expect("admits again");
    let keys = gate.keys(v);
    let expected = ends_at.timestamp_millis() + 1_000;
    for key in [&keys.bought, &keys.orders, &keys.admitted, &keys.released] {
        let at: i64 = redis::cmd("PEXPIRETIME").arg(key).query_async(&mut h.connection.clone()).await.expect("reads");
        assert_eq!(at, expected, "{key}");
    }
}

crate::on_single_and_cluster! {
    single_only: [],
    both: [
        every_key_of_a_sale_expires_its_ttl_after_the_end,
        moving_the_end_moves_the_expiry_of_every_key,
        a_sale_over_and_expired_is_not_loaded_again_and_a_fence_of_an_unknown_voucher_expires,
        holders_emptied_by_a_release_and_written_again_still_expire,
        a_sale_whose_end_was_moved_earlier_is_not_brought_back_by_its_definition,
        an_end_moved_into_the_past_ends_the_sale_and_removes_its_keys,
    ],
}
