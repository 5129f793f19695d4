//! Entry tokens and purchase windows against the window clock of
//! `queue_advance.lua` and `draw_advance.lua`: a token lapses unused and
//! frees its share; a pause, a full outbox, an outage longer than the
//! ticks' slack (1 s: `lua/window_clock.lua`), or a stall between the steps
//! of a large draw does not eat a buyer's time, and each such stall is in
//! the log (`WindowsExtended`); calls late by less than the slack extend
//! nothing.
//!
//! Windows are made short here by setting the room's `token_ms` or
//! `purchase_ms` in Redis, as the other room and draw tests do; stalls last
//! longer than the window, so a window that ran through one is over.

use std::time::Duration as StdDuration;

use seckill_core::draw::{self, RANK_CHUNK};
use seckill_core::event::{Event, OrderAccepted, StallReason, VoucherUpdated, WindowsExtended};
use seckill_core::{UserId, VoucherId};
use seckill_gate::{Admission, EntryState, PlaceState, Rejection, RoomState};
use uuid::Uuid;

use crate::draw::{advance_until_quiet, draw_definition, enter_all, make_the_draw, open, order, set_room};
use crate::room::{self, records, with_entry};
use crate::{on_single_and_cluster, user, Harness};

on_single_and_cluster!(
    single_only: [],
    both: [
        an_entry_token_lapses_unused_and_frees_its_share_for_the_next_place,
        a_pause_longer_than_an_entry_token_keeps_it,
        a_full_outbox_keeps_the_entry_tokens,
        a_pause_longer_than_the_window_keeps_the_winners_windows,
        a_stall_between_the_steps_of_a_large_draw_keeps_every_window,
        an_outage_longer_than_the_window_keeps_the_windows,
        an_outage_of_two_seconds_keeps_an_entry_token,
        the_first_order_after_an_outage_is_judged_with_it_before_any_call_logs_it,
        the_first_token_spent_after_an_outage_is_judged_with_it_before_any_call_logs_it,
        ticks_late_within_the_slack_extend_no_token,
        ticks_late_within_the_slack_extend_no_window,
    ],
);

async fn sleep_ms(ms: u64) {
    tokio::time::sleep(StdDuration::from_millis(ms)).await;
}

/// Waits `ms` while moving the draw on every 100 ms, as the ingresses do:
/// time that is not an outage (a gap of over a second between calls is).
pub(crate) async fn ticking_draw(h: &Harness, voucher: VoucherId, ms: u64) {
    let until = in_ms(ms);
    while tokio::time::Instant::now() < until {
        advance_until_quiet(h, voucher).await;
        sleep_ms(100).await;
    }
}

/// How long `stall` lasted.
fn length(stall: &WindowsExtended) -> chrono::Duration {
    stall.until - stall.from
}

/// The stalls in the voucher's outbox.
async fn stalls(h: &Harness, voucher: VoucherId) -> Vec<WindowsExtended> {
    records(h, voucher)
        .await
        .into_iter()
        .filter_map(|event| match event {
            Event::WindowsExtended(stall) => Some(stall),
            _ => None,
        })
        .collect()
}

async fn pause(h: &Harness, voucher: VoucherId, paused: bool) {
    let update = VoucherUpdated { voucher_id: voucher, paused: Some(paused), ends_at: None, add_stock: 0 };
    h.gate.update_voucher(Uuid::now_v7(), &update).await.expect("updates");
}

/// Who among `users` holds a served entry, and which.
async fn served(h: &Harness, voucher: VoucherId, users: &[&UserId]) -> Vec<(UserId, u64)> {
    let mut served = Vec::new();
    for holder in users {
        let place = h.gate.place(voucher, holder).await.expect("reads").expect("joined");
        if let PlaceState::Served { entry, .. } = place.state {
            served.push(((*holder).clone(), entry));
        }
    }
    served
}

/// Opens a one-unit room with `alice` and `bob` in it, begins the sale
/// with tokens of `token_ms`, and serves the first of them.
async fn one_entry_served(h: &Harness, token_ms: i64) -> (VoucherId, (UserId, u64), UserId) {
    let definition = room::queue_definition(1, 1, 100);
    let voucher = definition.voucher_id;
    room::open(h, &definition).await;
    let (alice, bob) = (user("alice"), user("bob"));
    for holder in [&alice, &bob] {
        h.gate.join_queue(voucher, holder, None).await.expect("joins");
    }
    set_room(h, voucher, "token_ms", token_ms).await;
    room::begin(h, voucher).await;
    let summary = room::advance_until_quiet(h, voucher).await;
    assert_eq!((summary.issued, summary.open), (1, 1), "one unit: one entry at a time");
    let [first] = served(h, voucher, &[&alice, &bob]).await.try_into().expect("one served");
    let next = if first.0 == alice { bob } else { alice };
    (voucher, first, next)
}

