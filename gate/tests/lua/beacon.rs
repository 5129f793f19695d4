//! A beacon draw's scripts: the draw opened with a planned round waits for
//! it once entries close (`awaiting_beacon`), `draw_beacon.lua` refuses a
//! round too soon or another than the plan's, and once the round is put in
//! the reveal logs it and the ranking is the round's randomness's. Rounds
//! are the beacon sandbox's signer's, checked as drand's are.

use chrono::Duration;
use seckill_beacon::sandbox::Signer;
use seckill_core::beacon::BeaconPlan;
use seckill_core::draw;
use seckill_core::event::Event;
use seckill_core::UserId;
use seckill_gate::RoomState;

use crate::draw::{advance_until_quiet, draw_definition, enter_all, make_the_draw, open};
use crate::room::records;
use crate::{on_single_and_cluster, user, Harness};

on_single_and_cluster!(single_only: [], both: [a_beacon_draw_waits_for_its_round_and_ranks_by_it]);

async fn a_beacon_draw_waits_for_its_round_and_ranks_by_it(h: &Harness) {
    let mut definition = draw_definition(2, 1);
    let signer = Signer::from_seed(b"gate beacon test");
    let settings = definition.draw.as_mut().expect("a draw");
    let chain = signer.chain((settings.draw_at - Duration::hours(2)).timestamp(), 3);
    let plan = BeaconPlan::after(chain.clone(), settings.draw_at);
    settings.beacon = Some(Box::new(plan.clone()));
    let voucher = definition.voucher_id;
    open(h, &definition).await;
    assert_eq!(h.gate.awaited_beacon(voucher).await.expect("reads"), Some(plan.clone()));
    let entrants: Vec<UserId> = (0..30).map(|i| user(&format!("beacon-{i}"))).collect();
    enter_all(h, voucher, &entrants).await;

    let round = signer.sign(plan.round);
    let randomness = seckill_beacon::verify(&chain, &round).expect("the sandbox's rounds verify");
    assert!(!h.gate.apply_beacon(voucher, &round, &randomness).await.expect("answers"), "entries still open");
    make_the_draw(h, voucher).await;
    let waiting = h.gate.advance_draw(voucher).await.expect("advances");
    assert_eq!(waiting.state, RoomState::AwaitingBeacon, "no reveal without the round");
    assert!(!records(h, voucher).await.iter().any(|e| matches!(e, Event::DrawSeedRevealed(_))));
    let other = signer.sign(plan.round + 1);
    let other_randomness = seckill_beacon::verify(&chain, &other).expect("verifies");
    assert!(!h.gate.apply_beacon(voucher, &other, &other_randomness).await.expect("answers"), "not the plan's round");

    assert!(h.gate.apply_beacon(voucher, &round, &randomness).await.expect("answers"));
    assert!(!h.gate.apply_beacon(voucher, &round, &randomness).await.expect("answers"), "once");
    assert_eq!(h.gate.awaited_beacon(voucher).await.expect("reads"), None);
    let summary = advance_until_quiet(h, voucher).await;
    assert_eq!((summary.state, summary.selected), (RoomState::Open, Some(2)));
    let events = records(h, voucher).await;
    let revealed = events
        .iter()
        .find_map(|event| match event {
            Event::DrawSeedRevealed(revealed) => Some(revealed.clone()),
            _ => None,
        })
        .expect("revealed");
    assert_eq!(revealed.beacon, Some(round), "the reveal logs the round and its signature");
    assert_eq!(revealed.seed, randomness, "the seed is the round's randomness");
    let ranked: Vec<UserId> = events
        .iter()
        .filter_map(|event| match event {
            Event::DrawRanked(chunk) => Some(chunk.users.clone()),
            _ => None,
        })
        .flatten()
        .collect();
    assert_eq!(ranked, draw::ranking(&randomness, &entrants));
}
