//! The waiting room's scripts: the pre-queue's shuffle against the rule in
//! `seckill_core::queue`, one place per user under concurrent joins, entries
//! bounded by the units left, entry tokens spent once by `admit.lua`, idle
//! places skipped, sold out and reopened.
//!
//! A sale "begins" here by moving its `begins_ms` in Redis to the Redis
//! clock's now: the room judges the start by that field and that clock, so
//! the tests need not wait for one.

use chrono::{Duration, Utc};
use futures::future::join_all;
use seckill_core::event::{Event, OrderAccepted, QueueEntryIssued, VoucherCreated};
use seckill_core::queue::{self, QueueSettings};
use seckill_core::{Envelope, UserId, VoucherId};
use seckill_gate::{Admission, Joined, PlaceState, Presented, Rejection, RestoreMode, RoomState};

use crate::{definition, on_single_and_cluster, state_of, user, Harness};

on_single_and_cluster!(
    single_only: [],
    both: [
        the_pre_queue_is_served_in_the_committed_shuffle_then_first_come,
        a_join_retried_concurrently_keeps_one_place,
        entries_never_exceed_the_units_left_times_the_factor,
        an_entry_admits_one_order,
        idle_places_are_skipped_and_may_be_taken_again,
        sold_out_then_units_returned_reopen_the_room,
        a_queue_voucher_redis_lost_is_restored_queue_mode_with_an_empty_room,
    ],
);

pub(crate) fn queue_definition(stock: u64, limit: u32, factor_percent: u32) -> VoucherCreated {
    let now = Utc::now();
    let mut definition = definition(stock, limit, (now + Duration::hours(1), now + Duration::hours(2)));
    definition.queue = Some(Box::new(QueueSettings {
        opens_at: now - Duration::minutes(1),
        factor_percent,
        entry_rate: 100_000,
        idle_seconds: 30,
        token_seconds: 120,
        beacon: None,
    }));
    definition
}

/// Loads `definition`, opens its room and commits its seed; returns the seed.
pub(crate) async fn open(h: &Harness, definition: &VoucherCreated) -> String {
    assert!(h.gate.load_voucher(definition).await.expect("loads"));
    let room = h.gate.open_room(definition).await.expect("opens").expect("a queue-mode voucher");
    assert!(!room.committed);
    let early = h.gate.join_queue(definition.voucher_id, &user("early"), None).await.expect("answers");
    assert!(matches!(early, Joined::NotOpen { .. }), "no join before the commitment is in the log: {early:?}");
    h.gate.seed_committed(definition.voucher_id, &room.seed).await.expect("marks");
    let again = h.gate.open_room(definition).await.expect("opens").expect("a room");
    assert_eq!(again.seed, room.seed, "opening again keeps the seed");
    assert!(again.committed);
    room.seed
}

/// The sale begins now, by the Redis clock.
pub(crate) async fn begin(h: &Harness, voucher: VoucherId) {
    let now = h.gate_now().await.timestamp_millis();
    let _: () = redis::cmd("HSET")
        .arg(h.gate.keys(voucher).voucher)
        .arg("begins_ms")
        .arg(now - 1)
        .query_async(&mut h.connection.clone())
        .await
        .expect("HSET");
}

/// The room's records in the outbox, in the order the scripts wrote them.
pub(crate) async fn records(h: &Harness, voucher: VoucherId) -> Vec<Event> {
    envelopes(h, voucher).await.into_iter().map(|envelope| envelope.event).collect()
}

/// The voucher's records in the outbox, whole, in the order written.
pub(crate) async fn envelopes(h: &Harness, voucher: VoucherId) -> Vec<Envelope> {
    let reply: redis::streams::StreamRangeReply = redis::cmd("XRANGE")
        .arg(h.outbox_of(voucher))
        .arg("-")
        .arg("+")
        .query_async(&mut h.connection.clone())
        .await
        .expect("XRANGE");
    reply
        .ids
        .iter()
        .map(|entry| {
            let record: Vec<u8> = entry.get("record").expect("a record");
            Envelope::decode(&record).expect("every record the scripts write decodes")
        })
        .filter(|envelope| envelope.event.voucher_id() == voucher)
        .collect()
}

/// What an order presenting the waiting room's `entry` sends.
pub(crate) fn with_entry(entry: u64) -> Presented {
    Presented { entry: Some(entry), ..Presented::default() }
}

