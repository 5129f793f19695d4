//! The stock-store contract, run against every backend.

use std::collections::HashMap;

use chrono::{Duration, Utc};
use seckill_core::event::{
    CancelReason, Event, OrderAccepted, OrderRequest, PaymentReceived, PaymentSource, RefundReason, RefundRequested,
    VoucherCreated, VoucherUpdated,
};
use seckill_core::money::Currency;
use seckill_core::FailReason;
use seckill_core::{Envelope, OrderId};
use seckill_store::{Decided, PendingRefund, StockInput};
use uuid::Uuid;

use crate::backends::Backend;
use crate::fixtures::{order, voucher};

fn request(order: &OrderAccepted, reason: Option<CancelReason>) -> OrderRequest {
    OrderRequest {
        order_id: order.order_id,
        voucher_id: order.voucher_id,
        reason,
        requested_at: Utc::now(),
        settled_checkouts: None,
    }
}

fn kinds(decided: &[Decided]) -> Vec<(&'static str, bool)> {
    decided.iter().map(|d| (d.outcome.kind(), d.replayed)).collect()
}

pub async fn replayed_orders_return_the_first_outcome_and_take_nothing(backend: &impl Backend) {
    let store = backend.open().await;
    let v = voucher(1);
    let (first, second) = (order(v.voucher_id, "a"), order(v.voucher_id, "b"));
    let decided = store
        .apply(vec![
            StockInput::Voucher(v.clone()),
            StockInput::Order(first.clone()),
            StockInput::Order(second.clone()),
        ])
        .await
        .expect("applies");
    assert!(matches!(decided[0].outcome.event, Event::OrderCreated(_)));
    assert!(matches!(decided[1].outcome.event, Event::OrderFailed(_)));

    // Redelivery of everything, even the voucher definition.
    let again = store
        .apply(vec![StockInput::Voucher(v.clone()), StockInput::Order(first), StockInput::Order(second)])
        .await
        .expect("applies");
    assert!(again.iter().all(|d| d.replayed));
    assert_eq!(again[0].outcome, decided[0].outcome, "byte-identical outcome");
    let level = store.stock(v.voucher_id).await.expect("reads").expect("defined");
    assert_eq!((level.stock, level.remaining), (1, 0));
}

pub async fn decisions_survive_reopening_the_store(backend: &impl Backend) {
    let v = voucher(5);
    let o = order(v.voucher_id, "a");
    {
        let store = backend.open().await;
        store.apply(vec![StockInput::Voucher(v.clone()), StockInput::Order(o.clone())]).await.expect("applies");
    }
    let store = backend.open().await;
    let replay = store.apply(vec![StockInput::Order(o)]).await.expect("applies");
    assert!(replay[0].replayed);
    assert_eq!(store.stock(v.voucher_id).await.expect("reads").map(|l| l.remaining), Some(4));
}

pub async fn a_cancelled_order_returns_its_units_once_and_they_sell_again(backend: &impl Backend) {
    let store = backend.open().await;
    let v = voucher(1);
    let (first, second) = (order(v.voucher_id, "a"), order(v.voucher_id, "b"));
    let cancel = StockInput::Cancel(request(&first, Some(CancelReason::Requested)));
    let decided = store
        .apply(vec![StockInput::Voucher(v.clone()), StockInput::Order(first.clone()), cancel.clone(), cancel])
        .await
        .expect("applies");
    assert_eq!(kinds(&decided), [("OrderCreated", false), ("OrderCancelled", false)], "each outcome once a batch");
    assert_eq!(store.stock(v.voucher_id).await.expect("reads").map(|l| l.remaining), Some(1));

    let decided = store
        .apply(vec![
            StockInput::Order(second.clone()),
            StockInput::Confirm(request(&first, None)),
            StockInput::Order(first.clone()),
        ])
        .await
        .expect("applies");
    // A confirmation of a cancelled order is ignored; a redelivered order
    // repeats every outcome it went through, in order.
    assert_eq!(kinds(&decided), [("OrderCreated", false), ("OrderCreated", true), ("OrderCancelled", true)]);
    assert_eq!(store.stock(v.voucher_id).await.expect("reads").map(|l| l.remaining), Some(0));

    let failed = order(v.voucher_id, "c");
    let decided = store
        .apply(vec![
            StockInput::Order(failed.clone()),
            StockInput::Cancel(request(&failed, Some(CancelReason::Requested))),
        ])
        .await
        .expect("applies");
    assert_eq!(kinds(&decided), [("OrderFailed", false)], "a failed order is not cancellable");
}

