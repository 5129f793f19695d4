//! The verification of a clean scripted draw, and each doctored log
//! failing exactly the checks it should, saying what differs.

use std::io::Cursor;

use seckill_core::event::Event;
use seckill_core::ids::UserId;
use seckill_core::{queue, Envelope};

use super::*;
use crate::sale::draw_script::{draw_sale, entrant, DrawSale, DRAW_MS, ENTRIES, PROMOTED, STOCK, UNUSED};
use crate::sale::script::{at, busy_sale, Script};

const CHECKS: [&str; 12] = [
    "entries",
    "commitment",
    "beacon",
    "entries_hash",
    "entry_count",
    "ranking",
    "winners",
    "orders",
    "timing",
    "window_lengths",
    "wins_in_window",
    "promotions_needed",
];

fn verified(log: &VoucherLog) -> DrawVerification {
    verify(log).expect("a draw")
}

fn failing(verification: &DrawVerification) -> Vec<&'static str> {
    verification.failed().map(|check| check.check).collect()
}

fn detail<'a>(verification: &'a DrawVerification, check: &str) -> &'a str {
    let found = verification.checks.iter().find(|c| c.check == check);
    found.map(|c| c.detail.as_str()).unwrap_or_else(|| panic!("{check}"))
}

/// Where the first record matching `wanted` is.
fn index_of(records: &[(Envelope, bool)], wanted: impl Fn(&Event) -> bool) -> usize {
    records.iter().position(|(envelope, _)| wanted(&envelope.event)).expect("a matching record")
}

#[test]
fn a_clean_draw_passes_every_check() {
    let DrawSale { script, seed, ranking } = draw_sale();
    let verification = verified(&script.log);
    assert!(verification.pass, "{}", verification.text());
    let names: Vec<&str> = verification.checks.iter().map(|check| check.check).collect();
    assert_eq!(names, CHECKS);
    assert_eq!(verification.stage, Stage::Drawn);
    assert_eq!(
        (verification.entries, verification.winners, verification.promoted, verification.wins_used),
        (ENTRIES, Some(STOCK), PROMOTED, 19)
    );
    assert_eq!(
        detail(&verification, "entries"),
        "2000 entries, seq 1..2000: 0 missing, 0 logged for two users, 0 users entered twice"
    );
    let committed = queue::seed_commitment(&seed);
    assert_eq!(
        detail(&verification, "commitment"),
        format!(
            "1 commitment (1 distinct); all 2000 entries after it; SHA-256(revealed seed) = the committed {}…",
            &committed[..12]
        )
    );
    let hash = seckill_core::draw::entries_hash(&(1..=ENTRIES).map(entrant).collect::<Vec<_>>());
    assert_eq!(
        detail(&verification, "entries_hash"),
        format!("SHA-1 chain over the 2000 logged entries of the list = {}… = revealed {}…", &hash[..12], &hash[..12])
    );
    assert_eq!(detail(&verification, "entry_count"), "2000 in the log = 2000 revealed; 0 with a seq past the count");
    assert_eq!(
        detail(&verification, "ranking"),
        "4 chunks (ranks 1..2000) = the ranking recomputed from the revealed seed and the 2000 entries"
    );
    assert_eq!(
        detail(&verification, "winners"),
        "20 winners at the draw within stock 20 and 2000 entries; 3 promoted (ranks 21..23 expected): 0 out of rank \
         order, 0 to another user than the ranking's, 0 before the selection"
    );
    assert_eq!(
        detail(&verification, "orders"),
        "19 orders accepted: 0 without a win spent on it, 0 spending another user's; 19 wins used: 0 not a win, 0 not \
         the spender's rank, 0 used twice, 0 for an order not in the log"
    );
    assert!(detail(&verification, "timing")
        .ends_with("0 entries after the reveal; 0 chunks before the reveal, 0 chunks after the winners"));
    assert_eq!(ranking.len() as u64, ENTRIES);

    let text = verification.text();
    assert!(text.starts_with(&format!("draw of voucher {}  PASS\n", script.voucher)), "{text}");
    assert!(text.contains("\ndrawn: 2000 entries, 20 winners at the draw, 3 promoted, 19 wins used\n"), "{text}");
    assert!(text.contains("\nverify time: ") && text.ends_with("\nPASS\n"), "{text}");
    let json = serde_json::to_value(&verification).expect("json");
    assert_eq!(
        (json["pass"].as_bool(), json["stage"].as_str(), json["entries"].as_u64()),
        (Some(true), Some("drawn"), Some(2000))
    );
    let ranking = json["checks"].as_array().and_then(|checks| checks.iter().find(|c| c["check"] == "ranking"));
    assert_eq!(ranking.and_then(|ranking| ranking["figures"]["ranks_logged"].as_u64()), Some(2000));
    assert!(json["verify_ms"].as_f64().is_some() && json.get("source").is_none());
}

