//! Admission, release and admin updates.

use std::time::Duration;

use chrono::Utc;
use futures::future::join_all;
use seckill_core::event::VoucherUpdated;
use seckill_core::{OrderId, VoucherId};
use seckill_gate::{Admission, Outbox, Rejection, RetryKey, UpdateResult};

use crate::{definition, open_window, user, voucher, Harness};

async fn admits_until_exactly_zero_then_sold_out(h: &Harness) {
    let v = voucher(&h.gate, 3, 1).await;
    for (i, left) in [2, 1, 0].into_iter().enumerate() {
        let admitted = h.gate.admit(v, &user(&format!("u{i}")), 1, OrderId::generate(), None).await.expect("admit");
        assert_eq!(admitted, Admission::Admitted { remaining: left });
    }
    let refused = h.gate.admit(v, &user("late"), 1, OrderId::generate(), None).await.expect("admit");
    assert_eq!(refused, Admission::Rejected(Rejection::SoldOut { remaining: 0 }));
    assert_eq!(h.gate.remaining(v).await.expect("read"), Some(0), "never below zero");
}

async fn a_second_order_by_the_same_user_is_a_duplicate_naming_the_first(h: &Harness) {
    let v = voucher(&h.gate, 5, 1).await;
    let first = OrderId::generate();
    assert!(matches!(
        h.gate.admit(v, &user("alice"), 1, first, None).await.expect("admit"),
        Admission::Admitted { .. }
    ));
    let again = h.gate.admit(v, &user("alice"), 1, OrderId::generate(), None).await.expect("admit");
    assert_eq!(again, Admission::Rejected(Rejection::DuplicateOrder { existing: Some(first) }));
    assert_eq!(h.gate.remaining(v).await.expect("read"), Some(4), "the duplicate took nothing");
}

async fn outside_the_window_nothing_is_admitted(h: &Harness) {
    let now = Utc::now();
    let early = definition(5, 1, (now + chrono::Duration::minutes(5), now + chrono::Duration::hours(1)));
    h.gate.load_voucher(&early).await.expect("loads");
    let early = early.voucher_id;
    let late = definition(5, 1, (now - chrono::Duration::hours(1), now - chrono::Duration::seconds(1)));
    h.gate.load_voucher(&late).await.expect("loads");
    let late = late.voucher_id;
    let u = user("w");
    assert_eq!(
        h.gate.admit(early, &u, 1, OrderId::generate(), None).await.expect("admit"),
        Admission::Rejected(Rejection::NotStarted)
    );
    assert_eq!(
        h.gate.admit(late, &u, 1, OrderId::generate(), None).await.expect("admit"),
        Admission::Rejected(Rejection::Ended)
    );
    assert_eq!(h.gate.remaining(early).await.expect("read"), Some(5));
    assert_eq!(h.gate.remaining(late).await.expect("read"), Some(5));
}

async fn an_unknown_voucher_is_refused_and_nothing_is_written(h: &Harness) {
    let v = VoucherId::generate();
    let refused = h.gate.admit(v, &user("x"), 1, OrderId::generate(), None).await.expect("admit");
    assert_eq!(refused, Admission::Rejected(Rejection::UnknownVoucher));
    let keys = h.gate.keys(v);
    let exists: u32 = redis::cmd("EXISTS")
        .arg(&keys.voucher)
        .arg(&keys.bought)
        .arg(&keys.orders)
        .query_async(&mut h.connection.clone())
        .await
        .expect("exists");
    assert_eq!(exists, 0);
}

async fn limits_count_units_across_orders(h: &Harness) {
    let v = voucher(&h.gate, 10, 3).await;
    let u = user("bulk");
    assert!(matches!(
        h.gate.admit(v, &u, 2, OrderId::generate(), None).await.expect("admit"),
        Admission::Admitted { remaining: 8 }
    ));
    assert_eq!(
        h.gate.admit(v, &u, 2, OrderId::generate(), None).await.expect("admit"),
        Admission::Rejected(Rejection::LimitExceeded { limit: 3 })
    );
    let last = OrderId::generate();
    assert!(matches!(h.gate.admit(v, &u, 1, last, None).await.expect("admit"), Admission::Admitted { remaining: 7 }));
    assert_eq!(
        h.gate.admit(v, &u, 1, OrderId::generate(), None).await.expect("admit"),
        Admission::Rejected(Rejection::DuplicateOrder { existing: Some(last) })
    );
}