pub async fn unconfirmed_orders_expire_from_persisted_holds(backend: &impl Backend) {
    let v = VoucherCreated { hold_seconds: 60, ..voucher(3) };
    let (kept, dropped) = (order(v.voucher_id, "a"), order(v.voucher_id, "b"));
    {
        let store = backend.open().await;
        store
            .apply(vec![
                StockInput::Voucher(v.clone()),
                StockInput::Order(kept.clone()),
                StockInput::Order(dropped.clone()),
            ])
            .await
            .expect("applies");
        store.apply(vec![StockInput::Confirm(request(&kept, None))]).await.expect("applies");
        assert!(store.expired(Utc::now(), None, 10).await.expect("reads").is_empty(), "not due yet");
    }
    // Reopened, as after a restart: the hold is still there.
    let store = backend.open().await;
    let due = store.expired(Utc::now() + Duration::seconds(61), None, 10).await.expect("reads");
    assert_eq!(due.len(), 1);
    assert_eq!((due[0].request.order_id, due[0].request.reason), (dropped.order_id, Some(CancelReason::Expired)));

    let expire_kept = StockInput::Cancel(request(&kept, Some(CancelReason::Expired)));
    let decided = store.apply(vec![StockInput::Cancel(due[0].request.clone()), expire_kept]).await.expect("applies");
    assert_eq!(kinds(&decided), [("OrderCancelled", false)], "a confirmed order does not expire");
    assert!(store.expired(Utc::now() + Duration::days(1), None, 10).await.expect("reads").is_empty());
    assert_eq!(store.stock(v.voucher_id).await.expect("reads").map(|l| l.remaining), Some(2));
}

/// Due holds are read a page at a time, each page after the last one's
/// place, so holds the sweeper keeps open (a payment still settling, a
/// provider down) can never hide the ones behind them. Orders decided in
/// one batch share a deadline: the cursor orders them by id within it.
pub async fn due_holds_are_read_page_after_page(backend: &impl Backend) {
    let v = VoucherCreated { hold_seconds: 60, ..voucher(10) };
    let orders: Vec<OrderAccepted> = (0..7).map(|i| order(v.voucher_id, &format!("p{i}"))).collect();
    let store = backend.open().await;
    let mut batch = vec![StockInput::Voucher(v.clone())];
    batch.extend(orders.iter().cloned().map(StockInput::Order));
    store.apply(batch).await.expect("applies");

    let later = Utc::now() + Duration::seconds(120);
    let mut read = Vec::new();
    let mut after = None;
    let mut pages = Vec::new();
    loop {
        let page = store.expired(later, after, 3).await.expect("reads");
        pages.push(page.len());
        let Some(last) = page.last() else { break };
        after = Some(last.cursor);
        read.extend(page.iter().map(|hold| hold.request.order_id));
    }
    assert_eq!(pages, [3, 3, 1, 0], "pages of 3 until none is left");
    let mut expected: Vec<OrderId> = orders.iter().map(|o| o.order_id).collect();
    let mut got = read.clone();
    expected.sort();
    got.sort();
    assert_eq!(got, expected, "every due hold once, none twice: {read:?}");
    let whole = store.expired(later, None, 10).await.expect("reads");
    assert_eq!(whole.iter().map(|hold| hold.request.order_id).collect::<Vec<_>>(), read, "the pages in one order");
}

