//! The CQL backend's bounded batches when a writer fails between two of
//! them: what committed holds whole decisions, and the next attempt takes
//! nothing twice. The failure is a proxy between the store and the server
//! refusing a batch on purpose, as a server or a network would.

use seckill_core::event::{Event, OrderAccepted, OrderCreated};
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
