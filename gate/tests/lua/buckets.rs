//! Vouchers split into buckets: each user admitted in their own bucket (the
//! limit exact), a dry bucket borrowing from the others, `sold_out` only
//! once every bucket is dry, units given back to the user's bucket, updates
//! in every bucket, reads adding the buckets up, and a restore bucket by
//! bucket.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use futures::future::join_all;
use seckill_core::event::{Event, OrderAccepted, VoucherUpdated};
use seckill_core::{Envelope, OrderId, UserId, VoucherId};
use seckill_gate::{home_bucket, Admission, Gate, Ledger, Rejection, RestoreAction, RestoreMode, UpdateResult};

use crate::{definition, open_window, split, user, Harness};

/// One bucket as Redis holds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Level {
    pub(crate) stock: u64,
    pub(crate) remaining: u64,
    pub(crate) in_transit: u64,
}

/// Every bucket of `v`, bucket 0 first.
pub(crate) async fn levels(h: &Harness, v: VoucherId) -> Vec<Level> {
    let layout = h.gate.layout(v).await.expect("reads").expect("loaded");
    let mut levels = Vec::new();
    for keys in layout.all_keys(h.gate.prefix()) {
        let (stock, remaining, in_transit): (Option<u64>, Option<u64>, Option<u64>) = redis::cmd("HMGET")
            .arg(&keys.voucher)
            .arg(&["stock", "remaining", "in_transit"])
            .query_async(&mut h.connection.clone())
            .await
            .expect("HMGET");
        levels.push(Level {
            stock: stock.unwrap_or(0),
            remaining: remaining.unwrap_or(0),
            in_transit: in_transit.unwrap_or(0),
        });
    }
    levels
}

/// `count` user names (prefixed `tag`) homed to `bucket` of `shards`.
pub(crate) fn users_in(bucket: u32, shards: u32, count: usize, tag: &str) -> Vec<UserId> {
    (0..).map(|i| user(&format!("{tag}{i}"))).filter(|u| home_bucket(u, shards) == bucket).take(count).collect()
}

/// A voucher of `stock` units, `limit` per user, in `shards` buckets.
pub(crate) async fn split_voucher(gate: &Gate, stock: u64, limit: u32, shards: u32) -> VoucherId {
    let definition = split(definition(stock, limit, open_window()), shards);
    assert!(gate.load_voucher(&definition).await.expect("loads"));
    definition.voucher_id
}

async fn a_split_voucher_sells_exactly_its_stock(h: &Harness) {
    let v = split_voucher(&h.gate, 20, 1, 8).await;
    let shares: Vec<u64> = levels(h, v).await.iter().map(|level| level.remaining).collect();
    assert_eq!(shares, vec![3, 3, 3, 3, 2, 2, 2, 2], "the stock split like the definition says");
    let attempts = (0..300).map(|i| {
        let gate = h.gate.clone();
        async move { gate.admit(v, &user(&format!("b{i}")), 1, OrderId::generate(), None).await.expect("admit") }
    });
    let results = tokio::time::timeout(Duration::from_secs(60), join_all(attempts)).await.expect("in time");
    let admitted = results.iter().filter(|r| matches!(r, Admission::Admitted { .. })).count();
    assert_eq!(admitted, 20, "exactly the stock, whichever buckets the buyers were in");
    for result in &results {
        assert!(
            matches!(result, Admission::Admitted { .. } | Admission::Rejected(Rejection::SoldOut { remaining: 0 })),
            "{result:?}"
        );
    }
    assert!(levels(h, v).await.iter().all(|level| level.remaining == 0 && level.in_transit == 0));
    assert_eq!(h.gate.remaining(v).await.expect("reads"), Some(0));
    let stock: u64 = levels(h, v).await.iter().map(|level| level.stock).sum();
    assert_eq!(stock, 20, "transfers moved the allotments, never their sum");
}