/// Refunds the provider holds `pending` are kept across reopening and
/// read back when their check is due, soonest first; a deleted one is gone.
pub async fn pending_refunds_are_kept_until_deleted(backend: &impl Backend) {
    let now = Utc::now();
    let refund = |n: u32, in_seconds: i64| PendingRefund {
        request: RefundRequested {
            order_id: OrderId::generate(),
            voucher_id: seckill_core::VoucherId::generate(),
            payment_id: format!("pi_pending{n}"),
            amount: 250,
            currency: Currency::parse("EUR").expect("a currency"),
            reason: RefundReason::Duplicate,
            requested_at: now,
        },
        refund_id: format!("re_pending{n}"),
        attempt: n,
        next_check: now + Duration::seconds(in_seconds),
        pause_ms: 1_000,
    };
    let (soon, sooner, later) = (refund(1, 5), refund(2, 1), refund(3, 3_600));
    {
        let store = backend.open().await;
        for kept in [&soon, &sooner, &later] {
            store.put_pending_refund(kept).await.expect("keeps it");
        }
        assert!(store.due_pending_refunds(now, 10).await.expect("reads").is_empty(), "none due yet");
    }
    let store = backend.open().await;
    let due = store.due_pending_refunds(now + Duration::seconds(10), 10).await.expect("reads");
    let ids: Vec<&str> = due.iter().map(|r| r.refund_id.as_str()).collect();
    assert_eq!(ids, ["re_pending2", "re_pending1"], "the due ones, soonest first, kept across reopening");
    assert_eq!(due[0], sooner, "kept whole");
    store.delete_pending_refund(&sooner).await.expect("deletes");
    let due = store.due_pending_refunds(now + Duration::days(1), 10).await.expect("reads");
    let ids: Vec<&str> = due.iter().map(|r| r.refund_id.as_str()).collect();
    assert_eq!(ids, ["re_pending1", "re_pending3"]);
    for kept in [&soon, &later] {
        store.delete_pending_refund(kept).await.expect("deletes");
    }
    assert!(store.due_pending_refunds(now + Duration::days(1), 10).await.expect("reads").is_empty());
}

pub async fn added_stock_is_added_once_per_update(backend: &impl Backend) {
    let store = backend.open().await;
    let v = voucher(0);
    let update = VoucherUpdated { voucher_id: v.voucher_id, paused: None, ends_at: None, add_stock: 2 };
    let add = StockInput::Update { update_id: Uuid::now_v7(), update };
    let buyer = order(v.voucher_id, "a");
    let decided = store
        .apply(vec![StockInput::Voucher(v.clone()), add.clone(), add, StockInput::Order(buyer)])
        .await
        .expect("applies");
    assert_eq!(kinds(&decided), [("OrderCreated", false)]);
    let level = store.stock(v.voucher_id).await.expect("reads").expect("defined");
    assert_eq!((level.stock, level.remaining), (2, 1));
}

/// Two processors with the same batch at once (a rebalance overlap): each
/// order is decided once, with one outcome, and the stock moves once.
/// Needs a backend several processes share.
pub async fn concurrent_processors_decide_each_order_once(backend: &impl Backend) {
    let (one, two) = (backend.open().await, backend.open().await);
    let v = voucher(5);
    let mut batch = vec![StockInput::Voucher(v.clone())];
    batch.extend((0..10).map(|i| StockInput::Order(order(v.voucher_id, &format!("u{i}")))));
    let (first, second) = tokio::join!(one.apply(batch.clone()), two.apply(batch));
    let (first, second) = (first.expect("applies"), second.expect("applies"));
    assert_eq!(first.len(), 10);
    for (a, b) in first.iter().zip(&second) {
        assert_eq!(a.outcome.event_id, b.outcome.event_id, "one decision per order, whoever reports it");
    }
    let created = first.iter().filter(|d| matches!(d.outcome.event, Event::OrderCreated(_))).count();
    assert_eq!(created, 5);
    let level = one.stock(v.voucher_id).await.expect("reads").expect("defined");
    assert_eq!((level.stock, level.remaining), (5, 0));
}

