//! The draw's scripts against the rule in `seckill_core::draw`: entries
//! once per user, the list hash, the ranking logged in chunks, only
//! winners admitted (once, within their window), lapsed wins and returned
//! units promoting the next ranks; and the bot cost kept by the admission
//! scripts: proofs of work spent once, the per-user and per-address
//! admission buckets.
//!
//! A draw is "made" here by moving its `draw_ms` in Redis to the Redis
//! clock's now, and a short window by setting its `purchase_ms`: the scripts
//! judge both by those fields and that clock, so the tests need not wait.

use chrono::{Duration, Utc};
use futures::future::join_all;
use seckill_core::draw::{self, DrawSettings, RANK_CHUNK};
use seckill_core::event::{Event, OrderAccepted, VoucherCreated};
use seckill_core::{queue, UserId, VoucherId};
use seckill_gate::{Admission, Entered, EntryState, Pace, Presented, Proof, Rejection, RoomState, RoomSummary};

use crate::room::records;
use crate::{definition, on_single_and_cluster, user, Harness};

on_single_and_cluster!(
    single_only: [],
    both: [
        a_draw_ranks_by_the_rule_and_admits_only_its_winners,
        lapsed_wins_and_returned_units_promote_the_next_ranks,
        a_win_stands_for_the_per_user_limit,
        a_proof_of_work_is_required_and_spent_once,
        the_admission_buckets_are_shared_and_atomic,
        the_challenge_rate_is_counted_for_every_ingress,
    ],
);

pub(crate) fn draw_definition(stock: u64, limit: u32) -> VoucherCreated {
    let now = Utc::now();
    let mut definition = definition(stock, limit, (now - Duration::minutes(1), now + Duration::hours(2)));
    definition.draw = Some(DrawSettings {
        entries_open_at: now - Duration::minutes(1),
        draw_at: now + Duration::hours(1),
        purchase_seconds: 600,
        beacon: None,
    });
    definition
}

/// Loads `definition` and commits its draw's seed; returns the seed.
pub(crate) async fn open(h: &Harness, definition: &VoucherCreated) -> String {
    assert!(h.gate.load_voucher(definition).await.expect("loads"));
    let room = h.gate.open_room(definition).await.expect("opens").expect("a draw");
    assert!(room.draw && !room.committed);
    let early = h.gate.enter_draw(definition.voucher_id, &user("early"), None).await.expect("answers");
    assert!(matches!(early, Entered::NotOpen { .. }), "no entry before the commitment is in the log: {early:?}");
    h.gate.seed_committed(definition.voucher_id, &room.seed).await.expect("marks");
    room.seed
}

pub(crate) async fn set_room(h: &Harness, voucher: VoucherId, field: &str, value: i64) {
    let _: () = redis::cmd("HSET")
        .arg(h.gate.keys(voucher).room)
        .arg(field)
        .arg(value)
        .query_async(&mut h.connection.clone())
        .await
        .expect("HSET");
}

/// Entries close now, by the Redis clock.
pub(crate) async fn make_the_draw(h: &Harness, voucher: VoucherId) {
    let now = h.gate_now().await.timestamp_millis();
    set_room(h, voucher, "draw_ms", now - 1).await;
}

/// Moves the draw on until a call does nothing more.
pub(crate) async fn advance_until_quiet(h: &Harness, voucher: VoucherId) -> RoomSummary {
    loop {
        let summary = h.gate.advance_draw(voucher).await.expect("advances");
        if summary.served_now == 0 {
            return summary;
        }
    }
}

pub(crate) async fn enter_all(h: &Harness, voucher: VoucherId, users: &[UserId]) {
    for (seq, entrant) in users.iter().enumerate() {
        let entered = h.gate.enter_draw(voucher, entrant, None).await.expect("enters");
        assert_eq!(entered, Entered::New { seq: seq as u64 + 1 });
    }
}