async fn loading_twice_never_resets_a_running_sale(h: &Harness) {
    let v = definition(2, 1, open_window());
    assert!(h.gate.load_voucher(&v).await.expect("load"));
    h.gate.admit(v.voucher_id, &user("a"), 1, OrderId::generate(), None).await.expect("admit");
    assert!(!h.gate.load_voucher(&v).await.expect("load"));
    let v = v.voucher_id;
    assert_eq!(h.gate.remaining(v).await.expect("read"), Some(1));
}

async fn release_returns_units_exactly_once(h: &Harness) {
    let v = voucher(&h.gate, 1, 1).await;
    let (u, order) = (user("r"), OrderId::generate());
    h.gate.admit(v, &u, 1, order, None).await.expect("admit");
    assert!(h.gate.release(v, &u, 1, order, None).await.expect("release"));
    assert!(!h.gate.release(v, &u, 1, order, None).await.expect("second release"), "a retry changes nothing");
    assert_eq!(h.gate.remaining(v).await.expect("read"), Some(1));
    assert!(
        matches!(h.gate.admit(v, &u, 1, OrderId::generate(), None).await.expect("admit"), Admission::Admitted { .. }),
        "the user may order again"
    );
}

/// An order in the log that this Redis never admitted: `admit.lua` ran on a
/// master whose outbox was relayed, and a failover lost its writes. When the
/// processor fails or cancels it, `release.lua` must give nothing back (the
/// units were never taken here), and a late call admitting it is refused.
async fn a_release_gives_back_only_what_this_redis_admitted(h: &Harness) {
    let v = voucher(&h.gate, 3, 2).await;
    let (u, held) = (user("holder"), OrderId::generate());
    assert!(matches!(h.gate.admit(v, &u, 1, held, None).await.expect("admit"), Admission::Admitted { .. }));
    let phantom = OrderId::generate();
    assert!(!h.gate.release(v, &u, 1, phantom, None).await.expect("release"), "never admitted here");
    assert!(!h.gate.release(v, &u, 2, held, None).await.expect("release"), "admitted with another quantity");
    assert_eq!(h.gate.remaining(v).await.expect("read"), Some(2), "no unit handed out twice");
    let holders = h.gate.holders(v, 10).await.expect("reads").expect("loaded");
    assert_eq!(holders.bought.get(u.as_str()), Some(&1), "{holders:?}");
    assert_eq!(h.gate.admit(v, &u, 1, phantom, None).await.expect("admit"), Admission::Fenced, "a late call");
    assert!(!h.gate.release(v, &u, 1, phantom, None).await.expect("release"), "still nothing");
    assert_eq!(h.gate.remaining(v).await.expect("read"), Some(2));
    assert!(h.gate.release(v, &u, 1, held, None).await.expect("release"), "the order Redis admitted");
    assert_eq!(h.gate.remaining(v).await.expect("read"), Some(3));
}

async fn a_flushed_script_cache_is_recovered_transparently(h: &Harness) {
    let v = voucher(&h.gate, 2, 1).await;
    // What a Redis restart or failover does to the script cache.
    let _: () = redis::cmd("SCRIPT").arg("FLUSH").query_async(&mut h.connection.clone()).await.expect("flush");
    let admitted =
        h.gate.admit(v, &user("after-flush"), 1, OrderId::generate(), None).await.expect("EVALSHA falls back");
    assert_eq!(admitted, Admission::Admitted { remaining: 1 });
}

