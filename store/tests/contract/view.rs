//! The view-store contract, run against every backend.

use chrono::Utc;
use seckill_core::event::{
    CancelReason, Event, OrderAccepted, OrderCancelled, OrderCreated, OrderPaid, VoucherUpdated,
};
use seckill_core::{Envelope, UserId, VoucherId};
use seckill_store::OrderStatus;

use crate::backends::Backend;
use crate::fixtures::{order, voucher};

pub async fn the_view_is_the_same_whatever_the_delivery_order(backend: &impl Backend) {
    let store = backend.open_view().await;
    let orders = [[0, 1, 2], [2, 1, 0], [1, 2, 0]];
    let mut views = Vec::new();
    for sequence in orders {
        // A voucher and order of their own per delivery order.
        let v = voucher(3);
        let accepted = order(v.voucher_id, "carol");
        let created =
            OrderCreated { order: accepted.clone(), decided_at: accepted.accepted_at, remaining: 2, pay_by: None };
        let events = [
            Envelope::new(Event::VoucherCreated(v.clone())),
            Envelope::new(Event::OrderAccepted(accepted.clone())),
            Envelope::new(Event::OrderCreated(created)),
        ];
        for i in sequence {
            store.apply(vec![events[i].clone()]).await.expect("applies");
        }
        // Duplicates of everything change nothing.
        let changed = store.apply(events.to_vec()).await.expect("applies");
        assert_eq!(changed, vec![false, false, false]);
        let row = store.order(accepted.order_id).await.expect("reads").expect("exists");
        assert_eq!(row.status, OrderStatus::Created);
        let shown = store.voucher(v.voucher_id).await.expect("reads").expect("exists");
        assert_eq!((shown.admitted, shown.created, shown.remaining), (1, 1, 2));
        views.push((row.status, row.decided_at.is_some(), shown.admitted, shown.created, shown.remaining));
    }
    assert!(views.windows(2).all(|pair| pair[0] == pair[1]), "{views:?}");
}

pub async fn a_users_orders_are_listed_newest_first_and_bounded(backend: &impl Backend) {
    let store = backend.open_view().await;
    let v = voucher(10);
    let mine: Vec<OrderAccepted> = (0..3).map(|_| order(v.voucher_id, "dave")).collect();
    let other = order(v.voucher_id, "dave2");
    let events = mine.iter().chain([&other]).map(|o| Envelope::new(Event::OrderAccepted(o.clone()))).collect();
    store.apply(events).await.expect("applies");

    let dave = UserId::parse("dave").expect("valid");
    let listed = store.user_orders(&dave, 10).await.expect("reads");
    let ids: Vec<_> = listed.iter().map(|o| o.order_id).collect();
    assert_eq!(ids, vec![mine[2].order_id, mine[1].order_id, mine[0].order_id]);
    assert_eq!(store.user_orders(&dave, 2).await.expect("reads").len(), 2);
    assert!(store.voucher(VoucherId::generate()).await.expect("reads").is_none());
}

pub async fn the_view_follows_cancellations_updates_and_lists_vouchers_newest_first(backend: &impl Backend) {
    let store = backend.open_view().await;
    let (older, newer) = (voucher(2), voucher(5));
    let buyer = order(older.voucher_id, "erin");
    let created = OrderCreated { order: buyer.clone(), decided_at: Utc::now(), remaining: 1, pay_by: None };
    let cancelled = seckill_core::event::OrderCancelled {
        order: buyer.clone(),
        cancelled_at: Utc::now(),
        reason: CancelReason::Requested,
        remaining: 2,
    };
    let update = Envelope::new(Event::VoucherUpdated(VoucherUpdated {
        voucher_id: older.voucher_id,
        paused: Some(true),
        ends_at: None,
        add_stock: 3,
    }));
    let events = vec![
        Envelope::new(Event::VoucherCreated(older.clone())),
        Envelope::new(Event::VoucherCreated(newer.clone())),
        Envelope::new(Event::OrderCreated(created)),
        Envelope::new(Event::OrderCancelled(cancelled)),
        update.clone(),
    ];
    store.apply(events).await.expect("applies");
    assert_eq!(store.apply(vec![update]).await.expect("applies"), vec![false], "an update applies once");

    let row = store.order(buyer.order_id).await.expect("reads").expect("exists");
    assert_eq!(row.status, OrderStatus::Cancelled);
    assert!(row.decided_at.is_some() && row.cancelled_at.is_some());
    let shown = store.voucher(older.voucher_id).await.expect("reads").expect("exists");
    assert_eq!((shown.stock, shown.remaining, shown.created, shown.cancelled, shown.paused), (5, 5, 1, 1, true));

    let listed = store.vouchers(None, 10).await.expect("reads");
    let ids: Vec<_> = listed.iter().map(|v| v.voucher_id).collect();
    assert_eq!(ids, [newer.voucher_id, older.voucher_id]);
    let page = store.vouchers(Some(newer.voucher_id), 10).await.expect("reads");
    assert_eq!(page.iter().map(|v| v.voucher_id).collect::<Vec<_>>(), [older.voucher_id]);
}

