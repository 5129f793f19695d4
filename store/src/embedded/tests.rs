//! The embedded backend against its contracts, on real redb files.

use chrono::{Duration, Utc};
use seckill_core::event::{
    CancelReason, Event, OrderAccepted, OrderCreated, OrderRequest, VoucherCreated, VoucherUpdated,
};
use seckill_core::{Envelope, OrderId, UserId, VoucherId};
use uuid::Uuid;

use super::{EmbeddedStockStore, EmbeddedViewStore};
use crate::{Decided, OrderStatus, StockInput, StockStore, ViewReader, ViewStore};

fn voucher(stock: u64) -> VoucherCreated {
    let now = Utc::now();
    VoucherCreated {
        voucher_id: VoucherId::generate(),
        stock,
        per_user_limit: 1,
        begins_at: now,
        ends_at: now + Duration::hours(1),
        hold_seconds: 0,
    }
}

fn request(order: &OrderAccepted, reason: Option<CancelReason>) -> OrderRequest {
    OrderRequest { order_id: order.order_id, voucher_id: order.voucher_id, reason, requested_at: Utc::now() }
}

fn kinds(decided: &[Decided]) -> Vec<(&'static str, bool)> {
    decided.iter().map(|d| (d.outcome.kind(), d.replayed)).collect()
}

fn stock_store(dir: &tempfile::TempDir) -> EmbeddedStockStore {
    EmbeddedStockStore::open(&dir.path().join("stock.redb")).expect("opens")
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

#[tokio::test]
async fn a_cancelled_order_returns_its_units_once_and_they_sell_again() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = stock_store(&dir);
    let v = voucher(1);
    let (first, second) = (order(v.voucher_id, "a"), order(v.voucher_id, "b"));
    let cancel = StockInput::Cancel(request(&first, Some(CancelReason::Requested)));
    let decided = store
        .apply(vec![StockInput::Voucher(v.clone()), StockInput::Order(first.clone()), cancel.clone(), cancel])
        .await
        .expect("applies");
    assert_eq!(kinds(&decided), [("OrderCreated", false), ("OrderCancelled", false), ("OrderCancelled", true)]);
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
    // repeats its latest outcome.
    assert_eq!(kinds(&decided), [("OrderCreated", false), ("OrderCancelled", true)]);
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

#[tokio::test]
async fn unconfirmed_orders_expire_from_persisted_holds() {
    let dir = tempfile::tempdir().expect("tempdir");
    let v = VoucherCreated { hold_seconds: 60, ..voucher(3) };
    let (kept, dropped) = (order(v.voucher_id, "a"), order(v.voucher_id, "b"));
    {
        let store = stock_store(&dir);
        store
            .apply(vec![
                StockInput::Voucher(v.clone()),
                StockInput::Order(kept.clone()),
                StockInput::Order(dropped.clone()),
            ])
            .await
            .expect("applies");
        store.apply(vec![StockInput::Confirm(request(&kept, None))]).await.expect("applies");
        assert!(store.expired(Utc::now(), 10).await.expect("reads").is_empty(), "not due yet");
    }
    // Reopened, as after a restart: the hold is still there.
    let store = stock_store(&dir);
    let due = store.expired(Utc::now() + Duration::seconds(61), 10).await.expect("reads");
    assert_eq!(due.len(), 1);
    assert_eq!((due[0].order_id, due[0].reason), (dropped.order_id, Some(CancelReason::Expired)));

    let expire_kept = StockInput::Cancel(request(&kept, Some(CancelReason::Expired)));
    let decided = store.apply(vec![StockInput::Cancel(due[0].clone()), expire_kept]).await.expect("applies");
    assert_eq!(kinds(&decided), [("OrderCancelled", false)], "a confirmed order does not expire");
    assert!(store.expired(Utc::now() + Duration::days(1), 10).await.expect("reads").is_empty());
    assert_eq!(store.stock(v.voucher_id).await.expect("reads").map(|l| l.remaining), Some(2));
}

#[tokio::test]
async fn added_stock_is_added_once_per_update() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = stock_store(&dir);
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

#[tokio::test]
async fn the_view_follows_cancellations_updates_and_lists_vouchers_newest_first() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = EmbeddedViewStore::open(&dir.path().join("view.redb")).expect("opens");
    let (older, newer) = (voucher(2), voucher(5));
    let buyer = order(older.voucher_id, "erin");
    let created = OrderCreated { order: buyer.clone(), decided_at: Utc::now(), remaining: 1 };
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
