//! A beacon room Redis lost after its reveal, while serving, rebuilt from
//! its records through `Gate::restore` (`gate/src/room_revealed.rs`): every
//! place comes back where it stood, in the order the round gave, the places
//! passed as they were left (served with their entry's end, spent on their
//! order, skipped, taken again at the back), and the room serves on from
//! its cursor: the next place served is the one an unbroken room would have
//! served next, with the next entry number.

use seckill_beacon::sandbox::Signer;
use seckill_core::event::{Event, OrderAccepted, VoucherCreated};
use seckill_core::UserId;
use seckill_gate::{Admission, Joined, PlaceState, RestoreAction, RestoreMode, RoomRestored, RoomState};

use crate::room::{advance_until_quiet, begin, envelopes, open, with_entry};
use crate::room_beacon::beacon_room;
use crate::room_beacon_restore::{line, lose, the_log};
use crate::{on_single_and_cluster, state_of, user, Harness};

on_single_and_cluster!(single_only: [], both: [a_room_lost_while_serving_comes_back_where_it_stood]);

const EARLY: usize = 12;

/// Each user's place as Redis tells it: attempt, number and state.
async fn places(
    h: &Harness,
    voucher: seckill_core::VoucherId,
    users: &[UserId],
) -> Vec<(u32, Option<u64>, PlaceState)> {
    let mut places = Vec::new();
    for holder in users {
        let place = h.gate.place(voucher, holder).await.expect("reads").expect("a place");
        places.push((place.attempt, place.number, place.state));
    }
    places
}

async fn a_room_lost_while_serving_comes_back_where_it_stood(h: &Harness) {
    let signer = Signer::from_seed(b"gate room revealed restore test");
    let (definition, plan) = beacon_room(&signer);
    let voucher = definition.voucher_id;
    let seed = open(h, &definition).await;
    let early: Vec<UserId> = (0..EARLY).map(|i| user(&format!("rv-{i:02}"))).collect();
    for holder in &early {
        assert_eq!(h.gate.join_queue(voucher, holder, None).await.expect("answers"), Joined::Placed { attempt: 1 });
    }
    begin(h, voucher).await;
    let began = VoucherCreated { begins_at: h.gate_now().await - chrono::Duration::seconds(1), ..definition.clone() };
    assert_eq!(h.gate.advance_room(voucher).await.expect("advances").state, RoomState::AwaitingBeacon);
    let late = user("rv-late");
    assert_eq!(h.gate.join_queue(voucher, &late, None).await.expect("answers"), Joined::Placed { attempt: 1 });
    let round = signer.sign(plan.round);
    let randomness = seckill_beacon::verify(&plan.chain, &round).expect("the sandbox's rounds verify");
    assert!(h.gate.apply_beacon(voucher, &round, &randomness).await.expect("answers"));
    // The third place's holder has gone: skipped when its turn comes.
    let order = seckill_core::queue::beacon_pre_queue_order(&randomness, &early);
    let _: () = redis::cmd("HSET")
        .arg(h.gate.keys(voucher).seen)
        .arg(order[2].as_str())
        .arg(0)
        .query_async(&mut h.connection.clone())
        .await
        .expect("HSET");
    // Five units, five entries: places 1, 2, 4, 5 and 6; the first spent.
    let summary = advance_until_quiet(h, voucher).await;
    assert_eq!((summary.cursor, summary.issued), (6, 5));
    let bought = OrderAccepted::now(voucher, order[0].clone(), 1);
    let admitted = h.gate.admit_presenting(&bought, None, &with_entry(1)).await.expect("answers");
    assert!(matches!(admitted, Admission::Admitted { .. }), "{admitted:?}");
    // The one skipped takes a place again, at the back.
    assert_eq!(h.gate.join_queue(voucher, &order[2], None).await.expect("answers"), Joined::Placed { attempt: 2 });

    let mut everyone = early.clone();
    everyone.push(late.clone());
    let line_before = line(h, voucher).await;
    let places_before = places(h, voucher, &everyone).await;
    let log = the_log(h, &began, &seed).await;
    lose(h, voucher).await;
    let state = state_of(&log);
    let outcome = h.gate.restore(&state, RestoreMode::Write).await.expect("restores");
    assert_eq!(outcome.action, RestoreAction::Restored);
    assert_eq!(
        outcome.room,
        Some(RoomRestored::RebuiltServing { pre_queue: EARLY as u64, after_start: 1, served: 5, spent: 1, skipped: 1 })
    );

    assert_eq!(line(h, voucher).await, line_before, "the line as it stood");
    assert_eq!(places(h, voucher, &everyone).await, places_before, "every place as it stood");
    let room = h.gate.room(voucher).await.expect("reads").expect("the room is back");
    assert!(room.committed, "revealed: no new commitment");
    let summary = h.gate.advance_room(voucher).await.expect("advances");
    assert_eq!((summary.state, summary.cursor, summary.issued, summary.served_now), (RoomState::Open, 6, 5, 0));

    // A unit given back serves the next place, as an unbroken room would.
    assert!(h.gate.release(voucher, &order[0], 1, bought.order_id, None).await.expect("releases"));
    let summary = advance_until_quiet(h, voucher).await;
    assert_eq!((summary.cursor, summary.issued), (7, 6));
    let next = h.gate.place(voucher, &order[6]).await.expect("reads").expect("a place");
    assert!(matches!(next.state, PlaceState::Served { entry: 6, .. }), "{next:?}");
    let reveals = envelopes(h, voucher)
        .await
        .into_iter()
        .filter(|envelope| matches!(envelope.event, Event::QueueSeedRevealed(_)))
        .count();
    assert_eq!(reveals, 1, "not revealed again");
}
