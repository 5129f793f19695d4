//! A draw Redis lost, rebuilt from its records (`lua/draw_restore.lua`
//! through `Gate::restore`): after the draw, every entrant's state comes
//! back as it stood (wins open, lapsed and spent, ranks not won) and the
//! draw goes on from it; before the draw, the entries come back with their
//! seqs and the list's hash under a new seed, and the draw made afterwards
//! ranks the whole list by the rule; lost while its ranking was being
//! logged, it is ranked again from the revealed seed; a win whose window a
//! logged stall lengthened keeps the longer window; a draw Redis still has
//! is kept.
//!
//! The loss is the deletion of every key of the voucher (the outbox, which
//! the log stands for here, is read first).

use seckill_core::draw;
use seckill_core::event::{DrawSeedCommitted, Event, VoucherCreated, VoucherUpdated};
use seckill_core::{queue, Envelope, UserId, VoucherId};
use seckill_gate::{Admission, DrawRestored, Entered, EntryState, Rejection, RestoreMode, RoomState};

use crate::draw::{advance_until_quiet, draw_definition, enter_all, make_the_draw, open, order, set_room};
use crate::room::envelopes;
use crate::{on_single_and_cluster, state_of, user, Harness};

on_single_and_cluster!(
    single_only: [],
    both: [
        a_draw_lost_after_the_draw_comes_back_as_it_stood,
        a_draw_lost_before_the_draw_keeps_its_entries_under_a_new_seed,
        a_draw_lost_while_logging_its_ranking_is_ranked_again,
        a_draw_opened_during_a_rebuild_is_not_mixed_with_it,
        a_gap_in_the_logged_entries_keeps_every_logged_entry,
        a_restored_window_ends_where_the_logged_stalls_moved_it,
    ],
);

/// What the log holds of the sale: its definition, the commitment the
/// ingress logs, and every record the scripts wrote.
async fn the_log(h: &Harness, definition: &VoucherCreated, seed: &str) -> Vec<Envelope> {
    let mut log = vec![
        Envelope::new(Event::VoucherCreated(definition.clone())),
        Envelope::new(Event::DrawSeedCommitted(DrawSeedCommitted {
            voucher_id: definition.voucher_id,
            seed_hash: queue::seed_commitment(seed),
            sealed_seed: None,
        })),
    ];
    log.extend(envelopes(h, definition.voucher_id).await);
    log
}

/// Redis loses every key of `voucher` (not the outbox: read already).
async fn lose(h: &Harness, voucher: VoucherId) {
    let keys = h.gate.keys(voucher);
    let mut lost: Vec<String> = keys.all().iter().map(|key| (*key).to_owned()).collect();
    lost.extend([keys.room, keys.line, keys.places, keys.seen, keys.holds, keys.ranks, keys.solved, keys.pace]);
    for key in lost {
        let _: () = redis::cmd("DEL").arg(key).query_async(&mut h.connection.clone()).await.expect("DEL");
    }
    assert_eq!(h.gate.room(voucher).await.expect("reads"), None, "the draw is gone");
}

async fn restored(h: &Harness, log: &[Envelope]) -> DrawRestored {
    let outcome = h.gate.restore(&state_of(log), RestoreMode::Write).await.expect("restores");
    outcome.draw.expect("a draw-mode voucher's draw is restored")
}

async fn states(h: &Harness, voucher: VoucherId, users: &[UserId]) -> Vec<Option<EntryState>> {
    let mut states = Vec::new();
    for entrant in users {
        states.push(h.gate.draw_entry(voucher, entrant).await.expect("reads").expect("a draw").state);
    }
    states
}

