//! `restore.lua`: the gate rebuilt from what the log says, counting what
//! Redis did after the log was read; "unchanged" only when every field it
//! writes is already so; a sale past its expiry not brought back.

use std::collections::HashMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use seckill_core::event::{
    CancelReason, Event, OrderAccepted, OrderCancelled, OrderCreated, VoucherCreated, VoucherUpdated,
};
use seckill_core::{Envelope, OrderId};
use seckill_gate::{Admission, Gate, RestoreAction, RestoreMode, VoucherAdmission};

use crate::{definition, open_window, state_of, user, Harness};

/// The log of a sale of 5 units, 2 per user: `a` holds 2 units, `b` holds 1
/// and `c` cancelled theirs.
struct SaleLog {
    definition: VoucherCreated,
    events: Vec<Envelope>,
    held_by_b: OrderAccepted,
}

fn accepted(definition: &VoucherCreated, name: &str, quantity: u32) -> OrderAccepted {
    OrderAccepted {
        order_id: OrderId::generate(),
        voucher_id: definition.voucher_id,
        user_id: user(name),
        quantity,
        accepted_at: Utc::now(),
        amount: 0,
        currency: None,
        idempotency_key: None,
    }
}

fn sale_log(window: (DateTime<Utc>, DateTime<Utc>)) -> SaleLog {
    let definition = definition(5, 2, window);
    let (a, b, c) = (accepted(&definition, "a", 2), accepted(&definition, "b", 1), accepted(&definition, "c", 1));
    let now = Utc::now();
    let created = |order: &OrderAccepted| {
        Envelope::new(Event::OrderCreated(OrderCreated {
            order: order.clone(),
            decided_at: now,
            remaining: 0,
            pay_by: None,
        }))
    };
    let events = vec![
        Envelope::new(Event::VoucherCreated(definition.clone())),
        Envelope::new(Event::OrderAccepted(a.clone())),
        Envelope::new(Event::OrderAccepted(b.clone())),
        Envelope::new(Event::OrderAccepted(c.clone())),
        created(&a),
        created(&b),
        created(&c),
        Envelope::new(Event::OrderCancelled(OrderCancelled {
            order: c,
            cancelled_at: now,
            reason: CancelReason::Requested,
            remaining: 2,
        })),
    ];
    SaleLog { definition, events, held_by_b: b }
}

async fn bought(h: &Harness, gate: &Gate, state: &VoucherAdmission) -> HashMap<String, u64> {
    redis::cmd("HGETALL")
        .arg(gate.keys(state.voucher_id).bought)
        .query_async(&mut h.connection.clone())
        .await
        .expect("HGETALL")
}

async fn a_lost_voucher_is_restored_and_then_unchanged(h: &Harness) {
    let log = sale_log(open_window());
    let state = state_of(&log.events);
    let checked = h.gate.restore(&state, RestoreMode::Check).await.expect("checks");
    assert_eq!((checked.action, checked.remaining_before), (RestoreAction::Restored, None));
    assert_eq!(h.gate.voucher(state.voucher_id).await.expect("reads"), None, "a check writes nothing");

    let restored = h.gate.restore(&state, RestoreMode::Write).await.expect("restores");
    assert_eq!(
        (restored.action, restored.remaining_after, restored.users_fixed),
        (RestoreAction::Restored, Some(2), 2)
    );
    assert_eq!(bought(h, &h.gate, &state).await, HashMap::from([("a".to_owned(), 2), ("b".to_owned(), 1)]));
    let again = h.gate.restore(&state, RestoreMode::Check).await.expect("checks");
    assert_eq!(again.action, RestoreAction::Unchanged);

    // The restored gate admits as the log implies: b may take one more, a none.
    let v = state.voucher_id;
    assert!(matches!(
        h.gate.admit(v, &user("a"), 1, OrderId::generate(), None).await.expect("admits"),
        Admission::Rejected(seckill_gate::Rejection::DuplicateOrder { .. })
    ));
    assert_eq!(
        h.gate.admit(v, &user("b"), 1, OrderId::generate(), None).await.expect("admits"),
        Admission::Admitted { remaining: 1 }
    );
    // A released order stays released: giving c's units back again changes nothing.
    let c = state.released[0];
    assert!(!h.gate.release(v, &user("c"), 1, c, None).await.expect("releases"));
}