async fn concurrent_buyers_take_exactly_the_stock(h: &Harness) {
    let v = voucher(&h.gate, 10, 1).await;
    let attempts = (0..500).map(|i| {
        let gate = h.gate.clone();
        async move { gate.admit(v, &user(&format!("c{i}")), 1, OrderId::generate(), None).await.expect("admit") }
    });
    let results = tokio::time::timeout(Duration::from_secs(60), join_all(attempts)).await.expect("in time");
    let admitted = results.iter().filter(|r| matches!(r, Admission::Admitted { .. })).count();
    assert_eq!(admitted, 10);
    assert!(results
        .iter()
        .all(|r| matches!(r, Admission::Admitted { .. } | Admission::Rejected(Rejection::SoldOut { remaining: 0 }))));
    assert_eq!(h.gate.remaining(v).await.expect("read"), Some(0));
}

async fn concurrent_retries_with_one_key_admit_one_order(h: &Harness) {
    let v = voucher(&h.gate, 5, 3).await;
    let u = user("retrier");
    let key = RetryKey::new(&u, "checkout-7f3a").expect("valid key");
    let attempts = (0..100).map(|_| {
        let (gate, u, key) = (h.gate.clone(), u.clone(), key.clone());
        async move { gate.admit(v, &u, 1, OrderId::generate(), Some(&key)).await.expect("admit") }
    });
    let results = join_all(attempts).await;
    let admitted: Vec<_> = results.iter().filter(|r| matches!(r, Admission::Admitted { .. })).collect();
    assert_eq!(admitted.len(), 1, "{results:?}");
    let orders: std::collections::HashSet<_> = results
        .iter()
        .filter_map(|r| if let Admission::Replayed { order, quantity } = r { Some((*order, *quantity)) } else { None })
        .collect();
    assert_eq!(orders.len(), 1, "every retry names the same order");
    assert_eq!(orders.iter().next().map(|(_, quantity)| *quantity), Some(Some(1)), "{orders:?}");
    assert_eq!(h.gate.remaining(v).await.expect("read"), Some(4), "one unit taken");

    // Another user with the same key is a different request.
    let other = user("someone-else");
    let theirs = RetryKey::new(&other, "checkout-7f3a").expect("valid key");
    let admitted = h.gate.admit(v, &other, 1, OrderId::generate(), Some(&theirs)).await.expect("admit");
    assert!(matches!(admitted, Admission::Admitted { .. }));
}

async fn a_released_order_forgets_its_key_so_a_retry_is_admitted_afresh(h: &Harness) {
    let v = voucher(&h.gate, 1, 1).await;
    let u = user("unlucky");
    let key = RetryKey::new(&u, "k1").expect("valid key");
    let first = OrderId::generate();
    h.gate.admit(v, &u, 1, first, Some(&key)).await.expect("admit");
    assert!(h.gate.release(v, &u, 1, first, Some(&key)).await.expect("release"));
    let second = OrderId::generate();
    assert_eq!(h.gate.admit(v, &u, 1, second, Some(&key)).await.expect("admit"), Admission::Admitted { remaining: 0 });
    assert_eq!(
        h.gate.admit(v, &u, 1, OrderId::generate(), Some(&key)).await.expect("admit"),
        Admission::Replayed { order: second, quantity: Some(1) }
    );
}

async fn a_retry_asking_another_quantity_is_answered_with_the_first_admission(h: &Harness) {
    let v = voucher(&h.gate, 10, 5).await;
    let u = user("changes-mind");
    let key = RetryKey::new(&u, "cart-1").expect("valid key");
    let first = OrderId::generate();
    assert!(matches!(h.gate.admit(v, &u, 2, first, Some(&key)).await.expect("admit"), Admission::Admitted { .. }));
    // The same key, now asking for 4: nothing changes, and the answer says
    // what was admitted (the ingress writes the pending record from it).
    assert_eq!(
        h.gate.admit(v, &u, 4, OrderId::generate(), Some(&key)).await.expect("admit"),
        Admission::Replayed { order: first, quantity: Some(2) }
    );
    assert_eq!(h.gate.remaining(v).await.expect("read"), Some(8));
}

