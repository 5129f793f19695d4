//! The proof of work's spending rules in `admit.lua`: a proof is spent by
//! the request it pays for whatever the answer after it (sold out, the
//! limit, a second order), a request refused for its pace spends nothing,
//! and the first order for a split voucher through a gate that has not
//! met it yet (its bucket count learned from `wrong_shards`) pays its
//! proof and its pace like any other. And the pace hash stays bounded
//! however many addresses (IPv6 /64s) order.

use chrono::Duration;
use seckill_core::event::OrderAccepted;
use seckill_gate::{Admission, Gate, Pace, Presented, Proof, Rejection};

use crate::{definition, on_single_and_cluster, user, Harness};

on_single_and_cluster!(
    single_only: [],
    both: [
        a_proof_is_spent_whatever_the_answer_after_it,
        a_request_refused_for_its_pace_spends_no_proof,
        the_first_order_for_a_split_voucher_pays_its_proof_and_pace,
        the_pace_hash_keeps_only_buckets_not_yet_refilled,
    ],
);

/// A solved proof (the gate takes the caller's word for the solution).
fn paid(nonce: u32, expires_ms: i64, pace: Pace) -> Presented {
    Presented {
        proof: Some(Proof { nonce: format!("{nonce:032x}"), bits: 8, expires_ms }),
        pace,
        ..Presented::default()
    }
}

async fn later(h: &Harness) -> i64 {
    (h.gate_now().await + Duration::minutes(1)).timestamp_millis()
}

async fn a_proof_is_spent_whatever_the_answer_after_it(h: &Harness) {
    let mut sale = definition(2, 1, crate::open_window());
    sale.challenge_bits = 8;
    let voucher = sale.voucher_id;
    assert!(h.gate.load_voucher(&sale).await.expect("loads"));
    let later = later(h).await;
    let admit = |buyer: &str, quantity: u32, nonce: u32| {
        let order = OrderAccepted::now(voucher, user(buyer), quantity);
        let gate = h.gate.clone();
        async move { gate.admit_presenting(&order, None, &paid(nonce, later, Pace::default())).await.expect("answers") }
    };
    assert!(matches!(admit("a", 1, 1).await, Admission::Admitted { .. }));
    // Each refusal after the proof spent it: shown to another buyer, whose
    // order would be admitted, it is used.
    assert!(matches!(admit("a", 1, 2).await, Admission::Rejected(Rejection::DuplicateOrder { .. })));
    assert!(matches!(admit("b", 2, 3).await, Admission::Rejected(Rejection::LimitExceeded { .. })));
    assert!(matches!(admit("b", 1, 4).await, Admission::Admitted { remaining: 0 }));
    assert!(matches!(admit("c", 1, 5).await, Admission::Rejected(Rejection::SoldOut { .. })));
    for nonce in [2, 3, 5] {
        assert_eq!(admit("d", 1, nonce).await, Admission::Rejected(Rejection::ChallengeUsed), "proof {nonce}");
    }
}

async fn a_request_refused_for_its_pace_spends_no_proof(h: &Harness) {
    let mut sale = definition(10, 5, crate::open_window());
    sale.challenge_bits = 8;
    let voucher = sale.voucher_id;
    assert!(h.gate.load_voucher(&sale).await.expect("loads"));
    let later = later(h).await;
    let pace = Pace { user_per_second: 2, user_burst: 1, ..Pace::default() };
    let admit = |nonce: u32| {
        let order = OrderAccepted::now(voucher, user("hasty"), 1);
        let gate = h.gate.clone();
        let presented = paid(nonce, later, pace.clone());
        async move { gate.admit_presenting(&order, None, &presented).await.expect("answers") }
    };
    assert!(matches!(admit(1).await, Admission::Admitted { .. }));
    assert!(matches!(admit(2).await, Admission::Rejected(Rejection::RateLimited { by_address: false, .. })));
    // The same proof, once the bucket has a token again (half a second at
    // 2 a second): not used, it pays.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let answer = loop {
        match admit(2).await {
            Admission::Rejected(Rejection::RateLimited { .. }) if std::time::Instant::now() < deadline => {
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
            answer => break answer,
        }
    };
    assert!(matches!(answer, Admission::Admitted { .. }), "the paced request spent nothing: {answer:?}");
}

/// A gate of its own, as a newly started ingress has: it has met no voucher.
async fn fresh_gate(h: &Harness) -> Gate {
    Gate::new(h.connection.clone(), &h.config.key_prefix).await.expect("scripts load")
}

async fn the_first_order_for_a_split_voucher_pays_its_proof_and_pace(h: &Harness) {
    let mut sale = crate::split(definition(10, 5, crate::open_window()), 2);
    sale.challenge_bits = 8;
    let voucher = sale.voucher_id;
    assert!(h.gate.load_voucher(&sale).await.expect("loads"));
    let later = later(h).await;
    let pace = Pace { user_per_second: 1, user_burst: 1, ..Pace::default() };
    let order = || OrderAccepted::now(voucher, user("first"), 1);
    let first = fresh_gate(h).await.admit_presenting(&order(), None, &paid(1, later, pace.clone())).await;
    assert!(matches!(first, Ok(Admission::Admitted { .. })), "{first:?}");
    // The proof was spent by that first order: a gate that knows the
    // layout refuses it.
    let again = h.gate.admit_presenting(&order(), None, &paid(1, later, Pace::default())).await;
    assert_eq!(again.expect("answers"), Admission::Rejected(Rejection::ChallengeUsed));
    // And the pace was taken: the user's next order at once, through
    // another new gate, finds the bucket empty.
    let second = fresh_gate(h).await.admit_presenting(&order(), None, &paid(2, later, pace)).await;
    assert!(matches!(second, Ok(Admission::Rejected(Rejection::RateLimited { .. }))), "{second:?}");
}

/// An attacker rotating through addresses (each IPv6 /64 is one) leaves a
/// field per address only until its bucket has refilled: 300 addresses
/// ordering one after another, each bucket full again a moment later,
/// leave a handful of fields, not 300.
async fn the_pace_hash_keeps_only_buckets_not_yet_refilled(h: &Harness) {
    let sale = definition(1_000, 1, crate::open_window());
    let voucher = sale.voucher_id;
    assert!(h.gate.load_voucher(&sale).await.expect("loads"));
    for i in 0..300 {
        let order = OrderAccepted::now(voucher, user(&format!("rotating-{i}")), 1);
        let pace = Pace {
            address: Some(format!("2001:db8:{i:x}::")),
            address_per_second: 100_000,
            address_burst: 1,
            ..Pace::default()
        };
        let presented = Presented { pace, ..Presented::default() };
        let answer = h.gate.admit_presenting(&order, None, &presented).await.expect("answers");
        assert!(matches!(answer, Admission::Admitted { .. }), "{answer:?}");
    }
    let fields: u64 =
        redis::cmd("HLEN").arg(h.gate.keys(voucher).pace).query_async(&mut h.connection.clone()).await.expect("HLEN");
    assert!(fields <= 20, "{fields} fields for 300 addresses whose buckets refilled");
    // Emptied and made again many times over, it still ends with the sale.
    let ttl: i64 =
        redis::cmd("PTTL").arg(h.gate.keys(voucher).pace).query_async(&mut h.connection.clone()).await.expect("PTTL");
    assert!(ttl > 0, "the pace hash expires with the sale: PTTL {ttl}");
}