#[test]
fn redelivered_records_change_nothing() {
    let mut script = draw_sale().script;
    let before = verified(&script.log);
    // Every record read again at a later offset, as a redelivery does.
    for (envelope, orders_topic) in script.records.clone() {
        script.put(&envelope, orders_topic);
    }
    let after = verified(&script.log);
    assert!(after.pass, "{}", after.text());
    assert_eq!(after.checks, before.checks);
}

#[test]
fn a_redelivery_that_says_something_else_fails() {
    // A copy of the seq-42 entry naming another user, as if doctored.
    let mut script = draw_sale().script;
    let mut copy = script.records
        [index_of(&script.records, |event| matches!(event, Event::DrawEntered(e) if e.seq == 42))]
    .0
    .clone();
    if let Event::DrawEntered(entry) = &mut copy.event {
        entry.user_id = UserId::parse("mallory").expect("valid");
    }
    script.put(&copy, false);
    let verification = verified(&script.log);
    assert_eq!(failing(&verification), ["entries"], "{}", verification.text());
    assert!(detail(&verification, "entries")
        .ends_with("1 logged for two users, 0 users entered twice (e.g. seq 42 logged for e0042 and mallory)"));

    // A copy of the selection, same event id, more winners.
    let mut script = draw_sale().script;
    let mut copy =
        script.records[index_of(&script.records, |event| matches!(event, Event::DrawWinnersSelected(_)))].0.clone();
    if let Event::DrawWinnersSelected(selection) = &mut copy.event {
        selection.winners = STOCK + 5;
    }
    script.put(&copy, false);
    let verification = verified(&script.log);
    assert_eq!(failing(&verification), ["winners"], "{}", verification.text());
    assert!(detail(&verification, "winners").contains("; 1 record with copies that differ"));
}

#[test]
fn one_entry_changed_breaks_the_hash_and_the_ranking_naming_it() {
    let script = draw_sale().script;
    let mallory = UserId::parse("mallory").expect("valid");
    let log = script.edited(|event| {
        if let Event::DrawEntered(entry) = event {
            if entry.seq == 42 {
                entry.user_id = mallory.clone();
            }
        }
    });
    let verification = verified(&log);
    assert!(!verification.pass);
    assert_eq!(failing(&verification), ["entries_hash", "ranking"], "{}", verification.text());
    assert!(detail(&verification, "entries_hash").contains("… ≠ revealed"), "{}", verification.text());
    let ranking = detail(&verification, "ranking");
    assert!(ranking.contains("ranks differ, the first at rank 1: the log has"), "{ranking}");
    assert!(ranking.contains("1 user ranked but not among the entries (e.g. e0042)"), "{ranking}");
    assert!(ranking.ends_with("1 entry entered but not ranked (e.g. mallory, seq 42)"), "{ranking}");
}

#[test]
fn a_dropped_chunk_breaks_the_ranking() {
    let script = draw_sale().script;
    let mut records = script.records.clone();
    records.remove(index_of(&records, |event| matches!(event, Event::DrawRanked(r) if r.chunk == 1)));
    let verification = verified(&script.refolded(&records));
    assert_eq!(failing(&verification), ["ranking"], "{}", verification.text());
    let ranking = detail(&verification, "ranking");
    assert!(ranking.starts_with("3 of 4 chunks logged, 1500 of 2000 ranks; 1 chunk missing"), "{ranking}");
    assert!(ranking.contains("1 chunk missing (e.g. chunk 1: ranks 501..1000 not logged)"), "{ranking}");
}