pub(crate) async fn order(h: &Harness, voucher: VoucherId, buyer: &UserId) -> Admission {
    h.gate.admit_order(&OrderAccepted::now(voucher, buyer.clone(), 1), None).await.expect("answers")
}

async fn a_draw_ranks_by_the_rule_and_admits_only_its_winners(h: &Harness) {
    let definition = draw_definition(5, 1);
    let voucher = definition.voucher_id;
    let seed = open(h, &definition).await;
    let entrants: Vec<UserId> = (0..RANK_CHUNK + 200).map(|i| user(&format!("entrant-{i}"))).collect();
    enter_all(h, voucher, &entrants).await;
    assert_eq!(h.gate.enter_draw(voucher, &entrants[3], None).await.expect("answers"), Entered::Held);
    assert_eq!(order(h, voucher, &entrants[0]).await, Admission::Rejected(Rejection::NotWon), "before the draw");

    make_the_draw(h, voucher).await;
    let summary = advance_until_quiet(h, voucher).await;
    assert_eq!((summary.state, summary.cursor, summary.selected), (RoomState::Open, 5, Some(5)));
    let late = h.gate.enter_draw(voucher, &user("late"), None).await.expect("answers");
    assert!(matches!(late, Entered::Closed { .. }), "{late:?}");

    let events = records(h, voucher).await;
    let revealed = events
        .iter()
        .find_map(|event| match event {
            Event::DrawSeedRevealed(revealed) => Some(revealed.clone()),
            _ => None,
        })
        .expect("the seed is revealed");
    assert_eq!((revealed.seed.as_str(), revealed.entries), (seed.as_str(), entrants.len() as u64));
    assert_eq!(revealed.entries_hash, draw::entries_hash(&entrants), "the list hash chained entry by entry");
    let ranked: Vec<UserId> = events
        .iter()
        .filter_map(|event| match event {
            Event::DrawRanked(chunk) => Some(chunk.users.clone()),
            _ => None,
        })
        .flatten()
        .collect();
    assert_eq!(ranked, draw::ranking(&seed, &entrants), "the logged ranking is the rule's");
    assert!(events.iter().any(|event| matches!(event, Event::DrawWinnersSelected(s) if s.winners == 5)));

    for (rank, winner) in ranked.iter().take(5).enumerate() {
        let entry = h.gate.draw_entry(voucher, winner).await.expect("reads").expect("a draw");
        assert!(matches!(entry.state, Some(EntryState::Won { rank: r, .. }) if r == rank as u64 + 1), "{entry:?}");
    }
    let loser = &ranked[5];
    assert!(matches!(
        h.gate.draw_entry(voucher, loser).await.expect("reads").expect("a draw").state,
        Some(EntryState::Ranked { rank: 6 })
    ));
    assert_eq!(order(h, voucher, loser).await, Admission::Rejected(Rejection::NotWon));
    assert_eq!(order(h, voucher, &user("stranger")).await, Admission::Rejected(Rejection::NotWon));

    // Concurrent orders of one winner (as from two ingresses): one admitted.
    let winner = &ranked[0];
    let orders: Vec<OrderAccepted> = (0..4).map(|_| OrderAccepted::now(voucher, winner.clone(), 1)).collect();
    let answers = join_all(orders.iter().map(|order| h.gate.admit_order(order, None))).await;
    let admitted: Vec<&OrderAccepted> = orders
        .iter()
        .zip(&answers)
        .filter(|(_, answer)| matches!(answer, Ok(Admission::Admitted { .. })))
        .map(|(order, _)| order)
        .collect();
    assert_eq!(admitted.len(), 1, "{answers:?}");
    for answer in &answers {
        let answer = answer.as_ref().expect("answers");
        assert!(
            matches!(answer, Admission::Admitted { .. })
                || *answer == Admission::Rejected(Rejection::WinUsed { order: Some(admitted[0].order_id) }),
            "{answer:?}"
        );
    }
    let used = records(h, voucher).await.into_iter().find_map(|event| match event {
        Event::DrawWinUsed(used) => Some(used),
        _ => None,
    });
    let used = used.expect("the win's use is logged with the order");
    assert_eq!((used.rank, &used.user_id, used.order_id), (1, winner, admitted[0].order_id));
}