async fn what_redis_did_after_the_log_was_read_is_kept(h: &Harness) {
    let log = sale_log(open_window());
    let stale = state_of(&log.events);
    let v = stale.voucher_id;
    h.gate.restore(&stale, RestoreMode::Write).await.expect("restores");

    // After the log was read: b's order is cancelled and given back, d is
    // admitted, 3 units are added and the sale paused.
    assert!(h.gate.release(v, &user("b"), 1, log.held_by_b.order_id, None).await.expect("releases"));
    let d = accepted(&log.definition, "d", 2);
    assert!(matches!(h.gate.admit_order(&d, None).await.expect("admits"), Admission::Admitted { .. }));
    let update = VoucherUpdated { voucher_id: v, paused: Some(true), ends_at: None, add_stock: 3 };
    h.gate.update_voucher(uuid::Uuid::now_v7(), &update).await.expect("updates");
    // What Redis holds now: stock 8, a 2 + d 2 held, 4 left, paused.
    let live = h.gate.voucher(v).await.expect("reads").expect("there");
    assert_eq!((live.stock, live.remaining, live.paused), (8, 4, true));

    let outcome = h.gate.restore(&stale, RestoreMode::Write).await.expect("restores");
    assert_eq!(outcome.action, RestoreAction::Unchanged, "the stale log changes nothing: {outcome:?}");
    let after = h.gate.voucher(v).await.expect("reads").expect("there");
    assert_eq!(after, live);
    assert_eq!(bought(h, &h.gate, &stale).await, HashMap::from([("a".to_owned(), 2), ("d".to_owned(), 2)]));

    // Even after a loss of everything but those records, the same counts.
    for key in [h.gate.keys(v).voucher, h.gate.keys(v).bought, h.gate.keys(v).orders] {
        let _: () = redis::cmd("DEL").arg(key).query_async(&mut h.connection.clone()).await.expect("DEL");
    }
    let outcome = h.gate.restore(&stale, RestoreMode::Write).await.expect("restores");
    assert_eq!(outcome.action, RestoreAction::Restored);
    let rebuilt = h.gate.voucher(v).await.expect("reads").expect("there");
    assert_eq!((rebuilt.stock, rebuilt.remaining), (8, 4));
    assert_eq!(bought(h, &h.gate, &stale).await, HashMap::from([("a".to_owned(), 2), ("d".to_owned(), 2)]));
}

async fn a_sale_past_its_expiry_is_not_restored_and_what_is_left_of_it_goes(h: &Harness) {
    let gate = h.gate.clone().with_ended_sale_ttl(Duration::from_secs(60));
    let now = Utc::now();
    let log = sale_log((now - chrono::Duration::hours(2), now - chrono::Duration::hours(1)));
    let state = state_of(&log.events);
    let outcome = gate.restore(&state, RestoreMode::Write).await.expect("answers");
    assert_eq!((outcome.action, outcome.remaining_after), (RestoreAction::Expired, None));
    assert_eq!(gate.voucher(state.voucher_id).await.expect("reads"), None);

    // Keys an older build left without an expiry are removed.
    let keys = gate.keys(state.voucher_id);
    let _: () = redis::cmd("HSET")
        .arg(&keys.voucher)
        .arg(&[("stock", "5"), ("remaining", "2")])
        .query_async(&mut h.connection.clone())
        .await
        .expect("HSET");
    let _: () =
        redis::cmd("HSET").arg(&keys.bought).arg("a").arg(2).query_async(&mut h.connection.clone()).await.expect("");
    assert_eq!(gate.restore(&state, RestoreMode::Check).await.expect("checks").action, RestoreAction::Expired);
    let left = || async {
        let left: u32 = redis::cmd("EXISTS")
            .arg(keys.all().as_slice())
            .query_async(&mut h.connection.clone())
            .await
            .expect("EXISTS");
        left
    };
    assert_eq!(left().await, 2, "a check removes nothing");
    gate.restore(&state, RestoreMode::Write).await.expect("removes");
    assert_eq!(left().await, 0);
}

/// Redis lost the voucher; before reconcile restored it, the processor
/// cancelled an order and called `release.lua`, which found no voucher. A
/// restore from a log read before that cancellation must still count the
/// order's units as returned (found by the fault suite: they were held for
/// good, and Redis and the persistent stock disagreed).
async fn a_release_while_the_voucher_was_lost_is_kept_by_a_later_restore(h: &Harness) {
    let log = sale_log(open_window());
    let stale = state_of(&log.events);
    let v = stale.voucher_id;
    assert!(!h.gate.release(v, &user("b"), 1, log.held_by_b.order_id, None).await.expect("release on nothing"));

    h.gate.restore(&stale, RestoreMode::Write).await.expect("restores");
    let restored = h.gate.voucher(v).await.expect("reads").expect("there");
    assert_eq!(restored.remaining, 3, "b's unit stays returned: only a's 2 are held");
    assert_eq!(bought(h, &h.gate, &stale).await, HashMap::from([("a".to_owned(), 2)]));
}

crate::on_single_and_cluster! {
    single_only: [],
    both: [
        a_lost_voucher_is_restored_and_then_unchanged,
        what_redis_did_after_the_log_was_read_is_kept,
        a_sale_past_its_expiry_is_not_restored_and_what_is_left_of_it_goes,
        a_release_while_the_voucher_was_lost_is_kept_by_a_later_restore,
    ],
}