/// A crash after the store commit but before the outcomes were acknowledged
/// redelivers the batch: every outcome of every order in it must be emitted
/// again, in the order first decided, identical, the stock untouched.
pub async fn a_redelivered_batch_emits_every_outcome_again_in_order(backend: &impl Backend) {
    let store = backend.open().await;
    let v = voucher(2);
    let (refunded, cancelled) = (order(v.voucher_id, "a"), order(v.voucher_id, "b"));
    let batch = vec![
        StockInput::Voucher(v.clone()),
        StockInput::Order(refunded.clone()),
        StockInput::Order(cancelled.clone()),
        StockInput::Confirm(request(&refunded, None)),
        StockInput::Cancel(request(&cancelled, Some(CancelReason::Requested))),
        StockInput::Cancel(request(&refunded, Some(CancelReason::Requested))),
    ];
    let first = store.apply(batch.clone()).await.expect("applies");
    assert_eq!(
        kinds(&first),
        [
            ("OrderCreated", false),
            ("OrderCreated", false),
            ("OrderPaid", false),
            ("OrderCancelled", false),
            ("OrderCancelled", false)
        ]
    );
    let again = store.apply(batch).await.expect("applies");
    let ids = |decided: &[Decided], order: &OrderAccepted| -> Vec<Uuid> {
        decided
            .iter()
            .filter(|d| d.outcome.event.order().map(|o| o.order_id) == Some(order.order_id))
            .map(|d| d.outcome.event_id)
            .collect()
    };
    for order in [&refunded, &cancelled] {
        assert_eq!(ids(&again, order), ids(&first, order), "the same outcomes, in the same order");
    }
    assert!(again.iter().all(|d| d.replayed));
    assert_eq!(store.stock(v.voucher_id).await.expect("reads").map(|l| l.remaining), Some(2));
}

/// A cancel or confirm request that reached the log before its order (the
/// owner acted right after the `202`) is decided right after the order.
pub async fn requests_that_overtake_their_order_are_decided_after_it(backend: &impl Backend) {
    let store = backend.open().await;
    let v = voucher(2);
    let (cancelled, confirmed) = (order(v.voucher_id, "a"), order(v.voucher_id, "b"));
    store.apply(vec![StockInput::Voucher(v.clone())]).await.expect("applies");
    let early = store
        .apply(vec![
            StockInput::Cancel(request(&cancelled, Some(CancelReason::Requested))),
            StockInput::Confirm(request(&confirmed, None)),
        ])
        .await
        .expect("applies");
    assert!(early.is_empty(), "nothing to decide before the order: {early:?}");
    let decided = store
        .apply(vec![StockInput::Order(cancelled.clone()), StockInput::Order(confirmed.clone())])
        .await
        .expect("applies");
    assert_eq!(
        kinds(&decided),
        [("OrderCreated", false), ("OrderCancelled", false), ("OrderCreated", false), ("OrderPaid", false)]
    );
    assert_eq!(store.stock(v.voucher_id).await.expect("reads").map(|l| l.remaining), Some(1));
    // The early request redelivered: nothing new, the order's history again.
    let again = store
        .apply(vec![StockInput::Cancel(request(&cancelled, Some(CancelReason::Requested)))])
        .await
        .expect("applies");
    assert_eq!(kinds(&again), [("OrderCreated", true), ("OrderCancelled", true)]);

    // An impatient owner: eight confirms, then a cancel, all before the
    // order. Every request answered 202 is decided: the cancel is not lost.
    let impatient = order(v.voucher_id, "c");
    let mut early: Vec<StockInput> = (0..8).map(|_| StockInput::Confirm(request(&impatient, None))).collect();
    early.push(StockInput::Cancel(request(&impatient, Some(CancelReason::Requested))));
    assert!(store.apply(early).await.expect("applies").is_empty());
    let decided = store.apply(vec![StockInput::Order(impatient)]).await.expect("applies");
    assert_eq!(
        kinds(&decided),
        [("OrderCreated", false), ("OrderPaid", false), ("OrderCancelled", false)],
        "the confirm once, then the cancel"
    );
    assert_eq!(store.stock(v.voucher_id).await.expect("reads").map(|l| l.remaining), Some(1));
}