fn issued(events: &[Event]) -> Vec<QueueEntryIssued> {
    events
        .iter()
        .filter_map(|event| match event {
            Event::QueueEntryIssued(issued) => Some(issued.clone()),
            _ => None,
        })
        .collect()
}

pub(crate) async fn advance_until_quiet(h: &Harness, voucher: VoucherId) -> seckill_gate::RoomSummary {
    loop {
        let summary = h.gate.advance_room(voucher).await.expect("advances");
        if summary.served_now + summary.skipped_now == 0 {
            return summary;
        }
    }
}

async fn the_pre_queue_is_served_in_the_committed_shuffle_then_first_come(h: &Harness) {
    let definition = queue_definition(1_000, 1, 100);
    let voucher = definition.voucher_id;
    let seed = open(h, &definition).await;
    let arrivals: Vec<UserId> = (0..200).map(|i| user(&format!("early-{i:03}"))).collect();
    for arrival in &arrivals {
        assert_eq!(h.gate.join_queue(voucher, arrival, None).await.expect("joins"), Joined::Placed { attempt: 1 });
    }
    let before = h.gate.advance_room(voucher).await.expect("advances");
    assert_eq!((before.state, before.cursor, before.places), (RoomState::Before, 0, 200));
    let place = h.gate.place(voucher, &arrivals[0]).await.expect("reads").expect("joined");
    assert_eq!(place.number, None, "no rank is shown before the seed is public");

    begin(h, voucher).await;
    let late: Vec<UserId> = (0..3).map(|i| user(&format!("late-{i}"))).collect();
    for arrival in &late {
        h.gate.join_queue(voucher, arrival, None).await.expect("joins");
    }
    let summary = advance_until_quiet(h, voucher).await;
    assert_eq!((summary.cursor, summary.issued, summary.pre_queued), (203, 203, Some(200)));

    let events = records(h, voucher).await;
    let Some(Event::QueueSeedRevealed(revealed)) = events.iter().find(|e| matches!(e, Event::QueueSeedRevealed(_)))
    else {
        panic!("the seed is revealed at the start");
    };
    assert_eq!(revealed.seed, seed);
    assert_eq!(revealed.pre_queued, 200);
    let served: Vec<UserId> = issued(&events).into_iter().map(|entry| entry.user_id).collect();
    let expected = queue::pre_queue_order(&seed, &arrivals);
    assert_eq!(&served[..200], expected.as_slice(), "the pre-queue is served in the shuffle's order");
    assert_ne!(&served[..200], arrivals.as_slice(), "and not in arrival order");
    assert_eq!(&served[200..], late.as_slice(), "joins after the start are first come, first served");
    // The script writes times itself (RFC 3339 from the Redis clock).
    let first = &issued(&events)[0];
    let expected_expiry = h.gate_now().await + Duration::seconds(120);
    assert!((first.expires_at - expected_expiry).num_seconds().abs() <= 5, "{}", first.expires_at);
    let places: Vec<u64> = issued(&events).iter().map(|entry| entry.place).collect();
    assert_eq!(places, (1..=203).collect::<Vec<_>>());
    let joins = events.iter().filter(|e| matches!(e, Event::QueueJoined(j) if j.pre_queue)).count();
    assert_eq!(joins, 200);
}

async fn a_join_retried_concurrently_keeps_one_place(h: &Harness) {
    let definition = queue_definition(10, 1, 100);
    let voucher = definition.voucher_id;
    open(h, &definition).await;
    let alice = user("alice");
    let answers = join_all((0..10).map(|_| h.gate.join_queue(voucher, &alice, None))).await;
    let placed = answers.iter().filter(|a| matches!(a, Ok(Joined::Placed { .. }))).count();
    let held = answers.iter().filter(|a| matches!(a, Ok(Joined::Held { attempt: 1 }))).count();
    assert_eq!((placed, held), (1, 9));
    let joins = records(h, voucher).await.into_iter().filter(|e| matches!(e, Event::QueueJoined(_))).count();
    assert_eq!(joins, 1, "one place, one record");
    let line: u64 =
        redis::cmd("ZCARD").arg(h.gate.keys(voucher).line).query_async(&mut h.connection.clone()).await.expect("ZCARD");
    assert_eq!(line, 1);
}

