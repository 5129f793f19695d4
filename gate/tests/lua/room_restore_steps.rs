//! A beacon room's rebuild from the log in bounded steps
//! (`lua/queue_restore.lua`, at most `MOST_PLACES_PER_RESTORE` places a
//! call): a pre-queue of two steps whose restorer dies after the first
//! leaves no room (joins are refused, nobody served) and the next restore
//! finishes it, to the places the round determines; a room an ingress opens
//! between two steps is left as it is, with nothing of the rebuild mixed in
//! and nothing staged left behind.

use chrono::Duration;
use redis::Script;
use seckill_beacon::sandbox::Signer;
use seckill_core::event::VoucherCreated;
use seckill_core::{queue, UserId, VoucherId};
use seckill_gate::{
    Joined, RestoreAction, RestoreMode, RoomRestored, RoomState, VoucherAdmission, MOST_PLACES_PER_RESTORE,
};

use crate::room::{advance_until_quiet, begin, open};
use crate::room_beacon::beacon_room;
use crate::room_beacon_restore::{line, lose, the_log, unkeyed};
use crate::{on_single_and_cluster, state_of, user, Harness};

on_single_and_cluster!(single_only: [], both: [
    a_rebuild_interrupted_after_its_first_step_is_finished_by_the_next_restore,
    a_room_opened_between_two_steps_is_not_mixed_with_the_rebuild,
]);

/// More pre-queue places than one step writes.
const EARLY: usize = MOST_PLACES_PER_RESTORE + 5;

/// The script as the gate loads it: the room's fields, then the script.
fn queue_restore() -> Script {
    Script::new(preluded!("room_fields.lua", "staged_restore.lua" => "queue_restore.lua"))
}

/// The first `places` step of a rebuild, run as the gate runs it; then its
/// restorer dies.
async fn first_step_only(h: &Harness, voucher: VoucherId, first: &[UserId]) -> String {
    let keys = h.gate.keys(voucher);
    let script = queue_restore();
    let mut invocation = script.prepare_invoke();
    for key in [&keys.voucher, &keys.room, &keys.line, &keys.places, &keys.seen, &keys.holds] {
        invocation.key(key);
    }
    for key in [&keys.line, &keys.places, &keys.seen, &keys.holds] {
        invocation.key(format!("{key}:restoring"));
    }
    invocation.arg("places").arg(7 * 24 * 3_600 * 1_000_u64);
    for holder in first {
        invocation.arg(-1).arg(holder.as_str()).arg(1).arg("1|w||");
    }
    invocation.invoke_async(&mut h.connection.clone()).await.expect("answers")
}

async fn staged_keys_left(h: &Harness, voucher: VoucherId) -> u64 {
    let keys = h.gate.keys(voucher);
    let staged: Vec<String> =
        [&keys.line, &keys.places, &keys.seen, &keys.holds].iter().map(|k| format!("{k}:restoring")).collect();
    let mut left = 0;
    for key in staged {
        let exists: u64 = redis::cmd("EXISTS").arg(key).query_async(&mut h.connection.clone()).await.expect("EXISTS");
        left += exists;
    }
    left
}

/// A beacon room with `EARLY` places in its pre-queue and one join after
/// the start, waiting for its round, lost with its voucher: what the log
/// holds of it, folded, and the pre-queue.
async fn a_lost_room(h: &Harness, signer: &Signer) -> (VoucherCreated, VoucherAdmission, Vec<UserId>, UserId) {
    let (definition, _) = beacon_room(signer);
    let voucher = definition.voucher_id;
    let seed = open(h, &definition).await;
    let early: Vec<UserId> = (0..EARLY).map(|i| user(&format!("rs-{i:05}"))).collect();
    for holder in &early {
        assert_eq!(h.gate.join_queue(voucher, holder, None).await.expect("answers"), Joined::Placed { attempt: 1 });
    }
    begin(h, voucher).await;
    let began = VoucherCreated { begins_at: h.gate_now().await - Duration::seconds(1), ..definition.clone() };
    assert_eq!(h.gate.advance_room(voucher).await.expect("advances").state, RoomState::AwaitingBeacon);
    let late = user("rs-late");
    assert_eq!(h.gate.join_queue(voucher, &late, None).await.expect("answers"), Joined::Placed { attempt: 1 });
    let log = the_log(h, &began, &seed).await;
    lose(h, voucher).await;
    let state = state_of(&log);
    // The voucher itself comes back first (restore.lua), as reconcile does.
    (definition, state, early, late)
}

