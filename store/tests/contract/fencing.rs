//! Fencing on CQL: a processor that lost its Kafka partition without
//! knowing it (cut off from the brokers past its session, still working: a
//! zombie) decides nothing more against a voucher once the partition's new
//! owner, assigned after it, has written the voucher; and is told so.

use chrono::Utc;
use seckill_core::event::{CancelReason, Event, OrderAccepted, OrderRequest};
use seckill_cqltest::TestCql;
use seckill_store::{StockInput, StoreError};

use crate::backends::{Backend, Cql};
use crate::fixtures::{order, voucher};

fn cancel(order: &OrderAccepted) -> OrderRequest {
    OrderRequest {
        order_id: order.order_id,
        voucher_id: order.voucher_id,
        reason: Some(CancelReason::Requested),
        requested_at: Utc::now(),
        settled_checkouts: None,
    }
}

pub async fn a_zombie_decides_nothing_once_the_new_owner_wrote_the_voucher(server: &TestCql) {
    let cql = Cql::on(server);
    let (zombie, owner) = (cql.open().await, cql.open().await);
    let v = voucher(1);
    let zombie_epoch = zombie.take_epoch().await.expect("an epoch");
    zombie.apply(vec![StockInput::Voucher(v.clone())]).await.expect("the voucher is defined");
    // The rebalance the zombie did not see: the partition is assigned to
    // the owner, which takes its epoch after the zombie's.
    let owner_epoch = owner.take_epoch().await.expect("an epoch");
    assert!(owner_epoch > zombie_epoch, "epochs only grow: {zombie_epoch} then {owner_epoch}");
    let (a, b) = (order(v.voucher_id, "a"), order(v.voucher_id, "b"));
    let decided = owner
        .apply(vec![StockInput::Order(a.clone()), StockInput::Cancel(cancel(&a))])
        .await
        .expect("the owner decides");
    let kinds: Vec<&str> = decided.iter().map(|d| d.outcome.kind()).collect();
    assert_eq!(kinds, ["OrderCreated", "OrderCancelled"]);

    // The zombie, late, with the acceptances it had read before it was cut
    // off: refused, whole.
    let late = zombie.apply(vec![StockInput::Order(a.clone()), StockInput::Order(b.clone())]).await;
    assert!(
        matches!(late, Err(StoreError::Fenced { mine, theirs, .. }) if mine == zombie_epoch && theirs == owner_epoch),
        "the zombie is fenced: {late:?}"
    );
    assert!(zombie.fenced(v.voucher_id).await.expect("reads"), "and can ask before it sends");
    assert!(!owner.fenced(v.voucher_id).await.expect("reads"), "the owner is not fenced");
    assert_eq!(zombie.order_record(v.voucher_id, b.order_id).await.expect("reads"), None, "b is undecided");
    let level = owner.stock(v.voucher_id).await.expect("reads").expect("defined");
    assert_eq!(level.remaining, 1, "a's unit was given back, and nothing took it");

    // Once it rejoins the group, the zombie is assigned again and takes a
    // later epoch: it decides, and the member before it is fenced in turn.
    zombie.take_epoch().await.expect("an epoch");
    let decided = zombie.apply(vec![StockInput::Order(b)]).await.expect("decides again");
    assert!(matches!(decided[0].outcome.event, Event::OrderCreated(_)), "{decided:?}");
    assert!(owner.fenced(v.voucher_id).await.expect("reads"));
    // A replay claims the voucher too: a new owner that only finds the
    // decisions made fences the writer before it all the same.
    owner.take_epoch().await.expect("an epoch");
    let replayed = owner.apply(vec![StockInput::Order(a)]).await.expect("replays");
    assert!(replayed.iter().all(|d| d.replayed));
    assert!(zombie.fenced(v.voucher_id).await.expect("reads"), "the replay claimed the voucher");
}