#[test]
fn idempotency_keys_are_validated() {
    let u = user("v");
    assert!(RetryKey::new(&u, "").is_err());
    assert!(RetryKey::new(&u, "has space").is_err());
    assert!(RetryKey::new(&u, &"k".repeat(129)).is_err());
    assert!(RetryKey::new(&u, "a-b_c.d:1").is_ok());
}

async fn releasing_an_order_of_an_unknown_voucher_creates_nothing_but_the_mark(h: &Harness) {
    let v = VoucherId::generate();
    let order = OrderId::generate();
    assert!(!h.gate.release(v, &user("ghost"), 1, order, None).await.expect("release"));
    assert_eq!(h.gate.remaining(v).await.expect("read"), None, "no partial voucher hash");
    // Remembered as released, with an expiry: a restore racing the release
    // keeps the units returned.
    let released = h.gate.keys(v).released;
    let mut redis = h.connection.clone();
    let marked: bool =
        redis::cmd("SISMEMBER").arg(&released).arg(order.to_string()).query_async(&mut redis).await.expect("SISMEMBER");
    let ttl: i64 = redis::cmd("PTTL").arg(&released).query_async(&mut redis).await.expect("PTTL");
    assert!(marked && ttl > 0, "{marked} {ttl}");
}

fn update(voucher: VoucherId) -> VoucherUpdated {
    VoucherUpdated { voucher_id: voucher, paused: None, ends_at: None, add_stock: 0 }
}

async fn a_paused_sale_admits_nothing_until_resumed(h: &Harness) {
    let v = voucher(&h.gate, 5, 1).await;
    let pause = VoucherUpdated { paused: Some(true), ..update(v) };
    assert!(
        matches!(h.gate.update_voucher(uuid::Uuid::now_v7(), &pause).await.expect("updates"), UpdateResult::Applied(g) if g.paused)
    );
    assert_eq!(
        h.gate.admit(v, &user("p"), 1, OrderId::generate(), None).await.expect("admit"),
        Admission::Rejected(Rejection::Paused)
    );
    assert_eq!(h.gate.remaining(v).await.expect("read"), Some(5));

    let resume = VoucherUpdated { paused: Some(false), ..update(v) };
    h.gate.update_voucher(uuid::Uuid::now_v7(), &resume).await.expect("updates");
    assert_eq!(
        h.gate.admit(v, &user("p"), 1, OrderId::generate(), None).await.expect("admit"),
        Admission::Admitted { remaining: 4 }
    );
}

async fn concurrent_additions_never_pass_the_largest_stock(h: &Harness) {
    use seckill_core::decision::StockLevel;
    use seckill_core::event::MAX_STOCK;

    // Twenty updates of 3 units each on a voucher 10 below the cap: each
    // fits alone (the ingress's check passes them all), together they
    // don't. A split voucher caps the voucher's total, bucket by bucket.
    for shards in [1, 4] {
        let definition = seckill_core::event::VoucherCreated { shards, ..definition(MAX_STOCK - 10, 1, open_window()) };
        assert!(h.gate.load_voucher(&definition).await.expect("loads"));
        let v = definition.voucher_id;
        let add = VoucherUpdated { add_stock: 3, ..update(v) };
        let updates = (0..20).map(|_| {
            let (gate, add) = (h.gate.clone(), add.clone());
            async move { gate.update_voucher(uuid::Uuid::now_v7(), &add).await.expect("updates") }
        });
        join_all(updates).await;
        let held = h.gate.voucher(v).await.expect("reads").expect("loaded");
        assert_eq!((held.stock, held.remaining), (MAX_STOCK, MAX_STOCK), "{shards} bucket(s): {held:?}");

        // The processor, capping the same way, ends with the same stock and
        // remaining whatever order the log has them in.
        let mut persistent = StockLevel::new(MAX_STOCK - 10, 0, 1);
        for _ in 0..20 {
            persistent.add(3);
        }
        assert_eq!((persistent.stock, persistent.remaining), (held.stock, held.remaining));
    }
}

