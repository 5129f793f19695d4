//! `settle.lua`: what became of an admission call that failed without an
//! answer, made final by the order id.

use chrono::Utc;
use seckill_core::config::RedisConfig;
use seckill_core::event::OrderAccepted;
use seckill_core::{OrderId, VoucherId};
use seckill_gate::{Admission, Gate, Settlement};

use crate::{user, voucher, Harness};

fn order(voucher: VoucherId, name: &str, quantity: u32) -> OrderAccepted {
    OrderAccepted {
        order_id: OrderId::generate(),
        voucher_id: voucher,
        user_id: user(name),
        quantity,
        accepted_at: Utc::now(),
        amount: 0,
        currency: None,
        idempotency_key: None,
    }
}

/// Entries in the outbox `v`'s orders go to (one bucket).
async fn outbox_len(h: &Harness, v: VoucherId) -> u64 {
    redis::cmd("XLEN").arg(h.outbox_of(v)).query_async(&mut h.connection.clone()).await.expect("XLEN")
}

async fn an_admitted_order_settles_as_admitted(h: &Harness) {
    let v = voucher(&h.gate, 5, 2).await;
    let admitted = order(v, "lucky", 2);
    assert_eq!(h.gate.admit_order(&admitted, None).await.expect("admit"), Admission::Admitted { remaining: 3 });
    for _ in 0..2 {
        assert_eq!(
            h.gate.settle(v, &admitted.user_id, admitted.order_id).await.expect("settles"),
            Settlement::Admitted
        );
    }
    assert_eq!(h.gate.remaining(v).await.expect("read"), Some(3), "settling changes nothing");
}

async fn a_call_arriving_after_settle_said_not_admitted_is_refused_and_changes_nothing(h: &Harness) {
    let v = voucher(&h.gate, 5, 2).await;
    let late = order(v, "late", 1);
    // Redis sees the settlement first and the timed-out call after it.
    assert_eq!(h.gate.settle(v, &late.user_id, late.order_id).await.expect("settles"), Settlement::NotAdmitted);
    assert_eq!(h.gate.admit_order(&late, None).await.expect("admit"), Admission::Fenced);
    assert_eq!(
        h.gate.settle(v, &late.user_id, late.order_id).await.expect("settles"),
        Settlement::NotAdmitted,
        "still final"
    );
    assert_eq!(h.gate.remaining(v).await.expect("read"), Some(5));
    assert_eq!(outbox_len(h, v).await, 0, "nothing reached the outbox");
    let holders = h.gate.holders(v, 10).await.expect("reads").expect("loaded");
    assert!(holders.bought.is_empty(), "{holders:?}");

    // The same user's next request, with a new id, is admitted as usual.
    let again = order(v, "late", 1);
    assert_eq!(h.gate.admit_order(&again, None).await.expect("admit"), Admission::Admitted { remaining: 4 });
}

async fn a_call_that_timed_out_is_settled_by_what_redis_did(h: &Harness) {
    let impatient =
        Gate::connect(&RedisConfig { response_timeout_ms: 100, ..h.config.clone() }).await.expect("connects");
    let v = voucher(&impatient, 5, 2).await;
    let _: () = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(500)
        .arg("WRITE")
        .query_async(&mut h.connection.clone())
        .await
        .expect("pause");
    let queued = order(v, "queued", 1);
    // The script waits in Redis past the call's timeout, then runs.
    match impatient.admit_order(&queued, None).await {
        Err(error) => assert!(error.is_timeout(), "the call timed out, not another failure: {error}"),
        Ok(answer) => panic!("the call was answered while Redis was paused: {answer:?}"),
    }
    // Each attempt waits at most 100 ms; the pause ends well within these.
    let mut attempts = 0..100;
    let settled = loop {
        assert!(attempts.next().is_some(), "the gate never answered");
        if let Ok(settled) = impatient.settle(v, &queued.user_id, queued.order_id).await {
            break settled;
        }
    };
    assert_eq!(settled, Settlement::Admitted);
    assert_eq!(h.gate.remaining(v).await.expect("read"), Some(4), "the answer matches what Redis did");
    assert_eq!(outbox_len(h, v).await, 1);
}

crate::on_single_and_cluster! {
    single_only: [a_call_that_timed_out_is_settled_by_what_redis_did],
    both: [
        an_admitted_order_settles_as_admitted,
        a_call_arriving_after_settle_said_not_admitted_is_refused_and_changes_nothing,
    ],
}