/// Two projectors applying the same events at once count each transition
/// once. Needs a backend several processes share.
pub async fn concurrent_projectors_count_each_transition_once(backend: &impl Backend) {
    let (one, two) = (backend.open_view().await, backend.open_view().await);
    let v = voucher(10);
    let mut events = vec![Envelope::new(Event::VoucherCreated(v.clone()))];
    for i in 0..6 {
        let accepted = order(v.voucher_id, &format!("u{i}"));
        events.push(Envelope::new(Event::OrderAccepted(accepted.clone())));
        let created =
            OrderCreated { order: accepted.clone(), decided_at: accepted.accepted_at, remaining: 9 - i, pay_by: None };
        events.push(Envelope::new(Event::OrderCreated(created)));
    }
    let (a, b) = tokio::join!(one.apply(events.clone()), two.apply(events));
    let (a, b) = (a.expect("applies"), b.expect("applies"));
    let either = a.iter().zip(&b).filter(|(x, y)| **x || **y).count();
    let both = a.iter().zip(&b).filter(|(x, y)| **x && **y).count();
    assert_eq!((either, both), (13, 0), "every event changed the view exactly once between the two");
    let shown = one.voucher(v.voucher_id).await.expect("reads").expect("exists");
    assert_eq!((shown.admitted, shown.created, shown.remaining), (6, 6, 4));
}

/// Thousands of one voucher's events in one batch: each counted once, and
/// the batch redelivered changes nothing. On CQL they go in bounded
/// conditional batches: as one they are past the server's mutation size
/// limit.
pub async fn thousands_of_one_vouchers_events_in_one_batch_count_once(backend: &impl Backend) {
    let store = backend.open_view().await;
    let v = voucher(2_000);
    let mut events = vec![Envelope::new(Event::VoucherCreated(v.clone()))];
    for i in 0..1_000 {
        let accepted = order(v.voucher_id, &format!("u{i}"));
        events.push(Envelope::new(Event::OrderAccepted(accepted.clone())));
        let created = OrderCreated {
            order: accepted.clone(),
            decided_at: accepted.accepted_at,
            remaining: 1_999 - i,
            pay_by: None,
        };
        events.push(Envelope::new(Event::OrderCreated(created)));
    }
    let changed = store.apply(events.clone()).await.expect("applies");
    assert!(changed.iter().all(|c| *c), "every event changed the view");
    let shown = store.voucher(v.voucher_id).await.expect("reads").expect("exists");
    assert_eq!((shown.admitted, shown.created, shown.remaining), (1_000, 1_000, 1_000));

    let again = store.apply(events).await.expect("applies");
    assert!(again.iter().all(|c| !c), "a redelivered batch changes nothing");
    let shown = store.voucher(v.voucher_id).await.expect("reads").expect("exists");
    assert_eq!((shown.admitted, shown.created, shown.remaining), (1_000, 1_000, 1_000));
}

pub async fn the_view_shows_prices_payments_and_refunds_whatever_the_delivery_order(backend: &impl Backend) {
    let store = backend.open_view().await;
    let euro = seckill_core::money::Currency::parse("EUR").expect("valid");
    let v = seckill_core::event::VoucherCreated {
        title: Some("Sneakers".to_owned()),
        description: Some("One pair".to_owned()),
        price: 1_999,
        currency: Some(euro),
        hold_seconds: 120,
        ..voucher(3)
    };
    let now = Utc::now();
    let priced = |user: &str| OrderAccepted { amount: 1_999, currency: Some(euro), ..order(v.voucher_id, user) };
    let (kept, refunded) = (priced("payer"), priced("refunded"));
    let created = |o: &OrderAccepted| {
        Envelope::new(Event::OrderCreated(OrderCreated {
            order: o.clone(),
            decided_at: now,
            remaining: 1,
            pay_by: Some(now + chrono::Duration::seconds(120)),
        }))
    };
    let paid = |o: &OrderAccepted, id: &str| {
        Envelope::new(Event::OrderPaid(OrderPaid { order: o.clone(), paid_at: now, payment_id: Some(id.to_owned()) }))
    };
    let refund = Envelope::new(Event::OrderCancelled(OrderCancelled {
        order: refunded.clone(),
        cancelled_at: now,
        reason: CancelReason::Refunded,
        remaining: 2,
    }));
    // The refund before its payment and creation, as a rebuilt view or a
    // slow partition may deliver them; then everything again.
    let events = vec![
        Envelope::new(Event::VoucherCreated(v.clone())),
        refund,
        paid(&kept, "pi_kept"),
        created(&kept),
        paid(&refunded, "pi_refunded"),
        created(&refunded),
    ];
    for event in &events {
        store.apply(vec![event.clone()]).await.expect("applies");
    }
    assert!(store.apply(events).await.expect("applies").iter().all(|changed| !changed), "duplicates change nothing");

    let row = store.order(kept.order_id).await.expect("reads").expect("exists");
    assert_eq!(
        (row.status, row.amount, row.currency, row.payment_id.as_deref()),
        (OrderStatus::Paid, 1_999, Some(euro), Some("pi_kept"))
    );
    assert_eq!(row.pay_by, Some(now + chrono::Duration::seconds(120)), "kept from the creation that came later");
    let row = store.order(refunded.order_id).await.expect("reads").expect("exists");
    assert_eq!(row.status, OrderStatus::Refunded);
    let shown = store.voucher(v.voucher_id).await.expect("reads").expect("exists");
    assert_eq!((shown.title.as_deref(), shown.price, shown.currency), (Some("Sneakers"), 1_999, Some(euro)));
    assert_eq!((shown.payment_seconds, shown.hold_seconds), (120, 120));
    assert_eq!((shown.created, shown.paid, shown.refunded, shown.revenue, shown.remaining), (2, 2, 1, 1_999, 2));
}