async fn admit_with(h: &Harness, voucher: VoucherId, holder: &UserId, entry: u64) -> Admission {
    let order = OrderAccepted::now(voucher, holder.clone(), 1);
    h.gate.admit_presenting(&order, None, &with_entry(entry)).await.expect("answers")
}

async fn an_entry_token_lapses_unused_and_frees_its_share_for_the_next_place(h: &Harness) {
    let (voucher, (first, entry), next) = one_entry_served(h, 300).await;
    assert_eq!(room::advance_until_quiet(h, voucher).await.issued, 1, "the open token holds the only unit");
    sleep_ms(400).await;
    assert_eq!(admit_with(h, voucher, &first, entry).await, Admission::Rejected(Rejection::EntryExpired));
    let summary = room::advance_until_quiet(h, voucher).await;
    assert_eq!((summary.issued, summary.open), (2, 1), "the lapsed token's share went to the next place");
    let [(holder, second)] = served(h, voucher, &[&next]).await.try_into().expect("the next place is served");
    assert_eq!((holder, second), (next.clone(), 2));
    assert_eq!(admit_with(h, voucher, &next, second).await, Admission::Admitted { remaining: 0 });
    assert!(stalls(h, voucher).await.is_empty(), "nothing stalled");
}

async fn a_pause_longer_than_an_entry_token_keeps_it(h: &Harness) {
    let (voucher, (first, entry), next) = one_entry_served(h, 1_000).await;
    pause(h, voucher, true).await;
    assert_eq!(room::advance_until_quiet(h, voucher).await.state, RoomState::Paused);
    sleep_ms(1_500).await;
    assert_eq!(room::advance_until_quiet(h, voucher).await.state, RoomState::Paused);
    pause(h, voucher, false).await;
    let summary = room::advance_until_quiet(h, voucher).await;
    assert_eq!((summary.state, summary.issued), (RoomState::Open, 1), "the token still holds its unit");
    let place = h.gate.place(voucher, &first).await.expect("reads").expect("joined");
    let PlaceState::Served { expires_at, .. } = place.state else { panic!("still served: {place:?}") };
    assert!(expires_at > h.gate_now().await, "shown as still open, until {expires_at}");
    assert_eq!(admit_with(h, voucher, &first, entry).await, Admission::Admitted { remaining: 0 });
    let [stall] = stalls(h, voucher).await.try_into().expect("one stall logged");
    assert_eq!(stall.reason, StallReason::Paused);
    assert!(stall.until - stall.from >= chrono::Duration::milliseconds(1_500), "{stall:?}");
    assert!(served(h, voucher, &[&next]).await.is_empty(), "nobody else was served");
}

async fn a_full_outbox_keeps_the_entry_tokens(h: &Harness) {
    let (voucher, (first, entry), _) = one_entry_served(h, 1_000).await;
    let written: u64 =
        redis::cmd("XLEN").arg(h.outbox_of(voucher)).query_async(&mut h.connection.clone()).await.expect("XLEN");
    // The log is down: the outbox is at its bound.
    let full = h.gate.clone().with_outbox_limit(written);
    assert_eq!(full.advance_room(voucher).await.expect("advances").state, RoomState::Backlog);
    sleep_ms(1_500).await;
    assert_eq!(full.advance_room(voucher).await.expect("advances").state, RoomState::Backlog);
    // The log is back.
    assert_eq!(room::advance_until_quiet(h, voucher).await.issued, 1);
    assert_eq!(admit_with(h, voucher, &first, entry).await, Admission::Admitted { remaining: 0 });
    let [stall] = stalls(h, voucher).await.try_into().expect("one stall logged");
    assert_eq!(stall.reason, StallReason::Backlog);
}