async fn updates_apply_once_and_an_older_one_never_undoes_a_newer_one(h: &Harness) {
    let v = voucher(&h.gate, 0, 1).await;
    let (older, newer) = (uuid::Uuid::now_v7(), uuid::Uuid::now_v7());
    let pause_and_add = VoucherUpdated { paused: Some(true), add_stock: 2, ..update(v) };
    let resume = VoucherUpdated { paused: Some(false), ..update(v) };

    // The ingress applied only the newer update, the processor follows the
    // log and applies both, in log order, then sees them again.
    h.gate.update_voucher(newer, &resume).await.expect("updates");
    let late = h.gate.update_voucher(older, &pause_and_add).await.expect("updates");
    assert!(matches!(late, UpdateResult::Applied(ref g) if !g.paused && g.stock == 2 && g.remaining == 2), "{late:?}");
    let again = h.gate.update_voucher(older, &pause_and_add).await.expect("updates");
    assert!(matches!(again, UpdateResult::Repeated(ref g) if g.stock == 2), "{again:?}");

    let unknown = VoucherId::generate();
    assert_eq!(
        h.gate.update_voucher(uuid::Uuid::now_v7(), &update(unknown)).await.expect("updates"),
        UpdateResult::UnknownVoucher
    );
    assert_eq!(h.gate.voucher(unknown).await.expect("reads"), None);
}

/// A sale whose window had not begun when an order was refused as
/// `NotStarted`: judged by the gate's clock read after the answer, so a
/// stalled machine retries with a later start instead of failing.
async fn not_started_yet(h: &Harness) -> VoucherId {
    for lead_ms in [300, 1_000, 3_000, 10_000] {
        let begins_at = h.gate_now().await + chrono::Duration::milliseconds(lead_ms);
        let soon = definition(5, 1, (begins_at, begins_at + chrono::Duration::hours(1)));
        h.gate.load_voucher(&soon).await.expect("loads");
        let answer = h.gate.admit(soon.voucher_id, &user("e"), 1, OrderId::generate(), None).await.expect("admit");
        if h.gate_now().await < begins_at {
            assert_eq!(answer, Admission::Rejected(Rejection::NotStarted), "asked before begins_at");
            return soon.voucher_id;
        }
    }
    panic!("the gate's clock passed every begins_at before an answer came back");
}

async fn window_edges_follow_the_redis_clock_and_an_extended_end(h: &Harness) {
    let now = h.gate_now().await;
    // Ends one second ago: ended. Begins shortly: not started, then open.
    let ended = definition(5, 1, (now - chrono::Duration::hours(1), now - chrono::Duration::seconds(1)));
    h.gate.load_voucher(&ended).await.expect("loads");
    let ended = ended.voucher_id;
    let soon = not_started_yet(h).await;
    // Waits on the window itself, not on a guess about timing.
    let mut admitted = false;
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        if let Admission::Admitted { .. } =
            h.gate.admit(soon, &user("e"), 1, OrderId::generate(), None).await.expect("admit")
        {
            admitted = true;
            break;
        }
    }
    assert!(admitted, "admitted once begins_at passed");

    assert_eq!(
        h.gate.admit(ended, &user("e"), 1, OrderId::generate(), None).await.expect("admit"),
        Admission::Rejected(Rejection::Ended)
    );
    let extend = VoucherUpdated { ends_at: Some(now + chrono::Duration::hours(1)), ..update(ended) };
    h.gate.update_voucher(uuid::Uuid::now_v7(), &extend).await.expect("updates");
    assert_eq!(
        h.gate.admit(ended, &user("e"), 1, OrderId::generate(), None).await.expect("admit"),
        Admission::Admitted { remaining: 4 }
    );
}

