//! Transfers between buckets, stopped after each of their steps as a crash
//! would stop them: whoever completes them (another process's gate), however
//! often, every unit ends in exactly one bucket.

use futures::future::join_all;
use seckill_core::OrderId;
use seckill_gate::{Admission, Gate, Rejection, Transfer, TransferDecision};

use crate::buckets::{levels, split_voucher, users_in, Level};
use crate::{user, Harness};

/// Where a transfer is stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stop {
    /// Units taken from the giving bucket, nothing else.
    Debited,
    /// The receiving bucket credited them too.
    Settled,
    /// All three steps done.
    Finished,
}

/// Another process's gate on the same Redis: it knows nothing of the
/// stopped transfer but what Redis holds.
async fn another_process(h: &Harness) -> Gate {
    Gate::new(h.connection.clone(), h.gate.prefix()).await.expect("scripts load")
}

async fn a_transfer_stopped_after_any_step_moves_each_unit_exactly_once(h: &Harness) {
    for stop in [Stop::Debited, Stop::Settled, Stop::Finished] {
        let v = split_voucher(&h.gate, 10, 1, 2).await;
        let layout = h.gate.layout(v).await.expect("reads").expect("loaded");
        let transfer = Transfer::new(&h.gate, &layout, 0, 1);
        assert_eq!(transfer.debit(3).await.expect("debits"), 3, "{stop:?}");
        // A retried call (its answer was lost) takes nothing more.
        assert_eq!(transfer.debit(3).await.expect("debits again"), 3, "{stop:?}");
        if stop != Stop::Debited {
            assert_eq!(transfer.settle(3).await.expect("settles"), TransferDecision::Credited);
        }
        if stop == Stop::Finished {
            assert!(transfer.finish(TransferDecision::Credited).await.expect("finishes"));
        }
        // The process dies here: nothing runs the remaining steps.

        let mid = levels(h, v).await;
        let counted: u64 = mid.iter().map(|l| l.remaining + l.in_transit).sum();
        assert!(counted >= 10, "{stop:?}: no unit lost while in transit: {mid:?}");

        let recoverer = another_process(h).await;
        let closed = recoverer.recover_transfers(&layout).await.expect("recovers");
        assert_eq!(closed, u64::from(stop != Stop::Finished), "{stop:?}");
        assert_eq!(recoverer.recover_transfers(&layout).await.expect("recovers"), 0, "{stop:?}: once");
        let after = levels(h, v).await;
        assert_eq!(
            after,
            vec![Level { stock: 2, remaining: 2, in_transit: 0 }, Level { stock: 8, remaining: 8, in_transit: 0 }],
            "{stop:?}"
        );
        sells_exactly(h, v, 10).await;
    }
}

/// `stock` buyers are admitted, the next one is told sold_out.
async fn sells_exactly(h: &Harness, v: seckill_core::VoucherId, stock: usize) {
    let attempts = (0..stock + 5).map(|i| {
        let gate = h.gate.clone();
        async move { gate.admit(v, &user(&format!("after{i}")), 1, OrderId::generate(), None).await.expect("admit") }
    });
    let results = join_all(attempts).await;
    assert_eq!(results.iter().filter(|r| matches!(r, Admission::Admitted { .. })).count(), stock, "{results:?}");
    assert_eq!(
        h.gate.admit(v, &user("one-too-many"), 1, OrderId::generate(), None).await.expect("admit"),
        Admission::Rejected(Rejection::SoldOut { remaining: 0 })
    );
}

async fn a_transfer_to_a_lost_bucket_gives_its_units_back(h: &Harness) {
    let v = split_voucher(&h.gate, 10, 1, 2).await;
    let layout = h.gate.layout(v).await.expect("reads").expect("loaded");
    let transfer = Transfer::new(&h.gate, &layout, 0, 1);
    assert_eq!(transfer.debit(4).await.expect("debits"), 4);
    // The receiving bucket's shard loses it before the transfer goes on.
    let lost = layout.keys(h.gate.prefix(), 1);
    let _: () = redis::cmd("DEL").arg(&lost.voucher).query_async(&mut h.connection.clone()).await.expect("DEL");
    let recoverer = another_process(h).await;
    assert_eq!(recoverer.recover_transfers(&layout).await.expect("recovers"), 1);
    assert_eq!(levels(h, v).await[0], Level { stock: 5, remaining: 5, in_transit: 0 }, "the units came back");
    // The decision stands: the receiving bucket, even back, never takes them.
    assert_eq!(transfer.settle(4).await.expect("settles"), TransferDecision::Fenced);
    assert!(!transfer.finish(TransferDecision::Fenced).await.expect("finishes"), "finished before");
}

async fn concurrent_recoveries_complete_a_transfer_once(h: &Harness) {
    let v = split_voucher(&h.gate, 10, 1, 2).await;
    let layout = h.gate.layout(v).await.expect("reads").expect("loaded");
    assert_eq!(Transfer::new(&h.gate, &layout, 1, 0).debit(5).await.expect("debits"), 5);
    let recoverers = join_all((0..4).map(|_| another_process(h))).await;
    let closed = join_all(recoverers.iter().map(|gate| gate.recover_transfers(&layout))).await;
    assert_eq!(closed.into_iter().map(|c| c.expect("recovers")).sum::<u64>(), 1);
    assert_eq!(
        levels(h, v).await,
        vec![Level { stock: 10, remaining: 10, in_transit: 0 }, Level { stock: 0, remaining: 0, in_transit: 0 }]
    );
}