/// Redis can lose its last writes; the processor checks the per-user limit
/// against the orders it created, like the stock.
pub async fn the_per_user_limit_is_checked_against_created_orders(backend: &impl Backend) {
    let store = backend.open().await;
    let v = VoucherCreated { per_user_limit: 2, ..voucher(10) };
    let orders: Vec<OrderAccepted> = (0..3).map(|_| order(v.voucher_id, "greedy")).collect();
    let mut batch = vec![StockInput::Voucher(v.clone())];
    batch.extend(orders.iter().cloned().map(StockInput::Order));
    let decided = store.apply(batch).await.expect("applies");
    assert_eq!(kinds(&decided), [("OrderCreated", false), ("OrderCreated", false), ("OrderFailed", false)]);
    assert!(matches!(&decided[2].outcome.event, Event::OrderFailed(f) if f.reason == FailReason::LimitExceeded));

    // A cancelled order frees its units for the user's next order.
    let next = order(v.voucher_id, "greedy");
    let decided = store
        .apply(vec![
            StockInput::Cancel(request(&orders[0], Some(CancelReason::Requested))),
            StockInput::Order(next),
            StockInput::Order(order(v.voucher_id, "someone-else")),
        ])
        .await
        .expect("applies");
    assert_eq!(kinds(&decided), [("OrderCancelled", false), ("OrderCreated", false), ("OrderCreated", false)]);
    assert_eq!(store.stock(v.voucher_id).await.expect("reads").map(|l| l.remaining), Some(7));
}

/// Thousands of one voucher's orders in one batch (a consumer batch may hold
/// up to 10,000), some cancelled in the same batch: each decided once, the
/// stock exact, and the batch redelivered changes nothing. On CQL the
/// decisions go in bounded conditional batches: as one they are past the
/// server's mutation size limit.
pub async fn thousands_of_one_vouchers_orders_in_one_batch_are_decided_once(backend: &impl Backend) {
    let store = backend.open().await;
    let v = voucher(1_500);
    let orders: Vec<OrderAccepted> = (0..2_000).map(|i| order(v.voucher_id, &format!("u{i}"))).collect();
    let mut batch = vec![StockInput::Voucher(v.clone())];
    batch.extend(orders.iter().cloned().map(StockInput::Order));
    let cancelled = &orders[..2];
    batch.extend(cancelled.iter().map(|o| StockInput::Cancel(request(o, Some(CancelReason::Requested)))));

    let decided = store.apply(batch.clone()).await.expect("applies");
    assert_eq!(decided.len(), 2_002);
    assert!(decided.iter().all(|d| !d.replayed));
    for (order, decision) in orders.iter().zip(&decided) {
        assert_eq!(decision.outcome.event.order().map(|o| o.order_id), Some(order.order_id), "outcomes in batch order");
    }
    let count = |kind: &str| decided.iter().filter(|d| d.outcome.kind() == kind).count();
    assert_eq!((count("OrderCreated"), count("OrderFailed"), count("OrderCancelled")), (1_500, 500, 2));
    let level = store.stock(v.voucher_id).await.expect("reads").expect("defined");
    assert_eq!((level.stock, level.remaining), (1_500, 2));

    let again = store.apply(batch).await.expect("applies");
    assert!(again.iter().all(|d| d.replayed), "a redelivered batch decides nothing again");
    let first: HashMap<OrderId, &Envelope> = decided[2..2_000]
        .iter()
        .filter_map(|d| Some((d.outcome.event.order().map(|o| o.order_id)?, &d.outcome)))
        .collect();
    let repeated = again
        .iter()
        .filter(|d| d.outcome.event.order().map(|o| o.order_id).and_then(|o| first.get(&o)) == Some(&&d.outcome));
    assert_eq!(repeated.count(), 1_998, "the orders not cancelled repeat their first outcome, byte for byte");
    let level = store.stock(v.voucher_id).await.expect("reads").expect("defined");
    assert_eq!((level.stock, level.remaining), (1_500, 2));
}