#[test]
fn two_users_swapped_in_a_chunk_break_the_ranking_at_the_first_of_them() {
    let DrawSale { script, ranking, .. } = draw_sale();
    let log = script.edited(|event| {
        if let Event::DrawRanked(chunk) = event {
            if chunk.chunk == 0 {
                chunk.users.swap(99, 399);
            }
        }
    });
    let verification = verified(&log);
    assert_eq!(failing(&verification), ["ranking"], "{}", verification.text());
    assert!(
        detail(&verification, "ranking").ends_with(&format!(
            "2 ranks differ, the first at rank 100: the log has {}, the recomputation {}",
            ranking[399], ranking[99]
        )),
        "{}",
        verification.text()
    );
}

#[test]
fn a_seed_that_does_not_match_its_commitment_fails() {
    let script = draw_sale().script;
    let other = queue::seed_commitment(&queue::new_seed());
    let log = script.edited(|event| {
        if let Event::DrawSeedCommitted(commitment) = event {
            commitment.seed_hash = other.clone();
        }
    });
    let verification = verified(&log);
    assert_eq!(failing(&verification), ["commitment"], "{}", verification.text());
    assert!(detail(&verification, "commitment").ends_with("≠ any committed hash"), "{}", verification.text());

    // Another seed revealed: the logged ranking is not its ranking either.
    let log = script.edited(|event| {
        if let Event::DrawSeedRevealed(reveal) = event {
            reveal.seed = queue::new_seed();
        }
    });
    let verification = verified(&log);
    assert_eq!(failing(&verification), ["commitment", "ranking"], "{}", verification.text());
}

#[test]
fn a_commitment_after_the_first_entries_fails() {
    let script = draw_sale().script;
    let mut records = script.records.clone();
    let committed = index_of(&records, |event| matches!(event, Event::DrawSeedCommitted(_)));
    let record = records.remove(committed);
    records.insert(committed + 2, record);
    let verification = verified(&script.refolded(&records));
    assert_eq!(failing(&verification), ["commitment"], "{}", verification.text());
    assert!(detail(&verification, "commitment").contains("; 2 of 2000 entries not after it;"));
}

#[test]
fn an_order_without_a_win_or_with_someone_elses_fails() {
    let mut sale = draw_sale().script;
    let order = sale.accept("gatecrasher", 1, 10_000);
    sale.decide(&order, 10_010);
    let verification = verified(&sale.log);
    assert_eq!(failing(&verification), ["orders"], "{}", verification.text());
    let orders = detail(&verification, "orders");
    assert!(orders.starts_with("20 orders accepted: 1 without a win spent on it"), "{orders}");
    assert!(orders.ends_with(&format!("(e.g. order {} of gatecrasher spent no win)", order.order_id)), "{orders}");

    // A loser spends the lapsed win of rank 5.
    let mut sale = draw_sale();
    let loser = sale.ranking[999].clone();
    sale.script.order_with_win(&loser, UNUSED[0], 10_000);
    let verification = verified(&sale.script.log);
    assert_eq!(failing(&verification), ["orders"], "{}", verification.text());
    let orders = detail(&verification, "orders");
    assert!(orders.contains("0 not a win, 1 not the spender's rank, 0 used twice"), "{orders}");
    let holder = &sale.ranking[UNUSED[0] as usize - 1];
    assert!(orders.ends_with(&format!("(e.g. {loser} spent rank 5, which is {holder}'s)")), "{orders}");

    // A rank that never won.
    let mut sale = draw_sale();
    let user = sale.ranking[1_499].clone();
    sale.script.order_with_win(&user, 1_500, 10_000);
    let verification = verified(&sale.script.log);
    assert_eq!(failing(&verification), ["orders"], "{}", verification.text());
    assert!(detail(&verification, "orders").contains("1 not a win, 0 not the spender's rank"));
}