async fn a_rebuild_interrupted_after_its_first_step_is_finished_by_the_next_restore(h: &Harness) {
    let signer = Signer::from_seed(b"gate room restore steps test");
    let (definition, state, early, late) = a_lost_room(h, &signer).await;
    let voucher = definition.voucher_id;
    let plan = definition.queue.as_ref().and_then(|q| q.beacon.as_deref().cloned()).expect("a beacon room");
    // The voucher back alone (the room is restored after it), then the
    // first step of the room's rebuild, and its restorer dies.
    let mut voucher_only = state.clone();
    voucher_only.queue = None;
    let outcome = h.gate.restore(&voucher_only, RestoreMode::Write).await.expect("restores");
    assert_eq!(outcome.action, RestoreAction::Restored);
    assert_eq!(first_step_only(h, voucher, &early[..MOST_PLACES_PER_RESTORE]).await, "written");

    // Half a rebuild is no room: nobody joins, nobody is served.
    assert_eq!(h.gate.room(voucher).await.expect("reads"), None, "no room until the last step");
    let newcomer = user("rs-newcomer");
    assert_eq!(h.gate.join_queue(voucher, &newcomer, None).await.expect("answers"), Joined::UnknownVoucher);
    assert_eq!(h.gate.advance_room(voucher).await.expect("advances").served_now, 0);
    assert!(line(h, voucher).await.is_empty(), "nothing staged is in the room's line");

    // The next reconcile writes every step again and finishes it.
    let resumed = h.gate.restore(&state, RestoreMode::Write).await.expect("restores");
    assert_eq!(resumed.room, Some(RoomRestored::Rebuilt { pre_queue: EARLY as u64, after_start: 1 }));
    assert_eq!(staged_keys_left(h, voucher).await, 0, "the staging keys were moved in");
    assert_eq!(unkeyed(h, voucher).await, EARLY as u64, "the pre-queue back unkeyed, each member once");
    let room = h.gate.keys(voucher).room;
    let (seq, joined): (u64, u64) = redis::cmd("HMGET")
        .arg(&room)
        .arg("seq")
        .arg("joined")
        .query_async(&mut h.connection.clone())
        .await
        .expect("HMGET");
    assert_eq!((seq, joined), (1, EARLY as u64 + 1), "the room counts the places it holds");

    let room = h.gate.room(voucher).await.expect("reads").expect("the room is back");
    if !room.committed {
        h.gate.seed_committed(voucher, &room.seed).await.expect("marks");
    }
    assert_eq!(h.gate.advance_room(voucher).await.expect("advances").state, RoomState::AwaitingBeacon);
    let round = signer.sign(plan.round);
    let randomness = seckill_beacon::verify(&plan.chain, &round).expect("the sandbox's rounds verify");
    assert!(h.gate.apply_beacon(voucher, &round, &randomness).await.expect("answers"));
    assert_eq!(advance_until_quiet(h, voucher).await.state, RoomState::Open);
    let mut expected: Vec<String> =
        queue::beacon_pre_queue_order(&randomness, &early).iter().map(|u| format!("{u}|1")).collect();
    expected.push(format!("{late}|1"));
    let line = line(h, voucher).await;
    assert_eq!(line.len(), expected.len(), "every place back, each member once");
    assert!(line == expected, "the places an unbroken room's round gives");
}

async fn a_room_opened_between_two_steps_is_not_mixed_with_the_rebuild(h: &Harness) {
    let signer = Signer::from_seed(b"gate room restore race test");
    let (definition, state, early, _) = a_lost_room(h, &signer).await;
    let voucher = definition.voucher_id;
    let mut voucher_only = state.clone();
    voucher_only.queue = None;
    h.gate.restore(&voucher_only, RestoreMode::Write).await.expect("restores");
    assert_eq!(first_step_only(h, voucher, &early[..MOST_PLACES_PER_RESTORE]).await, "written");
    // A redelivered definition opens the room new meanwhile.
    h.gate.open_room(&definition).await.expect("opens").expect("a room");

    let outcome = h.gate.restore(&state, RestoreMode::Write).await.expect("restores");
    assert_eq!(outcome.room, Some(RoomRestored::Kept), "the room opened meanwhile is left as it is");
    assert_eq!(staged_keys_left(h, voucher).await, 0, "nothing staged is left");
    assert!(line(h, voucher).await.is_empty(), "no restored place in the fresh room");
}