async fn entries_never_exceed_the_units_left_times_the_factor(h: &Harness) {
    let definition = queue_definition(10, 1, 150);
    let voucher = definition.voucher_id;
    open(h, &definition).await;
    let users: Vec<UserId> = (0..100).map(|i| user(&format!("u{i}"))).collect();
    for u in &users {
        h.gate.join_queue(voucher, u, None).await.expect("joins");
    }
    begin(h, voucher).await;
    let summary = advance_until_quiet(h, voucher).await;
    assert_eq!((summary.open, summary.issued), (15, 15), "ceil(10 x 1.5) entries");
    // Four of the served buy; the room stays within what is left.
    let entries = issued(&records(h, voucher).await);
    for entry in entries.iter().take(4) {
        let order = OrderAccepted::now(voucher, entry.user_id.clone(), 1);
        let admission = h.gate.admit_presenting(&order, None, &with_entry(entry.entry)).await.expect("answers");
        assert!(matches!(admission, Admission::Admitted { .. }), "{admission:?}");
    }
    let summary = advance_until_quiet(h, voucher).await;
    assert_eq!(summary.remaining, 6);
    assert_eq!(summary.issued, 15, "11 entries open of ceil(6 x 1.5) = 9: none more");
    assert!(summary.open <= (summary.remaining * 150).div_ceil(100) + 2);
}

async fn an_entry_admits_one_order(h: &Harness) {
    let definition = queue_definition(10, 2, 100);
    let voucher = definition.voucher_id;
    open(h, &definition).await;
    let (alice, bob) = (user("alice"), user("bob"));
    h.gate.join_queue(voucher, &alice, None).await.expect("joins");
    let without = h.gate.admit_order(&OrderAccepted::now(voucher, alice.clone(), 1), None).await.expect("answers");
    assert_eq!(without, Admission::Rejected(Rejection::NotStarted), "the window is checked first");
    begin(h, voucher).await;
    let without = h.gate.admit_order(&OrderAccepted::now(voucher, alice.clone(), 1), None).await.expect("answers");
    assert_eq!(without, Admission::Rejected(Rejection::EntryRequired));
    advance_until_quiet(h, voucher).await;
    let Some(PlaceState::Served { entry, .. }) =
        h.gate.place(voucher, &alice).await.expect("reads").map(|place| place.state)
    else {
        panic!("alice's turn came");
    };
    let wrong = h.gate.admit_presenting(&OrderAccepted::now(voucher, bob.clone(), 1), None, &with_entry(entry)).await;
    assert_eq!(wrong.expect("answers"), Admission::Rejected(Rejection::EntryInvalid), "bob cannot use alice's entry");

    // The same entry through two callers at once (two ingresses): one order.
    let orders: Vec<OrderAccepted> = (0..2).map(|_| OrderAccepted::now(voucher, alice.clone(), 1)).collect();
    let presented = with_entry(entry);
    let answers = join_all(orders.iter().map(|order| h.gate.admit_presenting(order, None, &presented))).await;
    let admitted: Vec<usize> =
        (0..2).filter(|&i| matches!(answers[i], Ok(Admission::Admitted { .. }))).collect::<Vec<_>>();
    assert_eq!(admitted.len(), 1, "{answers:?}");
    let winner = orders[admitted[0]].order_id;
    let loser = answers[1 - admitted[0]].as_ref().expect("answers");
    assert_eq!(loser, &Admission::Rejected(Rejection::EntryUsed { order: Some(winner) }));
    let place = h.gate.place(voucher, &alice).await.expect("reads").expect("joined");
    assert_eq!(place.state, PlaceState::Used { entry, order: Some(winner) });
    let used: Vec<Event> = records(h, voucher)
        .await
        .into_iter()
        .filter(|e| matches!(e, Event::QueueEntryUsed(u) if u.entry == entry && u.order_id == winner))
        .collect();
    assert_eq!(used.len(), 1, "the entry's use is in the outbox with its order");
    let remaining = h.gate.advance_room(voucher).await.expect("advances").remaining;
    assert_eq!(remaining, 9, "one unit taken");
}