/// The contract above for processors racing each other: two with the same
/// batch of hundreds of one voucher's orders, written in several bounded
/// batches each, interleaving between them.
pub async fn concurrent_processors_decide_each_order_once_across_bounded_batches(backend: &impl Backend) {
    let (one, two) = (backend.open().await, backend.open().await);
    let v = voucher(400);
    let mut batch = vec![StockInput::Voucher(v.clone())];
    batch.extend((0..450).map(|i| StockInput::Order(order(v.voucher_id, &format!("u{i}")))));
    let (first, second) = tokio::join!(one.apply(batch.clone()), two.apply(batch));
    let (first, second) = (first.expect("applies"), second.expect("applies"));
    assert_eq!((first.len(), second.len()), (450, 450));
    for (a, b) in first.iter().zip(&second) {
        assert_eq!(a.outcome.event_id, b.outcome.event_id, "one decision per order, whoever reports it");
        assert!(a.replayed || b.replayed, "no order reported decided by both");
        assert!(!(a.replayed && b.replayed), "every order reported decided by one of them");
    }
    let created = first.iter().filter(|d| matches!(d.outcome.event, Event::OrderCreated(_))).count();
    assert_eq!(created, 400);
    let level = one.stock(v.voucher_id).await.expect("reads").expect("defined");
    assert_eq!((level.stock, level.remaining), (400, 0));
}

/// A priced order of `voucher` for `user`: 250 cents.
fn priced(voucher: &VoucherCreated, user: &str) -> OrderAccepted {
    OrderAccepted { amount: voucher.price, currency: voucher.currency, ..order(voucher.voucher_id, user) }
}

fn payment(order: &OrderAccepted, id: &str, paid_at: chrono::DateTime<Utc>) -> PaymentReceived {
    PaymentReceived {
        order_id: order.order_id,
        voucher_id: order.voucher_id,
        payment_id: id.to_owned(),
        amount: order.amount,
        currency: order.currency.expect("priced"),
        paid_at,
        source: PaymentSource::Webhook,
    }
}

fn refund_reasons(decided: &[Decided]) -> Vec<(&'static str, bool)> {
    decided
        .iter()
        .filter_map(|d| match &d.outcome.event {
            Event::RefundRequested(r) => Some((r.reason.as_str(), d.replayed)),
            _ => None,
        })
        .collect()
}