async fn a_dry_bucket_borrows_and_only_a_dry_voucher_is_sold_out(h: &Harness) {
    let v = split_voucher(&h.gate, 4, 1, 4).await;
    // Every buyer is at home in bucket 2, which has one unit of its own.
    let buyers = users_in(2, 4, 5, "dry");
    for (i, buyer) in buyers.iter().take(4).enumerate() {
        let admitted = h.gate.admit(v, buyer, 1, OrderId::generate(), None).await.expect("admit");
        assert!(matches!(admitted, Admission::Admitted { .. }), "buyer {i}: {admitted:?}");
    }
    assert_eq!(levels(h, v).await.iter().map(|l| l.remaining).sum::<u64>(), 0);
    assert_eq!(
        h.gate.admit(v, &buyers[4], 1, OrderId::generate(), None).await.expect("admit"),
        Admission::Rejected(Rejection::SoldOut { remaining: 0 })
    );
    let elsewhere = &users_in(0, 4, 1, "dry-elsewhere")[0];
    assert_eq!(
        h.gate.admit(v, elsewhere, 1, OrderId::generate(), None).await.expect("admit"),
        Admission::Rejected(Rejection::SoldOut { remaining: 0 })
    );
    let stock: Vec<u64> = levels(h, v).await.iter().map(|l| l.stock).collect();
    assert_eq!(stock, vec![0, 0, 4, 0], "every unit moved to where the buyers were");
}

async fn the_limit_is_exact_and_quantities_borrow_from_several_buckets(h: &Harness) {
    let v = split_voucher(&h.gate, 8, 5, 4).await;
    let bulk = &users_in(1, 4, 1, "bulk")[0];
    // Bucket 1 has 2 units; 5 come from three buckets.
    let first = OrderId::generate();
    assert_eq!(h.gate.admit(v, bulk, 5, first, None).await.expect("admit"), Admission::Admitted { remaining: 0 });
    assert_eq!(
        h.gate.admit(v, bulk, 1, OrderId::generate(), None).await.expect("admit"),
        Admission::Rejected(Rejection::DuplicateOrder { existing: Some(first) })
    );
    assert_eq!(h.gate.remaining(v).await.expect("reads"), Some(3));
    // Asking for more than the whole voucher has is sold_out with what is left.
    let greedy = &users_in(3, 4, 1, "greedy")[0];
    assert_eq!(
        h.gate.admit(v, greedy, 4, OrderId::generate(), None).await.expect("admit"),
        Admission::Rejected(Rejection::SoldOut { remaining: 3 })
    );
    assert_eq!(
        h.gate.admit(v, greedy, 3, OrderId::generate(), None).await.expect("admit"),
        Admission::Admitted { remaining: 0 }
    );
    let holders = h.gate.holders(v, 10).await.expect("reads").expect("loaded");
    assert_eq!(holders.bought, HashMap::from([(bulk.to_string(), 5), (greedy.to_string(), 3)]));
}

async fn units_given_back_return_to_the_users_bucket(h: &Harness) {
    let v = split_voucher(&h.gate, 8, 2, 4).await;
    let buyer = &users_in(3, 4, 1, "giver")[0];
    let order = OrderId::generate();
    h.gate.admit(v, buyer, 2, order, None).await.expect("admit");
    assert_eq!(levels(h, v).await[3].remaining, 0);
    assert!(h.gate.release(v, buyer, 2, order, None).await.expect("releases"));
    assert!(!h.gate.release(v, buyer, 2, order, None).await.expect("releases"), "once");
    let after = levels(h, v).await;
    assert_eq!(after[3].remaining, 2, "back where they were taken: {after:?}");
    assert_eq!(h.gate.remaining(v).await.expect("reads"), Some(8));
    assert!(matches!(
        h.gate.admit(v, buyer, 2, OrderId::generate(), None).await.expect("admit"),
        Admission::Admitted { .. }
    ));
}