async fn idle_places_are_skipped_and_may_be_taken_again(h: &Harness) {
    let definition = queue_definition(10, 1, 100);
    let voucher = definition.voucher_id;
    open(h, &definition).await;
    let (gone, here) = (user("gone"), user("here"));
    // "gone" joins first but stops watching: its last sighting is long past.
    h.gate.join_queue(voucher, &gone, None).await.expect("joins");
    h.gate.join_queue(voucher, &here, None).await.expect("joins");
    begin(h, voucher).await;
    let _: () = redis::cmd("HSET")
        .arg(h.gate.keys(voucher).seen)
        .arg(gone.as_str())
        .arg(0)
        .query_async(&mut h.connection.clone())
        .await
        .expect("HSET");
    let summary = advance_until_quiet(h, voucher).await;
    assert_eq!((summary.cursor, summary.issued), (2, 1));
    let events = records(h, voucher).await;
    assert!(events.iter().any(|e| matches!(e, Event::QueuePlaceExpired(x) if x.user_id == gone)));
    assert_eq!(issued(&events).iter().map(|e| e.user_id.clone()).collect::<Vec<_>>(), vec![here]);
    assert_eq!(h.gate.place(voucher, &gone).await.expect("reads").expect("joined").state, PlaceState::Expired);
    // Back again: a new place at the back, served next.
    assert_eq!(h.gate.join_queue(voucher, &gone, None).await.expect("joins"), Joined::Placed { attempt: 2 });
    let summary = advance_until_quiet(h, voucher).await;
    assert_eq!((summary.cursor, summary.issued), (3, 2));
    let place = h.gate.place(voucher, &gone).await.expect("reads").expect("joined");
    assert_eq!(place.number, Some(3));
    assert!(matches!(place.state, PlaceState::Served { entry: 2, .. }));
}

async fn sold_out_then_units_returned_reopen_the_room(h: &Harness) {
    let definition = queue_definition(1, 1, 100);
    let voucher = definition.voucher_id;
    open(h, &definition).await;
    h.gate.join_queue(voucher, &user("first"), None).await.expect("joins");
    h.gate.join_queue(voucher, &user("second"), None).await.expect("joins");
    begin(h, voucher).await;
    advance_until_quiet(h, voucher).await;
    // Both joined before the start: the shuffle decides who is served first.
    let served = issued(&records(h, voucher).await);
    assert_eq!(served.len(), 1, "one unit, one entry");
    let (buyer, next) = if served[0].user_id == user("first") { ("first", "second") } else { ("second", "first") };
    let order = OrderAccepted::now(voucher, user(buyer), 1);
    assert!(matches!(
        h.gate.admit_presenting(&order, None, &with_entry(served[0].entry)).await,
        Ok(Admission::Admitted { .. })
    ));
    let summary = advance_until_quiet(h, voucher).await;
    assert_eq!((summary.state, summary.issued), (RoomState::SoldOut, 1));
    assert!(h.gate.release(voucher, &user(buyer), 1, order.order_id, None).await.expect("releases"));
    let summary = advance_until_quiet(h, voucher).await;
    assert_eq!(
        (summary.state, summary.issued, summary.cursor),
        (RoomState::Open, 2, 2),
        "the returned unit serves the next"
    );
    assert!(matches!(
        h.gate.place(voucher, &user(next)).await.expect("reads").map(|p| p.state),
        Some(PlaceState::Served { entry: 2, .. })
    ));
}

async fn a_queue_voucher_redis_lost_is_restored_queue_mode_with_an_empty_room(h: &Harness) {
    let definition = queue_definition(3, 1, 100);
    let voucher = definition.voucher_id;
    open(h, &definition).await;
    h.gate.join_queue(voucher, &user("alice"), None).await.expect("joins");
    // Redis loses everything of the voucher, its room included.
    let keys = h.gate.keys(voucher);
    for key in keys
        .all()
        .into_iter()
        .chain([&keys.room, &keys.line, &keys.places, &keys.seen, &keys.holds].map(String::as_str))
    {
        let _: () = redis::cmd("DEL").arg(key).query_async(&mut h.connection.clone()).await.expect("DEL");
    }
    let state = state_of(&[Envelope::new(Event::VoucherCreated(definition.clone()))]);
    h.gate.restore(&state, RestoreMode::Write).await.expect("restores");
    begin(h, voucher).await;
    let order = OrderAccepted::now(voucher, user("bob"), 1);
    assert_eq!(
        h.gate.admit_order(&order, None).await.expect("answers"),
        Admission::Rejected(Rejection::EntryRequired),
        "restored, the sale still admits only with entries"
    );
    let room = h.gate.room(voucher).await.expect("reads").expect("a new room");
    assert!(!room.committed, "its new seed awaits its commitment in the log");
    assert_eq!(h.gate.place(voucher, &user("alice")).await.expect("reads"), None, "the room starts over empty");
}
