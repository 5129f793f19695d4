//! A waiting room whose pre-queue is shuffled by a beacon round: joins
//! before the start wait unkeyed; from the start the room serves nobody
//! (`awaiting_beacon`) until the planned round is in (`draw_beacon.lua`
//! refuses it before the start and refuses another round), then hashes and
//! keys the pre-queue in steps (`ranking`) and reveals the round with the
//! pre-queue's hash. The line is then the order of
//! `seckill_core::queue::beacon_pre_queue_order`, and a join after the
//! start comes after all of it. Rounds are the beacon sandbox's signer's.

use chrono::Duration;
use seckill_beacon::sandbox::Signer;
use seckill_core::beacon::BeaconPlan;
use seckill_core::event::{Event, VoucherCreated};
use seckill_core::{queue, UserId};
use seckill_gate::{Joined, RoomState, MOST_PLACES_PER_ADVANCE};

use crate::room::{advance_until_quiet, begin, open, queue_definition, records};
use crate::{on_single_and_cluster, user, Harness};

on_single_and_cluster!(single_only: [], both: [a_beacon_room_waits_for_its_round_and_shuffles_the_pre_queue_by_it]);

/// A waiting room of five units, one per user, whose pre-queue the first
/// round after its start of a chain `signer` signs shuffles, and that plan.
pub(crate) fn beacon_room(signer: &Signer) -> (VoucherCreated, BeaconPlan) {
    let mut definition = queue_definition(5, 1, 100);
    let chain = signer.chain((definition.begins_at - Duration::hours(2)).timestamp(), 3);
    let plan = BeaconPlan::after(chain, definition.begins_at);
    definition.queue.as_mut().expect("a room").beacon = Some(Box::new(plan.clone()));
    (definition, plan)
}

async fn a_beacon_room_waits_for_its_round_and_shuffles_the_pre_queue_by_it(h: &Harness) {
    let signer = Signer::from_seed(b"gate room beacon test");
    let (definition, plan) = beacon_room(&signer);
    let chain = &plan.chain;
    let voucher = definition.voucher_id;
    open(h, &definition).await;
    assert_eq!(h.gate.awaited_beacon(voucher).await.expect("reads"), Some(plan.clone()));
    // More than one step's worth, so hashing and keying take several calls.
    let count = usize::try_from(MOST_PLACES_PER_ADVANCE).expect("fits") + 7;
    let early: Vec<UserId> = (0..count).map(|i| user(&format!("rb-{i}"))).collect();
    for holder in &early {
        let joined = h.gate.join_queue(voucher, holder, None).await.expect("answers");
        assert_eq!(joined, Joined::Placed { attempt: 1 });
    }
    let round = signer.sign(plan.round);
    let randomness = seckill_beacon::verify(chain, &round).expect("the sandbox's rounds verify");
    assert!(!h.gate.apply_beacon(voucher, &round, &randomness).await.expect("answers"), "the pre-queue is open");

    begin(h, voucher).await;
    let waiting = h.gate.advance_room(voucher).await.expect("advances");
    assert_eq!((waiting.state, waiting.served_now), (RoomState::AwaitingBeacon, 0), "nobody served without the round");
    let late = user("rb-late");
    assert_eq!(h.gate.join_queue(voucher, &late, None).await.expect("answers"), Joined::Placed { attempt: 1 });
    assert!(!records(h, voucher).await.iter().any(|e| matches!(e, Event::QueueSeedRevealed(_))));
    let other = signer.sign(plan.round + 1);
    let other_randomness = seckill_beacon::verify(chain, &other).expect("verifies");
    assert!(!h.gate.apply_beacon(voucher, &other, &other_randomness).await.expect("answers"), "not the plan's round");
    assert!(h.gate.apply_beacon(voucher, &round, &randomness).await.expect("answers"));
    assert!(!h.gate.apply_beacon(voucher, &round, &randomness).await.expect("answers"), "once");
    assert_eq!(h.gate.awaited_beacon(voucher).await.expect("reads"), None);

    let first = h.gate.advance_room(voucher).await.expect("advances");
    assert_eq!((first.state, first.served_now), (RoomState::Ranking, MOST_PLACES_PER_ADVANCE), "one step at a time");
    let summary = advance_until_quiet(h, voucher).await;
    assert_eq!(summary.state, RoomState::Open);
    let events = records(h, voucher).await;
    let revealed = events
        .iter()
        .find_map(|event| match event {
            Event::QueueSeedRevealed(revealed) => Some(revealed.clone()),
            _ => None,
        })
        .expect("revealed");
    assert_eq!(revealed.beacon, Some(round), "the reveal logs the round and its signature");
    assert_eq!(revealed.seed, randomness, "the key is the round's randomness");
    assert_eq!(revealed.entries_hash, Some(queue::pre_queue_hash(&early)));
    assert_eq!(revealed.pre_queued, count as u64);
    let line: Vec<String> = redis::cmd("ZRANGE")
        .arg(h.gate.keys(voucher).line)
        .arg(0)
        .arg(-1)
        .query_async(&mut h.connection.clone())
        .await
        .expect("ZRANGE");
    let mut expected: Vec<String> =
        queue::beacon_pre_queue_order(&randomness, &early).iter().map(|u| format!("{u}|1")).collect();
    expected.push(format!("{late}|1"));
    assert_eq!(line, expected, "the pre-queue by the round, then the join after the start");
    let served: Vec<UserId> = events
        .iter()
        .filter_map(|event| match event {
            Event::QueueEntryIssued(issued) => Some(issued.user_id.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(served[..], queue::beacon_pre_queue_order(&randomness, &early)[..served.len()]);
    assert_eq!(served.len(), 5, "one entry per unit");
}