#[test]
fn a_win_used_twice_fails() {
    let mut sale = draw_sale();
    let first = sale.ranking[0].clone();
    sale.script.order_with_win(&first, 1, 20_000);
    let verification = verified(&sale.script.log);
    assert_eq!(failing(&verification), ["orders"], "{}", verification.text());
    let orders = detail(&verification, "orders");
    assert!(orders.contains("; 19 wins used: 0 not a win, 0 not the spender's rank, 1 used twice,"), "{orders}");
    assert!(orders.ends_with("(e.g. rank 1 admitted 2 orders)"), "{orders}");
}

#[test]
fn records_interleaved_by_several_relays_still_pass() {
    let script = draw_sale().script;
    let mut records = script.records.clone();
    // Two relays publish one outbox in parallel: a record written later may
    // reach the topic first. Rank 21's use before its promotion, the last
    // ranking chunk after the winners, the last entry after the reveal, and
    // the promotions in reverse.
    let promoted = index_of(&records, |event| matches!(event, Event::DrawWinnerPromoted(p) if p.rank == 21));
    let used = index_of(&records, |event| matches!(event, Event::DrawWinUsed(u) if u.rank == 21));
    let record = records.remove(used);
    records.insert(promoted, record);
    let chunk = index_of(&records, |event| matches!(event, Event::DrawRanked(r) if r.chunk + 1 == r.chunks));
    let selected = index_of(&records, |event| matches!(event, Event::DrawWinnersSelected(_)));
    let record = records.remove(chunk);
    records.insert(selected, record);
    let last_entry = index_of(&records, |event| matches!(event, Event::DrawEntered(e) if e.seq == 2_000));
    let revealed = index_of(&records, |event| matches!(event, Event::DrawSeedRevealed(_)));
    let record = records.remove(last_entry);
    records.insert(revealed, record);
    let last = index_of(&records, |event| matches!(event, Event::DrawWinnerPromoted(p) if p.rank == 23));
    let first = index_of(&records, |event| matches!(event, Event::DrawWinnerPromoted(p) if p.rank == 21));
    let record = records.remove(last);
    records.insert(first, record);
    let verification = verified(&script.refolded(&records));
    assert!(verification.pass, "{}", verification.text());
}

#[test]
fn a_promotion_that_skips_a_rank_fails() {
    let DrawSale { script, ranking, .. } = draw_sale();
    let log = script.edited(|event| {
        if let Event::DrawWinnerPromoted(promotion) = event {
            if promotion.rank == 23 {
                promotion.rank = 24;
                promotion.user_id = ranking[23].clone();
            }
        }
    });
    let verification = verified(&log);
    assert!(failing(&verification).contains(&"winners"), "{}", verification.text());
    let winners = detail(&verification, "winners");
    assert!(
        winners.contains("3 promoted (ranks 21..23 expected): 1 out of rank order, 0 to another user"),
        "{winners}"
    );
    assert!(winners.ends_with("(e.g. rank 24 promoted where rank 23 was next)"), "{winners}");
}

#[test]
fn more_winners_than_units_or_a_reveal_before_draw_at_fail() {
    let script = draw_sale().script;
    let log = script.edited(|event| {
        if let Event::DrawWinnersSelected(selection) = event {
            selection.winners = STOCK + 1;
        }
    });
    let verification = verified(&log);
    // Rank 21 is now a winner at the draw, and its promotion out of order.
    assert_eq!(failing(&verification), ["winners"], "{}", verification.text());
    assert!(detail(&verification, "winners").starts_with("21 winners at the draw NOT within stock 20"));

    let mut records = script.records.clone();
    let reveal = index_of(&records, |event| matches!(event, Event::DrawSeedRevealed(_)));
    records[reveal].0.emitted_at = at(DRAW_MS - 1);
    let verification = verified(&script.refolded(&records));
    assert_eq!(failing(&verification), ["timing"], "{}", verification.text());
    assert!(detail(&verification, "timing")
        .starts_with("revealed at 2027-01-15T07:59:58.999Z < draw_at 2027-01-15T07:59:59.000Z"));
}

#[test]
fn a_reveal_in_draw_ats_own_millisecond_is_on_time() {
    // A definition's draw_at may carry microseconds; the scripts' clock
    // (and the draw_at they were given) has whole milliseconds.
    let log = draw_sale().script.edited(|event| {
        if let Event::VoucherCreated(created) = event {
            if let Some(draw) = created.draw.as_mut() {
                draw.draw_at += chrono::Duration::microseconds(464);
            }
        }
    });
    let verification = verified(&log);
    assert!(verification.pass, "{}", verification.text());
    assert!(detail(&verification, "timing").starts_with("revealed at 2027-01-15T07:59:59.000Z ≥ draw_at"));
}