async fn lapsed_wins_and_returned_units_promote_the_next_ranks(h: &Harness) {
    let definition = draw_definition(2, 1);
    let voucher = definition.voucher_id;
    let seed = open(h, &definition).await;
    let entrants: Vec<UserId> = (0..10).map(|i| user(&format!("e{i}"))).collect();
    enter_all(h, voucher, &entrants).await;
    let ranked = draw::ranking(&seed, &entrants);
    make_the_draw(h, voucher).await;
    advance_until_quiet(h, voucher).await;
    // Promoted wins from here on last 300 ms.
    set_room(h, voucher, "purchase_ms", 300).await;

    let first = OrderAccepted::now(voucher, ranked[0].clone(), 1);
    assert!(matches!(h.gate.admit_order(&first, None).await, Ok(Admission::Admitted { .. })));
    // Rank 2 keeps its window (600 s): nothing is promoted yet.
    assert_eq!(advance_until_quiet(h, voucher).await.cursor, 2);
    // Rank 1's order is cancelled: its unit comes back, rank 3 wins.
    assert!(h.gate.release(voucher, &ranked[0], 1, first.order_id, None).await.expect("releases"));
    assert_eq!(advance_until_quiet(h, voucher).await.cursor, 3);
    // Rank 3 lets its window lapse: rank 4 wins.
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    assert_eq!(order(h, voucher, &ranked[2]).await, Admission::Rejected(Rejection::WindowClosed));
    assert_eq!(advance_until_quiet(h, voucher).await.cursor, 4);
    assert!(matches!(order(h, voucher, &ranked[3]).await, Admission::Admitted { .. }));
    assert!(matches!(order(h, voucher, &ranked[1]).await, Admission::Admitted { remaining: 0 }));
    let summary = advance_until_quiet(h, voucher).await;
    assert_eq!((summary.state, summary.cursor), (RoomState::SoldOut, 4), "sold: nobody else wins");
    assert_eq!(order(h, voucher, &ranked[4]).await, Admission::Rejected(Rejection::NotWon));

    let promoted: Vec<u64> = records(h, voucher)
        .await
        .iter()
        .filter_map(|event| match event {
            Event::DrawWinnerPromoted(p) => Some(p.rank),
            _ => None,
        })
        .collect();
    assert_eq!(promoted, [3, 4], "the next ranks, in order");
}

/// With two units a user, each open win holds two units: stock 5 makes
/// three winners (the third may find one unit), and a rank is promoted
/// only once the open wins hold fewer units than are left.
async fn a_win_stands_for_the_per_user_limit(h: &Harness) {
    let definition = draw_definition(5, 2);
    let voucher = definition.voucher_id;
    let seed = open(h, &definition).await;
    let entrants: Vec<UserId> = (0..8).map(|i| user(&format!("e{i}"))).collect();
    enter_all(h, voucher, &entrants).await;
    let ranked = draw::ranking(&seed, &entrants);
    make_the_draw(h, voucher).await;
    let summary = advance_until_quiet(h, voucher).await;
    assert_eq!((summary.selected, summary.cursor), (Some(3), 3), "⌈5 / 2⌉ winners");

    let buy = |rank: usize, quantity: u32| {
        let order = OrderAccepted::now(voucher, ranked[rank - 1].clone(), quantity);
        async move { h.gate.admit_order(&order, None).await.expect("answers") }
    };
    assert_eq!(buy(1, 2).await, Admission::Admitted { remaining: 3 });
    // Ranks 2 and 3 hold 4 units of the 3 left: nobody is promoted.
    assert_eq!(advance_until_quiet(h, voucher).await.cursor, 3);
    assert_eq!(buy(2, 1).await, Admission::Admitted { remaining: 2 });
    // Rank 3 holds 2 of the 2 left.
    assert_eq!(advance_until_quiet(h, voucher).await.cursor, 3);
    assert_eq!(buy(3, 1).await, Admission::Admitted { remaining: 1 });
    // No win open and a unit left: rank 4 wins it, and finds one unit.
    assert_eq!(advance_until_quiet(h, voucher).await.cursor, 4);
    assert_eq!(buy(4, 2).await, Admission::Rejected(Rejection::SoldOut { remaining: 1 }));
    assert_eq!(buy(4, 1).await, Admission::Admitted { remaining: 0 });
    let summary = advance_until_quiet(h, voucher).await;
    assert_eq!((summary.state, summary.cursor), (RoomState::SoldOut, 4));
    assert_eq!(buy(5, 1).await, Admission::Rejected(Rejection::NotWon));
}