async fn updates_reach_every_bucket(h: &Harness) {
    let v = split_voucher(&h.gate, 10, 1, 4).await;
    let update = |paused, add_stock| VoucherUpdated { voucher_id: v, paused, ends_at: None, add_stock };
    let added = h.gate.update_voucher(uuid::Uuid::now_v7(), &update(None, 6)).await.expect("updates");
    assert!(matches!(added, UpdateResult::Applied(ref g) if g.stock == 16 && g.remaining == 16), "{added:?}");
    assert_eq!(
        levels(h, v).await.iter().map(|l| l.stock).collect::<Vec<_>>(),
        vec![5, 5, 3, 3],
        "each bucket gets its share of the added units"
    );
    let pause_id = uuid::Uuid::now_v7();
    h.gate.update_voucher(pause_id, &update(Some(true), 0)).await.expect("updates");
    let again = h.gate.update_voucher(pause_id, &update(Some(true), 0)).await.expect("updates");
    assert!(matches!(again, UpdateResult::Repeated(ref g) if g.paused), "{again:?}");
    for bucket in 0..4 {
        let buyer = &users_in(bucket, 4, 1, "paused")[0];
        assert_eq!(
            h.gate.admit(v, buyer, 1, OrderId::generate(), None).await.expect("admit"),
            Admission::Rejected(Rejection::Paused),
            "bucket {bucket}"
        );
    }
    h.gate.update_voucher(uuid::Uuid::now_v7(), &update(Some(false), 0)).await.expect("updates");
    let voucher = h.gate.voucher(v).await.expect("reads").expect("loaded");
    assert_eq!((voucher.stock, voucher.remaining, voucher.paused), (16, 16, false));
}

async fn reads_add_the_buckets_up_and_a_fresh_process_finds_the_buckets(h: &Harness) {
    let v = split_voucher(&h.gate, 12, 2, 3).await;
    // Another process (no memory of the voucher) admits in the right bucket:
    // admit.lua tells it the voucher's buckets.
    let fresh = Gate::new(h.connection.clone(), h.gate.prefix()).await.expect("scripts load");
    let mut admitted = HashSet::new();
    for i in 0..5 {
        let buyer = user(&format!("reader{i}"));
        assert!(matches!(
            fresh.admit(v, &buyer, 2, OrderId::generate(), None).await.expect("admit"),
            Admission::Admitted { .. }
        ));
        admitted.insert(buyer.to_string());
    }
    let [sale] = h.gate.sales(&[v]).await.expect("reads").try_into().expect("one");
    let sale = sale.expect("loaded");
    assert_eq!((sale.stock, sale.available, sale.per_user_limit), (12, 2, 2));
    let snapshot = h.gate.admission_snapshot(v).await.expect("reads").expect("loaded");
    assert_eq!((snapshot.stock, snapshot.remaining), (12, 2));
    assert_eq!(snapshot.bought.keys().cloned().collect::<HashSet<_>>(), admitted);
    assert!(snapshot.bought.values().all(|units| *units == 2));
    // Each user's units are in their own bucket only.
    let layout = h.gate.layout(v).await.expect("reads").expect("loaded");
    for (bucket, keys) in (0u32..).zip(layout.all_keys(h.gate.prefix())) {
        let holders: HashMap<String, u64> =
            redis::cmd("HGETALL").arg(&keys.bought).query_async(&mut h.connection.clone()).await.expect("HGETALL");
        assert!(holders.keys().all(|u| home_bucket(&user(u), 3) == bucket), "bucket {bucket}: {holders:?}");
    }
}

