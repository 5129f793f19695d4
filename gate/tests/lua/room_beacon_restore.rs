//! A beacon room Redis lost while it was keying its pre-queue, rebuilt from
//! its records through `Gate::restore`: the pre-queue comes back unkeyed,
//! the room waits for its round again, and once the round is in it keys the
//! whole pre-queue afresh, so the line ends as an unbroken room's would
//! (`seckill_core::queue::beacon_pre_queue_order`), every member keyed once
//! and nobody served twice.
//!
//! The loss is the deletion of every key of the voucher (the outbox, which
//! the log stands for here, is read first).

use std::collections::HashSet;

use chrono::Duration;
use seckill_beacon::sandbox::Signer;
use seckill_core::event::{Event, QueueSeedCommitted, VoucherCreated};
use seckill_core::{queue, Envelope, UserId, VoucherId};
use seckill_gate::{Joined, RestoreAction, RestoreMode, RoomRestored, RoomState, MOST_PLACES_PER_ADVANCE};

use crate::room::{advance_until_quiet, begin, envelopes, open};
use crate::room_beacon::beacon_room;
use crate::{on_single_and_cluster, state_of, user, Harness};

on_single_and_cluster!(single_only: [], both: [a_beacon_room_lost_while_keying_ends_with_the_places_its_round_determines]);

/// Redis loses every key of `voucher` (not the outbox: read already).
pub(crate) async fn lose(h: &Harness, voucher: VoucherId) {
    let keys = h.gate.keys(voucher);
    let mut lost: Vec<String> = keys.all().iter().map(|key| (*key).to_owned()).collect();
    lost.extend([keys.room, keys.line, keys.places, keys.seen, keys.holds, keys.solved, keys.pace]);
    for key in lost {
        let _: () = redis::cmd("DEL").arg(key).query_async(&mut h.connection.clone()).await.expect("DEL");
    }
    assert_eq!(h.gate.room(voucher).await.expect("reads"), None, "the room is gone");
}

/// The line as Redis holds it, first place first.
pub(crate) async fn line(h: &Harness, voucher: VoucherId) -> Vec<String> {
    redis::cmd("ZRANGE")
        .arg(h.gate.keys(voucher).line)
        .arg(0)
        .arg(-1)
        .query_async(&mut h.connection.clone())
        .await
        .expect("ZRANGE")
}

pub(crate) async fn unkeyed(h: &Harness, voucher: VoucherId) -> u64 {
    redis::cmd("ZCOUNT")
        .arg(h.gate.keys(voucher).line)
        .arg(-1)
        .arg(-1)
        .query_async(&mut h.connection.clone())
        .await
        .expect("ZCOUNT")
}

/// What the log holds of the sale: its definition, the commitment the
/// ingress logs, and every record the scripts wrote.
pub(crate) async fn the_log(h: &Harness, definition: &VoucherCreated, seed: &str) -> Vec<Envelope> {
    let mut log = vec![
        Envelope::new(Event::VoucherCreated(definition.clone())),
        Envelope::new(Event::QueueSeedCommitted(QueueSeedCommitted {
            voucher_id: definition.voucher_id,
            seed_hash: queue::seed_commitment(seed),
            sealed_seed: None,
        })),
    ];
    log.extend(envelopes(h, definition.voucher_id).await);
    log
}