pub async fn payments_pay_in_time_and_every_other_is_refunded_once_across_reopening(backend: &impl Backend) {
    let v = VoucherCreated {
        hold_seconds: 60,
        price: 250,
        currency: Some(Currency::parse("EUR").expect("valid")),
        per_user_limit: 1,
        ..voucher(3)
    };
    let (paid, late, admin) = (priced(&v, "a"), priced(&v, "b"), priced(&v, "c"));
    let now = Utc::now();
    {
        let store = backend.open().await;
        let decided = store
            .apply(vec![
                StockInput::Voucher(v.clone()),
                StockInput::Order(paid.clone()),
                StockInput::Order(late.clone()),
                StockInput::Order(admin.clone()),
            ])
            .await
            .expect("applies");
        let Event::OrderCreated(created) = &decided[0].outcome.event else { panic!("created: {decided:?}") };
        let pay_by = created.pay_by.expect("a priced order has a pay_by");
        assert!(pay_by >= created.decided_at + Duration::seconds(60) && pay_by.timestamp_subsec_nanos() == 0);

        let decided = store
            .apply(vec![
                StockInput::Pay(payment(&paid, "pi_paid", now)),
                StockInput::Pay(payment(&paid, "pi_twice", now)),
                StockInput::Pay(payment(&late, "pi_late", now + Duration::seconds(600))),
                StockInput::Pay(payment(&admin, "pi_admin", now)),
                StockInput::Cancel(request(&admin, Some(CancelReason::Refunded))),
            ])
            .await
            .expect("applies");
        assert_eq!(
            kinds(&decided),
            [
                ("OrderPaid", false),
                ("RefundRequested", false),
                ("RefundRequested", false),
                ("OrderCancelled", false),
                ("OrderPaid", false),
                ("OrderCancelled", false),
                ("RefundRequested", false),
            ],
            "paid; the second payment refunded; the late one refunded and its order expired; the admin's refund"
        );
        assert_eq!(refund_reasons(&decided), [("duplicate", false), ("late", false), ("admin", false)]);
        // The late order and the refunded one gave their units back; none is held any more.
        assert_eq!(store.stock(v.voucher_id).await.expect("reads").map(|l| l.remaining), Some(2));
        assert!(store.expired(now + Duration::days(1), None, 10).await.expect("reads").is_empty());
    }
    // Reopened, as after a crash: every payment reported again (webhook
    // repeats, reconciliation) repeats its outcome, never a second refund.
    let store = backend.open().await;
    let again = store
        .apply(vec![
            StockInput::Pay(payment(&paid, "pi_twice", now)),
            StockInput::Pay(payment(&late, "pi_late", now + Duration::seconds(600))),
            StockInput::Pay(payment(&paid, "pi_paid", now)),
        ])
        .await
        .expect("applies");
    assert!(again.iter().all(|d| d.replayed), "{:?}", kinds(&again));
    assert_eq!(
        refund_reasons(&again).into_iter().map(|(reason, _)| reason).collect::<Vec<_>>(),
        ["duplicate", "late"],
        "the same refunds, replayed"
    );
    assert_eq!(store.stock(v.voucher_id).await.expect("reads").map(|l| l.remaining), Some(2));
}

/// A retry Redis admitted twice (a failover lost the first admission)
/// reaches the log as a second order under the same `Idempotency-Key`: it
/// fails as a duplicate and takes nothing, in the batch of the first or in
/// a later one, and its redelivery says the same.
pub async fn a_second_order_under_one_idempotency_key_fails_as_a_duplicate(backend: &impl Backend) {
    let store = backend.open().await;
    let v = VoucherCreated { per_user_limit: 5, ..voucher(10) };
    let keyed =
        |user: &str, key: &str| OrderAccepted { idempotency_key: Some(key.into()), ..order(v.voucher_id, user) };
    let (first, retry, late_retry) = (keyed("u", "k"), keyed("u", "k"), keyed("u", "k"));
    let (other_key, other_user) = (keyed("u", "k2"), keyed("w", "k"));
    let decided = store
        .apply(vec![StockInput::Voucher(v.clone()), StockInput::Order(first.clone()), StockInput::Order(retry.clone())])
        .await
        .expect("applies");
    assert_eq!(kinds(&decided), [("OrderCreated", false), ("OrderFailed", false)]);
    assert!(matches!(&decided[1].outcome.event, Event::OrderFailed(f) if f.reason == FailReason::DuplicateRequest));
    let batch = [&late_retry, &other_key, &other_user, &retry].map(|o| StockInput::Order(o.clone()));
    let decided = store.apply(batch.to_vec()).await.expect("applies");
    assert_eq!(
        kinds(&decided),
        [("OrderFailed", false), ("OrderCreated", false), ("OrderCreated", false), ("OrderFailed", true)],
        "another key, or another user's same key, is another request"
    );
    assert_eq!(store.stock(v.voucher_id).await.expect("reads").map(|l| l.remaining), Some(7));
}

