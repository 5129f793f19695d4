//! The embedded backend against its contracts, on real redb files.

use chrono::Utc;
use seckill_core::event::{Event, OrderAccepted, OrderCreated, VoucherCreated};
use seckill_core::{Envelope, OrderId, UserId, VoucherId};

use super::{EmbeddedStockStore, EmbeddedViewStore};
use crate::{OrderStatus, StockInput, StockStore, ViewReader, ViewStore};

fn voucher(stock: u64) -> VoucherCreated {
    let now = Utc::now();
    VoucherCreated {
        voucher_id: VoucherId::generate(),
        stock,
        per_user_limit: 1,
        begins_at: now,
        ends_at: now + chrono::Duration::hours(1),
    }
}

fn order(voucher: VoucherId, user: &str) -> OrderAccepted {
    OrderAccepted {
        order_id: OrderId::generate(),
        voucher_id: voucher,
        user_id: UserId::parse(user).expect("valid"),
        quantity: 1,
        accepted_at: Utc::now(),
    }
}

#[tokio::test]
async fn replayed_orders_return_the_first_outcome_and_take_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = EmbeddedStockStore::open(&dir.path().join("stock.redb")).expect("opens");
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

#[tokio::test]
async fn decisions_survive_reopening_the_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("stock.redb");
    let v = voucher(5);
    let o = order(v.voucher_id, "a");
    {
        let store = EmbeddedStockStore::open(&path).expect("opens");
        store.apply(vec![StockInput::Voucher(v.clone()), StockInput::Order(o.clone())]).await.expect("applies");
    }
    let store = EmbeddedStockStore::open(&path).expect("reopens");
    let replay = store.apply(vec![StockInput::Order(o)]).await.expect("applies");
    assert!(replay[0].replayed);
    assert_eq!(store.stock(v.voucher_id).await.expect("reads").map(|l| l.remaining), Some(4));
}

#[tokio::test]
async fn the_view_is_the_same_whatever_the_delivery_order() {
    let v = voucher(3);
    let accepted = order(v.voucher_id, "carol");
    let created = OrderCreated { order: accepted.clone(), decided_at: Utc::now(), remaining: 2 };
    let events = [
        Envelope::new(Event::VoucherCreated(v.clone())),
        Envelope::new(Event::OrderAccepted(accepted.clone())),
        Envelope::new(Event::OrderCreated(created)),
    ];
    let orders = [[0, 1, 2], [2, 1, 0], [1, 2, 0]];
    let mut views = Vec::new();
    for sequence in orders {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = EmbeddedViewStore::open(&dir.path().join("view.redb")).expect("opens");
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
        views.push((row, shown));
    }
    assert!(views.windows(2).all(|pair| pair[0] == pair[1]));
}

#[tokio::test]
async fn a_users_orders_are_listed_newest_first_and_bounded() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = EmbeddedViewStore::open(&dir.path().join("view.redb")).expect("opens");
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