async fn an_admitted_order_is_in_the_outbox_and_a_full_outbox_admits_nothing(h: &Harness) {
    let gate = h.gate.clone().with_outbox_limit(2);
    let v = voucher(&gate, 10, 1).await;
    let first = OrderId::generate();
    assert_eq!(gate.admit(v, &user("o1"), 1, first, None).await.expect("admit"), Admission::Admitted { remaining: 9 });
    assert!(matches!(
        gate.admit(v, &user("o2"), 1, OrderId::generate(), None).await.expect("admit"),
        Admission::Admitted { .. }
    ));
    assert_eq!(
        gate.admit(v, &user("o3"), 1, OrderId::generate(), None).await.expect("admit"),
        Admission::Backlogged { entries: 2 }
    );
    assert_eq!(gate.remaining(v).await.expect("read"), Some(8), "a refused order takes nothing");

    // The relay's side: read, then remove; the next order fits again.
    let config = h.config.clone();
    let outbox = Outbox::connect(&config, "relay-a", Duration::from_millis(50)).await.expect("outbox");
    let read = outbox.read_new(10, Duration::from_millis(50)).await.expect("reads");
    assert_eq!(read.len(), 2);
    assert_eq!(read[0].key, v.to_string());
    let record = seckill_core::Envelope::decode(&read[0].record).expect("an event");
    assert!(matches!(record.event, seckill_core::Event::OrderAccepted(ref o) if o.order_id == first));

    // Relay a dies holding them; relay b claims them once idle.
    let other = Outbox::connect(&config, "relay-b", Duration::from_millis(50)).await.expect("outbox");
    assert!(other.claim_idle(Duration::from_secs(60), 10).await.expect("claims").is_empty(), "not idle yet");
    tokio::time::sleep(Duration::from_millis(20)).await;
    let claimed = other.claim_idle(Duration::from_millis(10), 10).await.expect("claims");
    assert_eq!(claimed, read);
    other.remove(&claimed).await.expect("removes");
    assert_eq!(other.len().await.expect("len"), 0);
    assert!(matches!(
        gate.admit(v, &user("o3"), 1, OrderId::generate(), None).await.expect("admit"),
        Admission::Admitted { .. }
    ));
}

/// A priced voucher's orders carry what they owe, fixed by the admission
/// script from the price Redis holds: price × quantity, in its currency.
async fn a_priced_admission_fixes_the_amount_in_the_record(h: &Harness) {
    let euro = seckill_core::money::Currency::parse("EUR").expect("valid");
    let definition = seckill_core::event::VoucherCreated {
        price: 1_999,
        currency: Some(euro),
        hold_seconds: 60,
        ..crate::definition(10, 3, open_window())
    };
    assert!(h.gate.load_voucher(&definition).await.expect("loads"));
    let v = definition.voucher_id;
    let order = OrderId::generate();
    assert!(matches!(
        h.gate.admit(v, &user("payer"), 3, order, None).await.expect("admit"),
        Admission::Admitted { .. }
    ));
    let free = voucher(&h.gate, 10, 3).await;
    let free_order = OrderId::generate();
    assert!(matches!(
        h.gate.admit(free, &user("payer"), 2, free_order, None).await.expect("admit"),
        Admission::Admitted { .. }
    ));

    let outbox = Outbox::connect(&h.config, &format!("relay-{}", uuid::Uuid::now_v7()), Duration::from_millis(50))
        .await
        .expect("outbox");
    let mut records = Vec::new();
    for _ in 0..20 {
        records.extend(outbox.read_new(10, Duration::from_millis(50)).await.expect("reads"));
        if records.len() >= 2 {
            break;
        }
    }
    let accepted: Vec<seckill_core::event::OrderAccepted> = records
        .iter()
        .map(|entry| match seckill_core::Envelope::decode(&entry.record).expect("a valid event").event {
            seckill_core::Event::OrderAccepted(order) => order,
            other => panic!("not an acceptance: {other:?}"),
        })
        .collect();
    let priced = accepted.iter().find(|o| o.order_id == order).expect("the priced order");
    assert_eq!((priced.amount, priced.currency), (5_997, Some(euro)), "1,999 × 3");
    let free = accepted.iter().find(|o| o.order_id == free_order).expect("the free order");
    assert_eq!((free.amount, free.currency), (0, None), "nothing owed, nothing written");
    outbox.remove(&records).await.expect("removes");
}