/// A drawn sale of `stock` units among `entrants` users whose windows last
/// `purchase_ms`; returns the ranking.
async fn drawn(h: &Harness, stock: u64, entrants: usize, purchase_ms: i64) -> (VoucherId, Vec<UserId>) {
    let definition = draw_definition(stock, 1);
    let voucher = definition.voucher_id;
    let seed = open(h, &definition).await;
    let users: Vec<UserId> = (0..entrants).map(|i| user(&format!("w{i}"))).collect();
    enter_all(h, voucher, &users).await;
    set_room(h, voucher, "purchase_ms", purchase_ms).await;
    make_the_draw(h, voucher).await;
    (voucher, draw::ranking(&seed, &users))
}

async fn a_pause_longer_than_the_window_keeps_the_winners_windows(h: &Harness) {
    let (voucher, ranked) = drawn(h, 2, 5, 1_000).await;
    assert_eq!(advance_until_quiet(h, voucher).await.cursor, 2);
    pause(h, voucher, true).await;
    assert_eq!(advance_until_quiet(h, voucher).await.state, RoomState::Paused);
    sleep_ms(1_500).await;
    pause(h, voucher, false).await;
    let summary = advance_until_quiet(h, voucher).await;
    assert_eq!((summary.state, summary.cursor), (RoomState::Open, 2), "no win lapsed, nobody promoted");
    let entry = h.gate.draw_entry(voucher, &ranked[1]).await.expect("reads").expect("a draw");
    assert!(matches!(entry.state, Some(EntryState::Won { rank: 2, .. })) && !entry.lapsed(), "{entry:?}");
    assert!(matches!(order(h, voucher, &ranked[0]).await, Admission::Admitted { .. }));
    assert!(matches!(order(h, voucher, &ranked[1]).await, Admission::Admitted { remaining: 0 }));
    let [stall] = stalls(h, voucher).await.try_into().expect("one stall logged");
    assert_eq!(stall.reason, StallReason::Paused);
}

async fn a_stall_between_the_steps_of_a_large_draw_keeps_every_window(h: &Harness) {
    let winners = RANK_CHUNK as u64 + 20;
    let (voucher, ranked) = drawn(h, winners, RANK_CHUNK + 40, 1_000).await;
    // One call at a time, up to the selection: it grants its first step.
    let first = loop {
        let summary = h.gate.advance_draw(voucher).await.expect("advances");
        if summary.selected.is_some() {
            break summary;
        }
    };
    assert_eq!((first.selected, first.cursor), (Some(winners), RANK_CHUNK as u64), "one step's worth granted");
    // The next step comes late.
    sleep_ms(1_500).await;
    let summary = advance_until_quiet(h, voucher).await;
    assert_eq!(summary.cursor, winners, "every winner granted, nobody promoted");
    for rank in [1, RANK_CHUNK, RANK_CHUNK + 1, winners as usize] {
        let answer = order(h, voucher, &ranked[rank - 1]).await;
        assert!(matches!(answer, Admission::Admitted { .. }), "rank {rank} keeps its whole window: {answer:?}");
    }
    let [stall] = stalls(h, voucher).await.try_into().expect("one stall logged");
    assert_eq!(stall.reason, StallReason::Granting);
    assert!(stall.until - stall.from >= chrono::Duration::milliseconds(1_500), "{stall:?}");
}

async fn an_outage_longer_than_the_window_keeps_the_windows(h: &Harness) {
    let (voucher, ranked) = drawn(h, 1, 3, 1_000).await;
    assert_eq!(advance_until_quiet(h, voucher).await.cursor, 1);
    // Nobody reaches Redis for 2 s: longer than the window and than the
    // ticks' slack (1 s), shorter than the 5 s once needed to count at all.
    sleep_ms(2_000).await;
    let summary = advance_until_quiet(h, voucher).await;
    assert_eq!(summary.cursor, 1, "the winner's window kept its unit: nobody promoted");
    assert_eq!(order(h, voucher, &ranked[0]).await, Admission::Admitted { remaining: 0 });
    let [stall] = stalls(h, voucher).await.try_into().expect("one stall logged");
    assert_eq!(stall.reason, StallReason::Outage);
    assert!(length(&stall) >= chrono::Duration::milliseconds(2_000), "counted whole, from the last call: {stall:?}");
}