async fn a_beacon_room_lost_while_keying_ends_with_the_places_its_round_determines(h: &Harness) {
    let signer = Signer::from_seed(b"gate room beacon restore test");
    let (definition, plan) = beacon_room(&signer);
    let chain = &plan.chain;
    let voucher = definition.voucher_id;
    let seed = open(h, &definition).await;
    // Keying takes two calls (and hashing two before them).
    let count = usize::try_from(MOST_PLACES_PER_ADVANCE).expect("fits") + 7;
    let early: Vec<UserId> = (0..count).map(|i| user(&format!("rr-{i}"))).collect();
    for holder in &early {
        assert_eq!(h.gate.join_queue(voucher, holder, None).await.expect("answers"), Joined::Placed { attempt: 1 });
    }
    begin(h, voucher).await;
    // The log's definition begins when the test began the sale (the
    // restore writes the sale's times from the log).
    let began = VoucherCreated { begins_at: h.gate_now().await - Duration::seconds(1), ..definition.clone() };
    let waiting = h.gate.advance_room(voucher).await.expect("advances");
    assert_eq!(waiting.state, RoomState::AwaitingBeacon);
    let late = user("rr-late");
    assert_eq!(h.gate.join_queue(voucher, &late, None).await.expect("answers"), Joined::Placed { attempt: 1 });
    let round = signer.sign(plan.round);
    let randomness = seckill_beacon::verify(chain, &round).expect("the sandbox's rounds verify");
    assert!(h.gate.apply_beacon(voucher, &round, &randomness).await.expect("answers"));

    // Two hashing calls, then the first keying call; then Redis loses it all.
    for _ in 0..3 {
        let step = h.gate.advance_room(voucher).await.expect("advances");
        assert_eq!(step.state, RoomState::Ranking);
    }
    assert_eq!(unkeyed(h, voucher).await, 7, "stopped after the first keying call");
    let log = the_log(h, &began, &seed).await;
    lose(h, voucher).await;

    let state = state_of(&log);
    let outcome = h.gate.restore(&state, RestoreMode::Write).await.expect("restores");
    assert_eq!(outcome.action, RestoreAction::Restored);
    assert_eq!(outcome.room, Some(RoomRestored::Rebuilt { pre_queue: count as u64, after_start: 1 }));
    let again = h.gate.restore(&state, RestoreMode::Write).await.expect("restores");
    assert_eq!(again.room, Some(RoomRestored::Kept), "a room Redis has is kept");
    let room = h.gate.room(voucher).await.expect("reads").expect("the room is back");
    // The ingresses log a room's commitment and fetch its round, as after a
    // first opening.
    if !room.committed {
        h.gate.seed_committed(voucher, &room.seed).await.expect("marks");
    }
    let waiting = h.gate.advance_room(voucher).await.expect("advances");
    assert_eq!(waiting.state, RoomState::AwaitingBeacon, "nobody served before the round is in again");
    assert_eq!(h.gate.awaited_beacon(voucher).await.expect("reads"), Some(plan.clone()));
    assert!(h.gate.apply_beacon(voucher, &round, &randomness).await.expect("answers"));
    let summary = advance_until_quiet(h, voucher).await;
    assert_eq!(summary.state, RoomState::Open);

    let mut expected: Vec<String> =
        queue::beacon_pre_queue_order(&randomness, &early).iter().map(|u| format!("{u}|1")).collect();
    expected.push(format!("{late}|1"));
    let line = line(h, voucher).await;
    assert_eq!(line.len(), expected.len(), "every place back, each member once");
    assert!(line == expected, "the places of an unbroken run");
    assert_eq!(unkeyed(h, voucher).await, 0, "every member keyed");

    let events: Vec<Event> = envelopes(h, voucher).await.into_iter().map(|envelope| envelope.event).collect();
    let reveals: Vec<_> = events
        .iter()
        .filter_map(|event| match event {
            Event::QueueSeedRevealed(revealed) => Some(revealed.clone()),
            _ => None,
        })
        .collect();
    let [revealed] = reveals.try_into().expect("revealed once");
    assert_eq!(revealed.seed, randomness);
    assert_eq!(revealed.beacon, Some(round));
    assert_eq!(revealed.entries_hash, Some(queue::pre_queue_hash(&early)), "the whole pre-queue hashed");
    assert_eq!(revealed.pre_queued, count as u64);
    let served: Vec<UserId> = events
        .iter()
        .filter_map(|event| match event {
            Event::QueueEntryIssued(issued) => Some(issued.user_id.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(served.iter().collect::<HashSet<_>>().len(), served.len(), "nobody served twice");
    assert_eq!(served[..], queue::beacon_pre_queue_order(&randomness, &early)[..5], "served in the round's order");
}