async fn an_admitted_order_is_readable_by_id_at_once_from_the_admissions_own_record(h: &Harness) {
    let gate = h.gate.clone().with_pending_records(Duration::from_secs(60));
    let euro = seckill_core::money::Currency::parse("EUR").expect("valid");
    let definition = seckill_core::event::VoucherCreated {
        price: 250,
        currency: Some(euro),
        ..crate::definition(1, 2, open_window())
    };
    assert!(gate.load_voucher(&definition).await.expect("loads"));
    let v = definition.voucher_id;
    let (admitted, refused) = (OrderId::generate(), OrderId::generate());
    let buyer = user("reads-at-once");
    assert!(matches!(gate.admit(v, &buyer, 1, admitted, None).await.expect("admit"), Admission::Admitted { .. }));
    let sold_out = gate.admit(v, &user("too-late"), 1, refused, None).await.expect("admit");
    assert!(matches!(sold_out, Admission::Rejected(Rejection::SoldOut { .. })), "{sold_out:?}");

    let key = seckill_gate::pending_order_key(&h.config.key_prefix, admitted);
    if h.config.is_cluster() {
        // The record's key is in another slot than the voucher's: the
        // caller writes it after the call.
        assert!(!gate.admission_writes_pending());
        assert_eq!(gate.pending(admitted).await.expect("reads"), None);
        return;
    }
    assert!(gate.admission_writes_pending());
    let pending = gate.pending(admitted).await.expect("reads").expect("the admission wrote the record");
    assert_eq!((pending.order_id, &pending.user_id, pending.voucher_id), (admitted, &buyer, v));
    assert_eq!((pending.amount, pending.currency), (250, Some(euro)), "the amount Redis admitted at");
    let ttl: i64 = redis::cmd("PTTL").arg(&key).query_async(&mut h.connection.clone()).await.expect("PTTL");
    assert!((1..=60_000).contains(&ttl), "the record lives its time: {ttl} ms");
    assert_eq!(gate.pending(refused).await.expect("reads"), None, "a refused order has none");
    // Without the setting, the caller writes it (as on a cluster).
    let other = voucher(&h.gate, 5, 1).await;
    let unrecorded = OrderId::generate();
    assert!(matches!(
        h.gate.admit(other, &buyer, 1, unrecorded, None).await.expect("admit"),
        Admission::Admitted { .. }
    ));
    assert_eq!(h.gate.pending(unrecorded).await.expect("reads"), None);
}

crate::on_single_and_cluster! {
    // SCRIPT FLUSH only on a Redis of the test's own: on the shared cluster
    // it would flush every other test's scripts too.
    single_only: [a_flushed_script_cache_is_recovered_transparently],
    both: [
        admits_until_exactly_zero_then_sold_out,
        a_second_order_by_the_same_user_is_a_duplicate_naming_the_first,
        outside_the_window_nothing_is_admitted,
        an_unknown_voucher_is_refused_and_nothing_is_written,
        limits_count_units_across_orders,
        loading_twice_never_resets_a_running_sale,
        release_returns_units_exactly_once,
        a_release_gives_back_only_what_this_redis_admitted,
        concurrent_buyers_take_exactly_the_stock,
        concurrent_retries_with_one_key_admit_one_order,
        a_released_order_forgets_its_key_so_a_retry_is_admitted_afresh,
        a_retry_asking_another_quantity_is_answered_with_the_first_admission,
        releasing_an_order_of_an_unknown_voucher_creates_nothing_but_the_mark,
        a_paused_sale_admits_nothing_until_resumed,
        updates_apply_once_and_an_older_one_never_undoes_a_newer_one,
        concurrent_additions_never_pass_the_largest_stock,
        window_edges_follow_the_redis_clock_and_an_extended_end,
        an_admitted_order_is_in_the_outbox_and_a_full_outbox_admits_nothing,
        a_priced_admission_fixes_the_amount_in_the_record,
        an_admitted_order_is_readable_by_id_at_once_from_the_admissions_own_record,
    ],
}