async fn an_outage_of_two_seconds_keeps_an_entry_token(h: &Harness) {
    let (voucher, (first, entry), next) = one_entry_served(h, 1_000).await;
    sleep_ms(2_000).await;
    let summary = room::advance_until_quiet(h, voucher).await;
    assert_eq!((summary.issued, summary.open), (1, 1), "the token still holds its unit");
    assert_eq!(admit_with(h, voucher, &first, entry).await, Admission::Admitted { remaining: 0 });
    assert!(served(h, voucher, &[&next]).await.is_empty(), "nobody else was served");
    let [stall] = stalls(h, voucher).await.try_into().expect("one stall logged");
    assert_eq!(stall.reason, StallReason::Outage);
    assert!(length(&stall) >= chrono::Duration::milliseconds(2_000), "counted whole, from the last call: {stall:?}");
}

/// The first order after an outage can reach Redis before any advance call
/// has logged the outage (the orders of a storm come before the next tick):
/// it is judged on the clock the log will show, which stood still from the
/// last call.
async fn the_first_order_after_an_outage_is_judged_with_it_before_any_call_logs_it(h: &Harness) {
    let (voucher, ranked) = drawn(h, 1, 3, 1_000).await;
    assert_eq!(advance_until_quiet(h, voucher).await.cursor, 1);
    sleep_ms(2_000).await;
    assert_eq!(order(h, voucher, &ranked[0]).await, Admission::Admitted { remaining: 0 });
    assert!(stalls(h, voucher).await.is_empty(), "no call has logged the outage yet");
    assert_eq!(advance_until_quiet(h, voucher).await.cursor, 1, "nobody promoted");
    let [stall] = stalls(h, voucher).await.try_into().expect("the next call logged the outage");
    assert_eq!(stall.reason, StallReason::Outage);
    assert!(length(&stall) >= chrono::Duration::milliseconds(2_000), "counted from the last call: {stall:?}");
}

/// The same for a waiting room's entry token.
async fn the_first_token_spent_after_an_outage_is_judged_with_it_before_any_call_logs_it(h: &Harness) {
    let (voucher, (first, entry), next) = one_entry_served(h, 1_000).await;
    sleep_ms(2_000).await;
    assert_eq!(admit_with(h, voucher, &first, entry).await, Admission::Admitted { remaining: 0 });
    room::advance_until_quiet(h, voucher).await;
    assert!(served(h, voucher, &[&next]).await.is_empty(), "nobody else was served");
    let [stall] = stalls(h, voucher).await.try_into().expect("the next call logged the outage");
    assert_eq!(stall.reason, StallReason::Outage);
    assert!(length(&stall) >= chrono::Duration::milliseconds(2_000), "counted from the last call: {stall:?}");
}

/// Waits 700 ms, a call seven ticks late but within the slack; whether
/// `until` is still ahead.
async fn late_tick(until: tokio::time::Instant) -> bool {
    sleep_ms(700).await;
    tokio::time::Instant::now() < until
}

fn in_ms(ms: u64) -> tokio::time::Instant {
    tokio::time::Instant::now() + StdDuration::from_millis(ms)
}

async fn ticks_late_within_the_slack_extend_no_token(h: &Harness) {
    let (voucher, (first, entry), next) = one_entry_served(h, 1_000).await;
    let until = in_ms(2_000);
    while late_tick(until).await {
        room::advance_until_quiet(h, voucher).await;
    }
    assert_eq!(admit_with(h, voucher, &first, entry).await, Admission::Rejected(Rejection::EntryExpired));
    let summary = room::advance_until_quiet(h, voucher).await;
    assert_eq!(summary.issued, 2, "the lapsed token's share went to the next place");
    assert_eq!(served(h, voucher, &[&next]).await.len(), 1, "the next place is served");
    assert!(stalls(h, voucher).await.is_empty(), "nothing stalled: {:?}", stalls(h, voucher).await);
}

async fn ticks_late_within_the_slack_extend_no_window(h: &Harness) {
    let (voucher, ranked) = drawn(h, 1, 3, 1_000).await;
    assert_eq!(advance_until_quiet(h, voucher).await.cursor, 1);
    let until = in_ms(2_000);
    while late_tick(until).await {
        advance_until_quiet(h, voucher).await;
    }
    assert_eq!(order(h, voucher, &ranked[0]).await, Admission::Rejected(Rejection::WindowClosed));
    assert_eq!(advance_until_quiet(h, voucher).await.cursor, 2, "the lapsed win went to rank 2");
    assert!(stalls(h, voucher).await.is_empty(), "nothing stalled: {:?}", stalls(h, voucher).await);
}