fn proof(nonce: &str, bits: u32, expires_ms: i64) -> Presented {
    Presented { proof: Some(Proof { nonce: nonce.to_owned(), bits, expires_ms }), ..Presented::default() }
}

async fn a_proof_of_work_is_required_and_spent_once(h: &Harness) {
    let mut first_come = definition(10, 5, crate::open_window());
    first_come.challenge_bits = 8;
    let voucher = first_come.voucher_id;
    assert!(h.gate.load_voucher(&first_come).await.expect("loads"));
    let later = (h.gate_now().await + Duration::minutes(1)).timestamp_millis();
    let admit = |buyer: &str, presented: Presented| {
        let order = OrderAccepted::now(voucher, user(buyer), 1);
        let gate = h.gate.clone();
        async move { gate.admit_presenting(&order, None, &presented).await.expect("answers") }
    };
    assert_eq!(admit("a", Presented::default()).await, Admission::Rejected(Rejection::ChallengeRequired { bits: 8 }));
    assert_eq!(
        admit("a", proof(&"1".repeat(32), 7, later)).await,
        Admission::Rejected(Rejection::ChallengeTooEasy { bits: 8 })
    );
    let past = (h.gate_now().await - Duration::seconds(1)).timestamp_millis();
    assert_eq!(admit("a", proof(&"2".repeat(32), 8, past)).await, Admission::Rejected(Rejection::ChallengeExpired));
    assert!(matches!(admit("a", proof(&"3".repeat(32), 9, later)).await, Admission::Admitted { .. }));
    assert_eq!(admit("b", proof(&"3".repeat(32), 9, later)).await, Admission::Rejected(Rejection::ChallengeUsed));
    // Concurrent spends of one solution: one admitted.
    let answers = join_all((0..5).map(|i| admit(["c", "d", "e", "f", "g"][i], proof(&"4".repeat(32), 8, later)))).await;
    assert_eq!(answers.iter().filter(|answer| matches!(answer, Admission::Admitted { .. })).count(), 1, "{answers:?}");

    // A split voucher whose user's bucket is dry borrows and calls again in
    // the same request: the proof paid once is not "used" by its own retry.
    let mut split = crate::split(definition(1, 1, crate::open_window()), 2);
    split.challenge_bits = 8;
    assert!(h.gate.load_voucher(&split).await.expect("loads"));
    let mut answers = Vec::new();
    for (i, buyer) in ["s1", "s2", "s3", "s4"].iter().enumerate() {
        let order = OrderAccepted::now(split.voucher_id, user(buyer), 1);
        let paid = proof(&format!("{:032x}", 0xabc0 + i), 8, later);
        answers.push(h.gate.admit_presenting(&order, None, &paid).await.expect("answers"));
    }
    let admitted = answers.iter().filter(|answer| matches!(answer, Admission::Admitted { .. })).count();
    let sold_out =
        answers.iter().filter(|answer| matches!(answer, Admission::Rejected(Rejection::SoldOut { .. }))).count();
    assert_eq!((admitted, sold_out), (1, 3), "{answers:?}");

    // The draw's entries ask for it too, a repeat entry does not.
    let mut drawn = draw_definition(1, 1);
    drawn.challenge_bits = 8;
    open(h, &drawn).await;
    let pay = Proof { nonce: "5".repeat(32), bits: 8, expires_ms: later };
    let entered = h.gate.enter_draw(drawn.voucher_id, &user("a"), None).await.expect("answers");
    assert_eq!(entered, Entered::Challenge(Rejection::ChallengeRequired { bits: 8 }));
    assert_eq!(
        h.gate.enter_draw(drawn.voucher_id, &user("a"), Some(&pay)).await.expect("enters"),
        Entered::New { seq: 1 }
    );
    assert_eq!(h.gate.enter_draw(drawn.voucher_id, &user("a"), None).await.expect("answers"), Entered::Held);
    assert_eq!(
        h.gate.enter_draw(drawn.voucher_id, &user("b"), Some(&pay)).await.expect("answers"),
        Entered::Challenge(Rejection::ChallengeUsed)
    );
    assert!(queue::is_seed(&queue::new_seed()));
}

