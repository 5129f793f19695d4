//! The CQL backend's bounded batches when a writer fails between two of
//! them: what committed holds whole decisions, and the next attempt takes
//! nothing twice. The failure is a proxy between the store and the server
//! refusing a batch on purpose, as a server or a network would.

use chrono::{Duration, Utc};
use seckill_core::event::{Event, OrderAccepted, OrderCreated, VoucherCreated};
use seckill_core::Envelope;
use seckill_cqltest::{FaultProxy, TestCql};
use seckill_store::StockInput;

use crate::backends::{Backend, Cql};
use crate::fixtures::{order, voucher};

/// 350 orders of one voucher make four batches of the stock (100 rows
/// each at most); the third fails.
pub async fn a_stock_write_failing_between_batches_is_retried_without_deciding_twice(server: &TestCql) {
    let proxy = FaultProxy::start(server.addr()).await.expect("the proxy listens");
    let store = Cql::through(&proxy).open().await;
    let v = voucher(300);
    let orders: Vec<OrderAccepted> = (0..350).map(|i| order(v.voucher_id, &format!("u{i}"))).collect();
    let mut batch = vec![StockInput::Voucher(v.clone())];
    batch.extend(orders.iter().cloned().map(StockInput::Order));

    proxy.fail_batches_after(2);
    let failed = store.apply(batch.clone()).await;
    proxy.heal();
    assert!(failed.is_err(), "the third batch failed");
    // The two committed batches hold the first decisions (all creations:
    // the stock outlasts them) and the level after exactly those. A creation
    // writes two rows (the order's record and its user's held units), so
    // two batches of at most 100 rows hold 50 to 100 of them.
    let level = store.stock(v.voucher_id).await.expect("reads").expect("defined");
    let committed = usize::try_from(300 - level.remaining).expect("small");
    assert!((49..=100).contains(&committed), "two batches of at most 100 rows committed: {committed} orders");

    let decided = store.apply(batch.clone()).await.expect("the retry applies");
    assert_eq!(decided.len(), 350);
    let replayed: Vec<bool> = decided.iter().map(|d| d.replayed).collect();
    assert!(replayed[..committed].iter().all(|r| *r), "the committed decisions are found, not made again");
    assert!(replayed[committed..].iter().all(|r| !*r));
    let created = decided.iter().filter(|d| matches!(d.outcome.event, Event::OrderCreated(_))).count();
    assert_eq!(created, 300, "exactly the stock, however the writes were split");
    let level = store.stock(v.voucher_id).await.expect("reads").expect("defined");
    assert_eq!(level.remaining, 0);

    let again = store.apply(batch).await.expect("applies");
    assert!(again.iter().all(|d| d.replayed));
    assert_eq!(store.stock(v.voucher_id).await.expect("reads").map(|l| l.remaining), Some(0));
}

/// A decision whose write was refused leaves its hold row behind, with the
/// deadline of a `decided_at` that never stood. The order decided again a
/// second later holds until its own `pay_by`: the sweeper is never handed
/// the order at the stale row's earlier deadline.
pub async fn a_hold_left_by_a_refused_write_does_not_expire_the_order_early(server: &TestCql) {
    let proxy = FaultProxy::start(server.addr()).await.expect("the proxy listens");
    let store = Cql::through(&proxy).open().await;
    let v = VoucherCreated { hold_seconds: 60, ..voucher(5) };
    store.apply(vec![StockInput::Voucher(v.clone())]).await.expect("the voucher is defined");
    let accepted = order(v.voucher_id, "early");

    proxy.fail_batches_after(0);
    let refused = store.apply(vec![StockInput::Order(accepted.clone())]).await;
    proxy.heal();
    assert!(refused.is_err(), "the decision's write was refused");
    let stale_deadline = Utc::now() + Duration::seconds(61);
    tokio::time::sleep(std::time::Duration::from_millis(1_100)).await;

    let decided = store.apply(vec![StockInput::Order(accepted.clone())]).await.expect("decided again");
    let Some(Event::OrderCreated(created)) = decided.first().map(|d| &d.outcome.event) else {
        panic!("created: {decided:?}")
    };
    let pay_by = created.pay_by.expect("a held order has its deadline");
    assert!(pay_by > stale_deadline, "decided a second later, it holds later: {pay_by} > {stale_deadline}");

    let early = store.expired(stale_deadline, None, 100).await.expect("reads the holds");
    assert!(early.is_empty(), "nothing is due before the order's own pay_by: {early:?}");
    let due = store.expired(pay_by, None, 100).await.expect("reads the holds");
    assert_eq!(due.iter().map(|hold| hold.request.order_id).collect::<Vec<_>>(), [accepted.order_id]);
}

/// The view's counterpart: 300 orders' acceptance and creation (600 rows
/// written, so several batches), the second failing; every transition
/// counted once.
pub async fn a_view_write_failing_between_batches_is_retried_without_counting_twice(server: &TestCql) {
    let proxy = FaultProxy::start(server.addr()).await.expect("the proxy listens");
    let store = Cql::through(&proxy).open_view().await;
    let v = voucher(300);
    let mut events = vec![Envelope::new(Event::VoucherCreated(v.clone()))];
    for i in 0..300 {
        let accepted = order(v.voucher_id, &format!("u{i}"));
        events.push(Envelope::new(Event::OrderAccepted(accepted.clone())));
        let created = OrderCreated {
            order: accepted.clone(),
            decided_at: accepted.accepted_at,
            remaining: 299 - i,
            pay_by: None,
        };
        events.push(Envelope::new(Event::OrderCreated(created)));
    }

    proxy.fail_batches_after(1);
    let failed = store.apply(events.clone()).await;
    proxy.heal();
    assert!(failed.is_err(), "the second batch failed");
    // The first batch holds whole events from the start: the definition,
    // then each order's acceptance and creation in turn.
    let shown = store.voucher(v.voucher_id).await.expect("reads").expect("the first batch defined it");
    let (admitted, created) = (shown.admitted, shown.created);
    assert!(admitted > 0 && admitted < 300 && (admitted == created || admitted == created + 1), "{admitted} {created}");

    let changed = store.apply(events.clone()).await.expect("the retry applies");
    let committed = 1 + usize::try_from(admitted + created).expect("small");
    assert!(changed[..committed].iter().all(|c| !c), "what committed is not applied again");
    assert!(changed[committed..].iter().all(|c| *c));
    let shown = store.voucher(v.voucher_id).await.expect("reads").expect("exists");
    assert_eq!((shown.admitted, shown.created, shown.remaining), (300, 300, 0));
    assert!(store.apply(events).await.expect("applies").iter().all(|c| !c));
}