/// A UUIDv7 made at `at`: the id (and time) of an update record.
fn update_id_at(at: chrono::DateTime<Utc>) -> Uuid {
    let millis = u64::try_from(at.timestamp_millis()).expect("after 1970");
    let nanos = u32::try_from(millis % 1000).expect("below 1000") * 1_000_000;
    Uuid::new_v7(uuid::Timestamp::from_unix(uuid::NoContext, millis / 1000, nanos))
}

/// Pauses, resumes and ends applied in time order whatever the delivery
/// order, once each, and kept across reopening: an order accepted inside a
/// pause fails `paused`, one at or after the end `ended`, and neither takes
/// a unit; before the pause and after the resume, orders are created.
pub async fn pauses_and_ends_refuse_orders_accepted_in_them_whatever_the_delivery_order(backend: &impl Backend) {
    let v = voucher(5);
    let base = Utc::now();
    let at = |seconds: i64| base + Duration::seconds(seconds);
    let update = |paused: Option<bool>, ends_at, add_stock| StockInput::Update {
        update_id: Uuid::nil(),
        update: VoucherUpdated { voucher_id: v.voucher_id, paused, ends_at, add_stock },
    };
    let made = |input: StockInput, seconds| match input {
        StockInput::Update { update, .. } => StockInput::Update { update_id: update_id_at(at(seconds)), update },
        other => other,
    };
    // The pause (with added stock) made at +10 s, the resume at +20 s,
    // delivered resume first, the pause twice.
    let pause = made(update(Some(true), None, 1), 10);
    let resume = made(update(Some(false), None, 0), 20);
    let accepted = |user: &str, seconds| OrderAccepted { accepted_at: at(seconds), ..order(v.voucher_id, user) };
    let (before, inside, after) = (accepted("before", 5), accepted("inside", 15), accepted("after", 25));
    {
        let store = backend.open().await;
        let decided = store
            .apply(vec![
                StockInput::Voucher(v.clone()),
                resume,
                pause.clone(),
                pause,
                StockInput::Order(before.clone()),
                StockInput::Order(inside.clone()),
                StockInput::Order(after.clone()),
            ])
            .await
            .expect("applies");
        let reasons: Vec<Option<FailReason>> = decided
            .iter()
            .map(|d| match &d.outcome.event {
                Event::OrderFailed(failed) => Some(failed.reason),
                _ => None,
            })
            .collect();
        assert_eq!(kinds(&decided), [("OrderCreated", false), ("OrderFailed", false), ("OrderCreated", false)]);
        assert_eq!(reasons, [None, Some(FailReason::Paused), None]);
    }
    // Reopened: the end moved to +40 s by an update made at +30 s, then an
    // older-made move (+28 s) to later, delivered after it, which does not
    // undo it.
    let store = backend.open().await;
    let sooner = made(update(None, Some(at(40)), 0), 30);
    let stale = made(update(None, Some(at(7200)), 0), 28);
    let (last_minute, late, paused_again) = (accepted("last", 39), accepted("late", 40), accepted("again", 16));
    let decided = store
        .apply(vec![
            sooner,
            stale,
            StockInput::Order(paused_again),
            StockInput::Order(last_minute),
            StockInput::Order(late),
            StockInput::Order(inside),
        ])
        .await
        .expect("applies");
    let outcomes: Vec<(&str, Option<FailReason>, bool)> = decided
        .iter()
        .map(|d| match &d.outcome.event {
            Event::OrderFailed(failed) => (d.outcome.kind(), Some(failed.reason), d.replayed),
            _ => (d.outcome.kind(), None, d.replayed),
        })
        .collect();
    assert_eq!(
        outcomes,
        [
            ("OrderFailed", Some(FailReason::Paused), false),
            ("OrderCreated", None, false),
            ("OrderFailed", Some(FailReason::Ended), false),
            ("OrderFailed", Some(FailReason::Paused), true),
        ],
        "the pause kept across reopening, the later-made end standing"
    );
    let level = store.stock(v.voucher_id).await.expect("reads").expect("defined");
    assert_eq!((level.stock, level.remaining), (6, 3), "one unit added once; three orders created");
}