#[test]
fn a_draw_taking_entries_passes_as_far_as_it_went() {
    let mut sale = Script::drawn(5, 1);
    let seed = queue::new_seed();
    sale.draw_commit(&seed, -60_000);
    sale.enter(&entrant(1), 1, -50_000);
    sale.enter(&entrant(2), 2, -40_000);
    let verification = verified(&sale.log);
    assert!(verification.pass, "{}", verification.text());
    assert_eq!((verification.stage, verification.winners), (Stage::Entering, None));
    assert_eq!(detail(&verification, "ranking"), "seed not revealed yet: nothing ranked");

    // A gap in the seqs is no draw in progress.
    sale.enter(&entrant(4), 4, -30_000);
    let verification = verified(&sale.log);
    assert_eq!(failing(&verification), ["entries"], "{}", verification.text());
    assert!(detail(&verification, "entries").ends_with("(e.g. seq 3 missing)"));
}

#[test]
fn a_draw_nobody_entered_passes_with_no_winners() {
    let mut sale = Script::drawn(5, 1);
    let verification = verified(&sale.log);
    assert!(verification.pass, "defined, not committed yet: {}", verification.text());
    let seed = queue::new_seed();
    sale.draw_commit(&seed, -60_000);
    sale.draw_reveal(&seed, &[], DRAW_MS);
    sale.select(0, DRAW_MS + 20);
    let verification = verified(&sale.log);
    assert!(verification.pass, "{}", verification.text());
    assert_eq!((verification.stage, verification.entries, verification.winners), (Stage::Drawn, 0, Some(0)));
    assert_eq!(detail(&verification, "ranking"), "no entries: nothing to rank, no chunk logged");
    assert!(detail(&verification, "entries_hash").ends_with("= \"\" (no entries) = revealed \"\" (no entries)"));

    // An entry before any commitment.
    let mut sale = Script::drawn(5, 1);
    sale.enter(&entrant(1), 1, -50_000);
    let verification = verified(&sale.log);
    assert_eq!(failing(&verification), ["commitment"], "{}", verification.text());
    assert!(detail(&verification, "commitment").starts_with("0 commitments (0 distinct); 1 of 1 entries not after it"));
}

#[test]
fn a_sale_without_a_draw_is_refused() {
    let sale = busy_sale();
    assert!(matches!(verify(&sale.log), Err(AnalyticsError::NotADraw(voucher)) if voucher == sale.voucher));
}

/// The script's records as `seckill replay` writes them.
fn json_lines(sale: &Script) -> String {
    let lines: Vec<String> =
        sale.records.iter().map(|(envelope, _)| String::from_utf8(envelope.encode()).expect("utf-8")).collect();
    lines.join("\n") + "\n"
}

#[test]
fn a_json_lines_copy_verifies_and_a_doctored_one_fails() {
    let sale = draw_sale().script;
    let other = busy_sale();
    // Another voucher's records and a line that is no event are passed by.
    let file = format!("{}not an event\n\n{}", json_lines(&other), json_lines(&sale));
    let read = read_lines(Cursor::new(file.clone()), "copy.jsonl", sale.voucher).expect("read");
    assert_eq!(
        (read.source.records, read.source.undecodable),
        ((other.records.len() + sale.records.len() + 1) as u64, 1)
    );
    let verification = verified(&read.log).read_from(read.source);
    assert!(verification.pass, "{}", verification.text());
    assert!(verification.text().contains(" (log read from the file copy.jsonl in "), "{}", verification.text());

    // One entry's user changed in the copy, as an editor would.
    let entry = format!("\"user_id\":\"{}\",", entrant(7));
    let doctored = file.replacen(&entry, "\"user_id\":\"mallory\",", 1);
    assert_ne!(doctored, file);
    let read = read_lines(Cursor::new(doctored), "copy.jsonl", sale.voucher).expect("read");
    let verification = verified(&read.log);
    assert_eq!(failing(&verification), ["entries_hash", "ranking"], "{}", verification.text());
    assert!(verification.text().ends_with("\nFAIL: entries_hash, ranking\n"), "{}", verification.text());

    let unknown = seckill_core::ids::VoucherId::generate();
    let missing = read_lines(Cursor::new(file), "copy.jsonl", unknown);
    assert!(matches!(missing, Err(AnalyticsError::UnknownVoucher(voucher)) if voucher == unknown));
}