async fn a_draw_lost_after_the_draw_comes_back_as_it_stood(h: &Harness) {
    let definition = draw_definition(3, 1);
    let voucher = definition.voucher_id;
    let seed = open(h, &definition).await;
    let entrants: Vec<UserId> = (0..10).map(|i| user(&format!("r{i}"))).collect();
    enter_all(h, voucher, &entrants).await;
    let ranked = draw::ranking(&seed, &entrants);
    // The winners at the draw get 3 s, the promoted 600 s.
    set_room(h, voucher, "purchase_ms", 3_000).await;
    make_the_draw(h, voucher).await;
    assert_eq!(advance_until_quiet(h, voucher).await.cursor, 3);
    assert!(matches!(order(h, voucher, &ranked[0]).await, Admission::Admitted { .. }));
    set_room(h, voucher, "purchase_ms", 600_000).await;
    // The windows run out while the ingresses tick (an untouched room
    // would be an outage, and keep them).
    crate::windows::ticking_draw(h, voucher, 3_100).await;
    // Ranks 2 and 3 lapsed: 4 and 5 win the two units left; 4 buys.
    assert_eq!(advance_until_quiet(h, voucher).await.cursor, 5);
    assert!(matches!(order(h, voucher, &ranked[3]).await, Admission::Admitted { remaining: 1 }));
    let before = states(h, voucher, &entrants).await;
    let entry = h.gate.draw_entry(voucher, &ranked[4]).await.expect("reads").expect("a draw");
    assert_eq!((entry.cursor, entry.selected, entry.entries), (5, Some(3), 10));

    let log = the_log(h, &definition, &seed).await;
    lose(h, voucher).await;
    let outcome = restored(h, &log).await;
    assert_eq!(outcome, DrawRestored::Rebuilt { stage: "drawn", entries: 10, wins: 5, wins_used: 2, new_seed: false });
    assert_eq!(states(h, voucher, &entrants).await, before, "every entrant as they stood");
    let entry = h.gate.draw_entry(voucher, &ranked[4]).await.expect("reads").expect("a draw");
    assert_eq!((entry.cursor, entry.selected, entry.entries), (5, Some(3), 10));
    assert_eq!(restored(h, &log).await, DrawRestored::Kept, "a draw Redis has is kept");

    // The draw goes on from there.
    assert!(matches!(order(h, voucher, &ranked[0]).await, Admission::Rejected(Rejection::WinUsed { .. })));
    assert_eq!(order(h, voucher, &ranked[1]).await, Admission::Rejected(Rejection::WindowClosed));
    assert_eq!(order(h, voucher, &ranked[5]).await, Admission::Rejected(Rejection::NotWon));
    assert_eq!(advance_until_quiet(h, voucher).await.cursor, 5, "rank 5's open win holds the last unit");
    assert_eq!(order(h, voucher, &ranked[4]).await, Admission::Admitted { remaining: 0 });
    let summary = advance_until_quiet(h, voucher).await;
    assert_eq!((summary.state, summary.cursor), (RoomState::SoldOut, 5));
    let selections = envelopes(h, voucher)
        .await
        .iter()
        .filter(|envelope| matches!(envelope.event, Event::DrawWinnersSelected(_) | Event::DrawSeedRevealed(_)))
        .count();
    assert_eq!(selections, 2, "one reveal, one selection: nothing drawn again");
}

async fn a_draw_lost_before_the_draw_keeps_its_entries_under_a_new_seed(h: &Harness) {
    let definition = draw_definition(2, 1);
    let voucher = definition.voucher_id;
    let first_seed = open(h, &definition).await;
    let early: Vec<UserId> = (0..4).map(|i| user(&format!("n{i}"))).collect();
    enter_all(h, voucher, &early).await;

    let log = the_log(h, &definition, &first_seed).await;
    lose(h, voucher).await;
    let outcome = restored(h, &log).await;
    assert_eq!(outcome, DrawRestored::Rebuilt { stage: "entering", entries: 4, wins: 0, wins_used: 0, new_seed: true });
    let room = h.gate.room(voucher).await.expect("reads").expect("the draw is back");
    assert!(room.draw && !room.committed && room.seed != first_seed, "a new seed, not committed yet");
    let late = user("n4");
    assert!(matches!(h.gate.enter_draw(voucher, &late, None).await, Ok(Entered::NotOpen { .. })));
    // An ingress logs the new commitment; entries go on from seq 5.
    h.gate.seed_committed(voucher, &room.seed).await.expect("marks");
    assert_eq!(
        h.gate.draw_entry(voucher, &early[2]).await.expect("reads").expect("a draw").state,
        Some(EntryState::Entered { seq: 3 })
    );
    assert_eq!(h.gate.enter_draw(voucher, &early[1], None).await.expect("answers"), Entered::Held);
    assert_eq!(h.gate.enter_draw(voucher, &late, None).await.expect("answers"), Entered::New { seq: 5 });

    // The draw ranks all five by the rule, over the list's hash chained on.
    make_the_draw(h, voucher).await;
    advance_until_quiet(h, voucher).await;
    let everyone: Vec<UserId> = early.iter().cloned().chain([late]).collect();
    let records: Vec<Event> = envelopes(h, voucher).await.into_iter().map(|envelope| envelope.event).collect();
    let reveal = records
        .iter()
        .find_map(|event| match event {
            Event::DrawSeedRevealed(reveal) => Some(reveal.clone()),
            _ => None,
        })
        .expect("revealed");
    assert_eq!((reveal.seed.as_str(), reveal.entries), (room.seed.as_str(), 5));
    assert_eq!(reveal.entries_hash, draw::entries_hash(&everyone));
    let logged: Vec<UserId> = records
        .iter()
        .filter_map(|event| match event {
            Event::DrawRanked(ranked) => Some(ranked.users.clone()),
            _ => None,
        })
        .flatten()
        .collect();
    let ranking = draw::ranking(&room.seed, &everyone);
    assert_eq!(logged, ranking);
    assert!(matches!(order(h, voucher, &ranking[0]).await, Admission::Admitted { .. }));
    assert_eq!(order(h, voucher, &ranking[2]).await, Admission::Rejected(Rejection::NotWon));
}