async fn a_frozen_voucher_starts_no_transfer_until_thawed(h: &Harness) {
    let v = split_voucher(&h.gate, 10, 1, 2).await;
    let layout = h.gate.layout(v).await.expect("reads").expect("loaded");
    h.gate.freeze_transfers(&layout, std::time::Duration::from_secs(60)).await.expect("freezes");
    assert_eq!(Transfer::new(&h.gate, &layout, 0, 1).debit(1).await.expect("answers"), 0, "frozen");
    h.gate.thaw_transfers(&layout).await.expect("thaws");
    assert_eq!(Transfer::new(&h.gate, &layout, 0, 1).debit(1).await.expect("debits"), 1);
}

/// A bucket lends only what it could sell: a pause kept by one bucket's
/// master (another master lost it in a failover) or a start not yet reached
/// on its own clock (another master's clock runs fast) stops its units from
/// being borrowed by the buckets that would sell them.
async fn a_paused_or_unopened_bucket_lends_nothing(h: &Harness) {
    let v = split_voucher(&h.gate, 10, 1, 2).await;
    let layout = h.gate.layout(v).await.expect("reads").expect("loaded");
    let giver = layout.keys(h.gate.prefix(), 0).voucher.clone();
    let lent = || async { Transfer::new(&h.gate, &layout, 0, 1).debit(1).await.expect("answers") };
    set_field(h, &giver, "paused", "1").await;
    assert_eq!(lent().await, 0, "paused");
    set_field(h, &giver, "paused", "0").await;
    let begins: String =
        redis::cmd("HGET").arg(&giver).arg("begins_ms").query_async(&mut h.connection.clone()).await.expect("HGET");
    let later = chrono::Utc::now().timestamp_millis() + 60_000;
    set_field(h, &giver, "begins_ms", &later.to_string()).await;
    assert_eq!(lent().await, 0, "not open yet on its own clock");
    set_field(h, &giver, "begins_ms", &begins).await;
    assert_eq!(lent().await, 1, "open and running");
}

/// Sets one field of a hash behind the gate's back, as another master's
/// state would differ.
async fn set_field(h: &Harness, key: &str, field: &str, value: &str) {
    let _: i64 =
        redis::cmd("HSET").arg(key).arg(field).arg(value).query_async(&mut h.connection.clone()).await.expect("HSET");
}

/// Admissions that borrow, cut off wherever they are, as by a process killed
/// with its calls in flight. Bucket 0 is sold dry first; then each round
/// sends a few of its buyers (each must borrow) and aborts them after a
/// different delay, from at once to a few milliseconds, so calls stop
/// before, between and after the transfer scripts and the admission (the
/// delay picks where the fault falls; nothing waits on it). Once another
/// process has completed what was left pending, no unit was created or
/// lost: the buckets' stock adds up to the voucher's, what they have left
/// plus what was admitted is the stock, and the rest sells exactly.
async fn borrowers_aborted_anywhere_create_or_lose_no_unit(h: &Harness) {
    const STOCK: u64 = 40;
    const SHARDS: u32 = 4;
    const ROUNDS: u64 = 12;
    let v = split_voucher(&h.gate, STOCK, 1, SHARDS).await;
    let layout = h.gate.layout(v).await.expect("reads").expect("loaded");
    let mut buyers = users_in(0, SHARDS, 10 + 3 * ROUNDS as usize, "aborted").into_iter();
    for buyer in buyers.by_ref().take(10) {
        let admitted = h.gate.admit(v, &buyer, 1, OrderId::generate(), None).await.expect("admits");
        assert!(matches!(admitted, Admission::Admitted { .. }), "{admitted:?}");
    }
    for round in 0..ROUNDS {
        let requests: Vec<_> = buyers
            .by_ref()
            .take(3)
            .map(|buyer| {
                let gate = h.gate.clone();
                tokio::spawn(async move { gate.admit(v, &buyer, 1, OrderId::generate(), None).await })
            })
            .collect();
        tokio::time::sleep(std::time::Duration::from_micros(round * 400)).await;
        for request in &requests {
            request.abort();
        }
        for request in requests {
            let _ = request.await;
        }
    }
    // Reading every bucket on the same connection lands behind any call an
    // aborted request had already sent; then another process recovers.
    levels(h, v).await;
    another_process(h).await.recover_transfers(&layout).await.expect("recovers");
    let after = levels(h, v).await;
    assert!(after.iter().all(|level| level.in_transit == 0), "{after:?}");
    assert_eq!(after.iter().map(|level| level.stock).sum::<u64>(), STOCK, "no unit created or lost: {after:?}");
    let bought = h.gate.admission_snapshot(v).await.expect("reads").expect("loaded").bought;
    let admitted: u64 = bought.values().sum();
    assert_eq!(after.iter().map(|level| level.remaining).sum::<u64>() + admitted, STOCK, "{after:?}, {bought:?}");
    sells_exactly(h, v, usize::try_from(STOCK - admitted).expect("small")).await;
}

crate::on_single_and_cluster! {
    single_only: [],
    both: [
        a_transfer_stopped_after_any_step_moves_each_unit_exactly_once,
        a_transfer_to_a_lost_bucket_gives_its_units_back,
        concurrent_recoveries_complete_a_transfer_once,
        a_frozen_voucher_starts_no_transfer_until_thawed,
        a_paused_or_unopened_bucket_lends_nothing,
        borrowers_aborted_anywhere_create_or_lose_no_unit,
    ],
}