#[test]
fn the_verifier_ranks_as_the_core_does() {
    let DrawSale { seed, ranking, .. } = draw_sale();
    let entrants: Vec<UserId> = (1..=ENTRIES).map(entrant).collect();
    let hash = seckill_core::draw::entries_hash(&entrants);
    assert_eq!(checks::rank(&seed, &hash, &entrants), ranking);
    assert_eq!(checks::rank(&seed, "", &[]), Vec::<UserId>::new());
}

/// The worked example of the ranking in `docs/EVENTS.md`, computed by the
/// code: if either changes, they must change together.
#[test]
fn the_documented_example_holds() {
    use seckill_core::draw::{entries_hash, rank_key, ranking};
    let seed = "5eed".repeat(16);
    let users: Vec<UserId> = ["alice", "bob", "carol"].iter().map(|u| UserId::parse(u).expect("valid")).collect();
    let hash = entries_hash(&users);
    assert_eq!(queue::seed_commitment(&seed), DOC_COMMITMENT);
    assert_eq!(entries_hash(&users[..1]), DOC_CHAIN[0]);
    assert_eq!(entries_hash(&users[..2]), DOC_CHAIN[1]);
    assert_eq!(hash, DOC_CHAIN[2]);
    let keys: Vec<u64> = users.iter().map(|user| rank_key(&seed, &hash, user)).collect();
    assert_eq!(keys, DOC_KEYS);
    let ranked: Vec<String> = ranking(&seed, &users).iter().map(UserId::to_string).collect();
    assert_eq!(ranked, DOC_RANKING);
}

const DOC_COMMITMENT: &str = "9619e2c3275e1e8be9ca29f0d7e0668cfdc675efcac99dbfa3ed48872c69809f";
const DOC_CHAIN: [&str; 3] = [
    "526ef9190402f75849a3e1fa74a6c0b19016c6f6",
    "eac997beb41f52350826058e62bfa9297c4c2f00",
    "2d9f2fc800be7321a91c28c427e1493aad933396",
];
/// alice's, bob's and carol's: 0xdb620f46399b1, 0x7086a3e62c6c4, 0x24421036fad61.
const DOC_KEYS: [u64; 3] = [3_859_427_352_615_345, 1_979_577_243_190_980, 637_858_535_681_377];
const DOC_RANKING: [&str; 3] = ["carol", "bob", "alice"];

#[test]
fn with_a_limit_of_several_units_each_win_stands_for_the_limit() {
    // Stock 5, two units a user: ⌈5 / 2⌉ = 3 wins, the last for one unit.
    let drawn = |winners| {
        let mut sale = Script::drawn(5, 2);
        let seed = queue::new_seed();
        sale.draw_commit(&seed, -60_000);
        let entrants: Vec<UserId> = (1..=6).map(entrant).collect();
        for (user, seq) in entrants.iter().zip(1u64..) {
            sale.enter(user, seq, -50_000 + seq as i64);
        }
        sale.draw_reveal(&seed, &entrants, DRAW_MS);
        sale.rank(&seckill_core::draw::ranking(&seed, &entrants), DRAW_MS + 10);
        sale.select(winners, DRAW_MS + 20);
        verified(&sale.log)
    };
    let verification = drawn(3);
    assert!(verification.pass, "{}", verification.text());
    assert!(
        detail(&verification, "winners").starts_with("3 winners at the draw within stock 5 (2 units a win: 3 wins)")
    );

    let verification = drawn(4);
    assert_eq!(failing(&verification), ["winners"], "{}", verification.text());
    assert!(detail(&verification, "winners").starts_with("4 winners at the draw NOT within stock 5"));
}