async fn a_draw_lost_while_logging_its_ranking_is_ranked_again(h: &Harness) {
    let definition = draw_definition(2, 1);
    let voucher = definition.voucher_id;
    let seed = open(h, &definition).await;
    let entrants: Vec<UserId> = (0..6).map(|i| user(&format!("k{i}"))).collect();
    enter_all(h, voucher, &entrants).await;
    make_the_draw(h, voucher).await;
    advance_until_quiet(h, voucher).await;
    // The log got the reveal, not the ranking or the winners.
    let log: Vec<Envelope> = the_log(h, &definition, &seed)
        .await
        .into_iter()
        .filter(|envelope| !matches!(envelope.event, Event::DrawRanked(_) | Event::DrawWinnersSelected(_)))
        .collect();
    lose(h, voucher).await;
    let outcome = restored(h, &log).await;
    assert_eq!(outcome, DrawRestored::Rebuilt { stage: "ranking", entries: 6, wins: 0, wins_used: 0, new_seed: false });
    let summary = advance_until_quiet(h, voucher).await;
    assert_eq!((summary.selected, summary.cursor), (Some(2), 2));
    let ranking = draw::ranking(&seed, &entrants);
    let states = states(h, voucher, &ranking).await;
    assert!(matches!(states[1], Some(EntryState::Won { rank: 2, .. })), "{states:?}");
    assert_eq!(states[2], Some(EntryState::Ranked { rank: 3 }));
    assert!(matches!(order(h, voucher, &ranking[0]).await, Admission::Admitted { .. }));
}

/// A redelivered `VoucherCreated` opening the draw between two steps of a
/// rebuild (`lua/draw_restore.lua` called step by step, as the gate does):
/// the rebuild's last step finds the room and drops what it staged; the
/// draw opened meanwhile holds none of it, and nothing staged is left.
async fn a_draw_opened_during_a_rebuild_is_not_mixed_with_it(h: &Harness) {
    let definition = draw_definition(1, 1);
    let voucher = definition.voucher_id;
    assert!(h.gate.load_voucher(&definition).await.expect("loads"));
    let keys = h.gate.keys(voucher);
    // Redis lost the draw, not the voucher (restore.lua rebuilt it first).
    let _: () = redis::cmd("DEL").arg(&keys.room).query_async(&mut h.connection.clone()).await.expect("DEL");
    let staged = |key: &str| format!("{key}:restoring");
    let script = redis::Script::new(preluded!("staged_restore.lua" => "draw_restore.lua"));
    let step = |name: &str, args: Vec<String>| {
        let mut invocation = script.prepare_invoke();
        for key in [&keys.voucher, &keys.room, &keys.line, &keys.places, &keys.ranks, &keys.holds] {
            invocation.key(key);
        }
        for key in [&keys.line, &keys.places, &keys.ranks, &keys.holds] {
            invocation.key(staged(key));
        }
        invocation.arg(name).arg(7 * 24 * 3_600 * 1_000_u64).arg(args);
        let mut connection = h.connection.clone();
        async move { invocation.invoke_async::<String>(&mut connection).await.expect("answers") }
    };
    let places = ["restored-1", "1", "0", "1|e|1|"].map(str::to_owned).to_vec();
    assert_eq!(step("places", places).await, "written");
    // The redelivered definition opens a fresh draw.
    h.gate.open_room(&definition).await.expect("opens").expect("a draw");
    let room = ["kind", "draw", "entries", "1", "phase", "entering"].map(str::to_owned).to_vec();
    assert_eq!(step("room", room).await, "exists");
    let mut connection = h.connection.clone();
    let count = |command: &'static str, key: String| {
        let mut connection = h.connection.clone();
        async move { redis::cmd(command).arg(key).query_async::<u64>(&mut connection).await.expect(command) }
    };
    assert_eq!(count("HLEN", keys.places.clone()).await, 0, "no restored place in the fresh draw");
    assert_eq!(count("ZCARD", keys.line.clone()).await, 0, "no restored entry in its line");
    for key in [&keys.line, &keys.places, &keys.ranks, &keys.holds] {
        let left: u64 = redis::cmd("EXISTS").arg(staged(key)).query_async(&mut connection).await.expect("EXISTS");
        assert_eq!(left, 0, "nothing staged is left: {key}");
    }
    let entered = h.gate.enter_draw(voucher, &user("restored-1"), None).await.expect("answers");
    assert!(!matches!(entered, Entered::Held), "the fresh draw does not hold the half-restored entry: {entered:?}");
}

