//! Moving a sale's end moves the end of its waiting room's or draw's keys
//! and of its spent proofs and pace (`update_voucher.lua`): a sale extended
//! past its old end plus the ended-sale time keeps them to its new end.

use chrono::{DateTime, Duration, Utc};
use seckill_core::event::VoucherUpdated;
use seckill_core::VoucherId;
use seckill_gate::{Admission, Pace, Presented, Proof, UpdateResult};

use crate::{on_single_and_cluster, user, Harness};

on_single_and_cluster!(
    single_only: [],
    both: [extending_the_end_extends_the_room_and_the_draw],
);

/// The expiry (Unix ms) of each of `keys` that exists.
async fn expiries(h: &Harness, keys: &[String]) -> Vec<(String, i64)> {
    let mut found = Vec::new();
    for key in keys {
        let at: i64 =
            redis::cmd("PEXPIRETIME").arg(key).query_async(&mut h.connection.clone()).await.expect("PEXPIRETIME");
        if at != -2 {
            found.push((key.clone(), at));
        }
    }
    found
}

/// Moves `voucher`'s end to `ends_at`; the keys of its room, proofs and pace.
async fn extend(h: &Harness, voucher: VoucherId, ends_at: DateTime<Utc>) -> Vec<String> {
    let update = VoucherUpdated { voucher_id: voucher, paused: None, ends_at: Some(ends_at), add_stock: 0 };
    let applied = h.gate.update_voucher(uuid::Uuid::now_v7(), &update).await.expect("applies");
    assert!(matches!(applied, UpdateResult::Applied(_)), "{applied:?}");
    let keys = h.gate.keys(voucher);
    vec![keys.room, keys.line, keys.places, keys.seen, keys.holds, keys.ranks, keys.solved, keys.pace]
}

async fn extending_the_end_extends_the_room_and_the_draw(h: &Harness) {
    let ttl = 7 * 24 * 3_600 * 1_000;
    // Far past the old end (two hours away) plus the ended-sale time.
    let new_end = Utc::now() + Duration::days(30);
    let new_end_ms = new_end.timestamp_millis();

    // A waiting room with a place taken.
    let queued = crate::room::queue_definition(5, 1, 100);
    crate::room::open(h, &queued).await;
    h.gate.join_queue(queued.voucher_id, &user("waiter"), None).await.expect("joins");
    let keys = extend(h, queued.voucher_id, new_end).await;
    let found = expiries(h, &keys).await;
    assert!(found.len() >= 3, "the room, its line and its places exist: {found:?}");
    assert!(found.iter().all(|(_, at)| *at == new_end_ms + ttl), "the room lives to the new end: {found:?}");

    // A draw with an entry, and an order's spent proof and pace.
    let mut drawn = crate::draw::draw_definition(5, 1);
    drawn.challenge_bits = 8;
    crate::draw::open(h, &drawn).await;
    let later = (h.gate_now().await + Duration::minutes(1)).timestamp_millis();
    let pay = |nonce: &str| Proof { nonce: nonce.repeat(32), bits: 8, expires_ms: later };
    h.gate.enter_draw(drawn.voucher_id, &user("entrant"), Some(&pay("a"))).await.expect("enters");
    let order = seckill_core::event::OrderAccepted::now(drawn.voucher_id, user("entrant"), 1);
    let paced = Presented {
        proof: Some(pay("b")),
        pace: Pace { user_per_second: 1, user_burst: 5, ..Pace::default() },
        ..Presented::default()
    };
    let answer = h.gate.admit_presenting(&order, None, &paced).await.expect("answers");
    assert!(matches!(answer, Admission::Rejected(_)), "not a winner yet: {answer:?}");
    let keys = extend(h, drawn.voucher_id, new_end).await;
    let found = expiries(h, &keys).await;
    let names: Vec<&str> = found.iter().map(|(key, _)| key.rsplit(':').next().unwrap_or_default()).collect();
    for name in ["room", "places", "solved", "pace"] {
        assert!(names.contains(&name), "{name} exists: {found:?}");
    }
    assert!(found.iter().all(|(_, at)| *at == new_end_ms + ttl), "the draw lives to the new end: {found:?}");
}