async fn the_admission_buckets_are_shared_and_atomic(h: &Harness) {
    let first_come = definition(100, 50, crate::open_window());
    let voucher = first_come.voucher_id;
    assert!(h.gate.load_voucher(&first_come).await.expect("loads"));
    let pace = |address: &str| Pace {
        user_per_second: 1,
        user_burst: 3,
        address: Some(address.to_owned()),
        address_per_second: 1,
        address_burst: 5,
    };
    // Ten at once from one user (as through several ingresses): the burst.
    let orders: Vec<OrderAccepted> = (0..10).map(|_| OrderAccepted::now(voucher, user("hasty"), 1)).collect();
    let presented = Presented { pace: pace("192.0.2.1"), ..Presented::default() };
    let answers = join_all(orders.iter().map(|order| h.gate.admit_presenting(order, None, &presented))).await;
    let admitted = answers.iter().filter(|answer| matches!(answer, Ok(Admission::Admitted { .. }))).count();
    let limited = answers
        .iter()
        .filter(|answer| matches!(answer, Ok(Admission::Rejected(Rejection::RateLimited { retry_after_ms, by_address: false })) if *retry_after_ms > 0))
        .count();
    assert_eq!((admitted, limited), (3, 7), "{answers:?}");
    // Other users behind the same address share its bucket: 2 more fit.
    let presented = Presented { pace: pace("192.0.2.1"), ..Presented::default() };
    let mut neighbours = Vec::new();
    for name in ["n1", "n2", "n3"] {
        let order = OrderAccepted::now(voucher, user(name), 1);
        neighbours.push(h.gate.admit_presenting(&order, None, &presented).await.expect("answers"));
    }
    assert!(matches!(neighbours[..2], [Admission::Admitted { .. }, Admission::Admitted { .. }]), "{neighbours:?}");
    assert!(
        matches!(neighbours[2], Admission::Rejected(Rejection::RateLimited { by_address: true, .. })),
        "{neighbours:?}"
    );
    // A refused request took nothing: the stock and the user's count agree.
    let sale = h.gate.sales(&[voucher]).await.expect("reads").remove(0).expect("a sale");
    assert_eq!(sale.available, 100 - 5);
}

/// Two callers' counts add up in one per-second count (this second, or
/// the last one if the second turned between the calls), per voucher.
async fn the_challenge_rate_is_counted_for_every_ingress(h: &Harness) {
    let voucher = VoucherId::generate();
    let other = VoucherId::generate();
    let first = h.gate.count_challenges(voucher, 3).await.expect("counts");
    assert_eq!(first.this_second, 3);
    let second = h.gate.count_challenges(voucher, 4).await.expect("counts");
    assert!(
        second.this_second == 7 || (second.last_second, second.this_second) == (3, 4),
        "both callers' challenges counted: {second:?}"
    );
    let read = h.gate.count_challenges(voucher, 0).await.expect("reads");
    assert!(read.this_second + read.last_second >= 4, "{read:?}");
    assert_eq!(h.gate.count_challenges(other, 0).await.expect("reads").this_second, 0, "per voucher");
}