/// A record lost before it was logged leaves a gap in the entries' seqs:
/// the rebuild keeps every entrant the log names (each was answered `201`)
/// and reports the gap, and entries taken afterwards are logged after the
/// last seq the log holds, never one of its seqs.
async fn a_gap_in_the_logged_entries_keeps_every_logged_entry(h: &Harness) {
    let definition = draw_definition(2, 1);
    let voucher = definition.voucher_id;
    let seed = open(h, &definition).await;
    let early: Vec<UserId> = (0..5).map(|i| user(&format!("g{i}"))).collect();
    enter_all(h, voucher, &early).await;
    let mut log = the_log(h, &definition, &seed).await;
    log.retain(|envelope| !matches!(&envelope.event, Event::DrawEntered(entered) if entered.seq == 3));
    lose(h, voucher).await;
    let outcome = restored(h, &log).await;
    assert_eq!(outcome, DrawRestored::RebuiltWithGaps { stage: "entering", entries: 4, missing: 1 });
    let room = h.gate.room(voucher).await.expect("reads").expect("the draw is back");
    h.gate.seed_committed(voucher, &room.seed).await.expect("marks");
    for (i, entrant) in early.iter().enumerate() {
        let state = h.gate.draw_entry(voucher, entrant).await.expect("reads").expect("a draw").state;
        if i == 2 {
            assert_eq!(state, None, "the entry the log lost");
        } else {
            assert!(matches!(state, Some(EntryState::Entered { .. })), "{entrant} keeps their entry: {state:?}");
        }
    }
    let late = user("g5");
    assert!(matches!(h.gate.enter_draw(voucher, &late, None).await, Ok(Entered::New { .. })));
    let logged_seq = envelopes(h, voucher).await.into_iter().find_map(|envelope| match envelope.event {
        Event::DrawEntered(entered) if entered.user_id == late => Some(entered.seq),
        _ => None,
    });
    assert_eq!(logged_seq, Some(6), "after the last seq logged (5), not a seq the log holds");
}

async fn a_restored_window_ends_where_the_logged_stalls_moved_it(h: &Harness) {
    let definition = draw_definition(1, 1);
    let voucher = definition.voucher_id;
    let seed = open(h, &definition).await;
    let entrants: Vec<UserId> = (0..3).map(|i| user(&format!("x{i}"))).collect();
    enter_all(h, voucher, &entrants).await;
    let ranked = draw::ranking(&seed, &entrants);
    set_room(h, voucher, "purchase_ms", 2_000).await;
    make_the_draw(h, voucher).await;
    assert_eq!(advance_until_quiet(h, voucher).await.cursor, 1);
    // A pause longer than the window: logged as a stall when it ends.
    let pause = |paused| VoucherUpdated { voucher_id: voucher, paused: Some(paused), ends_at: None, add_stock: 0 };
    h.gate.update_voucher(uuid::Uuid::now_v7(), &pause(true)).await.expect("pauses");
    advance_until_quiet(h, voucher).await;
    tokio::time::sleep(std::time::Duration::from_millis(2_500)).await;
    h.gate.update_voucher(uuid::Uuid::now_v7(), &pause(false)).await.expect("resumes");
    assert_eq!(advance_until_quiet(h, voucher).await.cursor, 1, "the winner's window kept its unit");
    let log = the_log(h, &definition, &seed).await;
    assert!(log.iter().any(|envelope| matches!(envelope.event, Event::WindowsExtended(_))), "the stall is logged");

    // Past its record's purchase_until, inside its extended end.
    lose(h, voucher).await;
    assert!(matches!(restored(h, &log).await, DrawRestored::Rebuilt { stage: "drawn", wins: 1, .. }));
    let entry = h.gate.draw_entry(voucher, &ranked[0]).await.expect("reads").expect("a draw");
    assert!(!entry.lapsed(), "the window runs on after the rebuild: {entry:?}");
    assert_eq!(advance_until_quiet(h, voucher).await.cursor, 1, "nobody promoted over the open win");
    assert_eq!(order(h, voucher, &ranked[0]).await, Admission::Admitted { remaining: 0 });
}