async fn a_split_voucher_is_restored_bucket_by_bucket(h: &Harness) {
    let definition = split(definition(12, 2, open_window()), 4);
    let v = definition.voucher_id;
    assert!(h.gate.load_voucher(&definition).await.expect("loads"));
    let mut log = vec![Envelope::new(Event::VoucherCreated(definition.clone()))];
    // Buyers all in bucket 1: it borrows from the others.
    for buyer in users_in(1, 4, 4, "restored") {
        let order = OrderAccepted {
            order_id: OrderId::generate(),
            voucher_id: v,
            user_id: buyer,
            quantity: 2,
            accepted_at: chrono::Utc::now(),
            amount: 0,
            currency: None,
            idempotency_key: None,
        };
        assert!(matches!(h.gate.admit_order(&order, None).await.expect("admit"), Admission::Admitted { .. }));
        log.push(Envelope::new(Event::OrderAccepted(order)));
    }
    let state = {
        let mut ledger = Ledger::default();
        log.iter().for_each(|event| ledger.apply(event));
        ledger.admissions().pop().expect("the voucher")
    };
    let healthy = h.gate.restore(&state, RestoreMode::Write).await.expect("restores");
    assert_eq!((healthy.action, healthy.remaining_after), (RestoreAction::Unchanged, Some(4)), "{healthy:?}");
    let before = levels(h, v).await;
    assert_eq!(before.iter().map(|l| l.stock).sum::<u64>(), 12);

    // The shard of bucket 1 loses everything of it.
    let layout = h.gate.layout(v).await.expect("reads").expect("loaded");
    let lost = layout.keys(h.gate.prefix(), 1);
    let _: () = redis::cmd("DEL").arg(lost.all().as_slice()).query_async(&mut h.connection.clone()).await.expect("DEL");
    assert_eq!(h.gate.restore(&state, RestoreMode::Check).await.expect("checks").action, RestoreAction::Corrected);
    let restored = h.gate.restore(&state, RestoreMode::Write).await.expect("restores");
    assert_eq!((restored.action, restored.remaining_after), (RestoreAction::Corrected, Some(4)), "{restored:?}");
    let after = levels(h, v).await;
    assert_eq!(after.iter().map(|l| l.stock).sum::<u64>(), 12, "{after:?}");
    assert_eq!(after[1].stock - after[1].remaining, 8, "bucket 1's users hold 8: {after:?}");
    assert_eq!(h.gate.restore(&state, RestoreMode::Check).await.expect("checks").action, RestoreAction::Unchanged);
    // The limit holds again in the restored bucket, and the rest still sells.
    let holder = &users_in(1, 4, 1, "restored")[0];
    assert!(matches!(
        h.gate.admit(v, holder, 1, OrderId::generate(), None).await.expect("admit"),
        Admission::Rejected(Rejection::DuplicateOrder { .. })
    ));
    for i in 0..4 {
        let buyer = user(&format!("after-restore{i}"));
        assert!(matches!(
            h.gate.admit(v, &buyer, 1, OrderId::generate(), None).await.expect("admit"),
            Admission::Admitted { .. }
        ));
    }
    assert_eq!(h.gate.remaining(v).await.expect("reads"), Some(0));
}

async fn vouchers_sharing_a_borrow_stripe_never_answer_for_each_other(h: &Harness) {
    // One stripe: every bucket of every voucher takes the same turns.
    let gate = h.gate.clone().with_borrow_stripes(1);
    // A is sold out; its buyers keep finding their bucket dry and borrowing.
    let a = split_voucher(&gate, 2, 1, 2).await;
    for round in 0..5 {
        // B has 8 units in 2 buckets, and its 8 buyers all live in bucket 0:
        // four of them must borrow bucket 1's units while A's borrows run.
        let b = split_voucher(&gate, 8, 1, 2).await;
        let buyers = users_in(0, 2, 8, &format!("b{round}-"));
        let a_requests = (0..60).map(|i| {
            let (gate, buyer) = (gate.clone(), user(&format!("a{round}-{i}")));
            async move { gate.admit(a, &buyer, 1, OrderId::generate(), None).await.expect("admit") }
        });
        let b_requests = buyers.into_iter().map(|buyer| {
            let gate = gate.clone();
            async move { gate.admit(b, &buyer, 1, OrderId::generate(), None).await.expect("admit") }
        });
        let (_, b_results) = tokio::join!(join_all(a_requests), join_all(b_requests));
        let admitted = b_results.iter().filter(|r| matches!(r, Admission::Admitted { .. })).count();
        assert_eq!(admitted, 8, "round {round}: every unit of B sells: {b_results:?}");
    }
}

crate::on_single_and_cluster! {
    single_only: [],
    both: [
        a_split_voucher_sells_exactly_its_stock,
        a_dry_bucket_borrows_and_only_a_dry_voucher_is_sold_out,
        the_limit_is_exact_and_quantities_borrow_from_several_buckets,
        units_given_back_return_to_the_users_bucket,
        updates_reach_every_bucket,
        reads_add_the_buckets_up_and_a_fresh_process_finds_the_buckets,
        a_split_voucher_is_restored_bucket_by_bucket,
        vouchers_sharing_a_borrow_stripe_never_answer_for_each_other,
    ],
}
