//! The rules a queue-mode sale's waiting room must satisfy, from the log
//! alone: nobody chose the shuffle, nobody was served out of turn, and no
//! order got past the room without its own entry, spent once.
//!
//! The room's records are written by Redis scripts into one outbox stream
//! per voucher. One relay publishes it in order, but several ingresses'
//! relays share it and may interleave what they publish, so the order in
//! which places were passed is the Redis clock's (`emitted_at` of
//! `queue_advance.lua`'s records), places in one call by number; the
//! commitment, logged by an ingress before the room takes a join, precedes
//! every join in the log whatever the relays do.

use std::collections::{BTreeMap, BTreeSet};

use seckill_core::ids::{OrderId, UserId};
use seckill_core::queue;
use serde_json::json;

use super::RuleResult;
use crate::sale::{Pass, VoucherLog};
use crate::wording::{plural, with_example};

/// The seed's SHA-256 was logged before the first join and before the
/// reveal, and the revealed seed hashes to it: the shuffle was fixed before
/// anyone could see it.
pub(super) fn seed_committed(log: &VoucherLog) -> RuleResult {
    const RULE: (&str, &str) = ("queue_seed_committed", "the shuffle's seed was committed before the room opened");
    let room = &log.queue;
    let commitments = room.commitments();
    let first_join = room.joins().first().map(|join| join.position);
    let reveal = room.reveal();
    let hashes: BTreeSet<&str> = commitments.iter().map(|c| c.record.seed_hash.as_str()).collect();
    // The commitment that must come first: the one the revealed seed
    // hashes to (a later commitment to a seed picked once the joiners were
    // known would otherwise pass), else (not revealed yet, or revealed
    // and matching none) the first.
    let revealed_hash = reveal.map(|reveal| queue::seed_commitment(&reveal.record.seed));
    let matching = revealed_hash.and_then(|hash| commitments.iter().find(|c| c.record.seed_hash == hash));
    let commitment = matching.or(commitments.first());
    let before = |position| commitment.is_some_and(|c| c.position < position);
    let joins_before = room.joins.values().filter(|join| !before(join.position)).count() as u64;
    // A beacon room's seed is the round's randomness, checked by `queue_beacon`.
    let by_beacon = super::queue_beacon::plan(log).is_some();
    let seed_matches = reveal.is_none() || matching.is_some() || by_beacon;
    let before_reveal = reveal.is_none_or(|reveal| before(reveal.position));
    let reveals_agree = room.reveals_agree();
    // A place passed means the sale began, and the seed must be public.
    let served_unrevealed = if reveal.is_none() { room.passes.len() as u64 } else { 0 };
    let pass = joins_before == 0 && seed_matches && before_reveal && reveals_agree && served_unrevealed == 0;

    let mut detail = format!("{} ({} distinct); ", plural(commitments.len() as u64, "commitment"), hashes.len());
    detail.push_str(&match (first_join, joins_before) {
        (None, _) => "no join yet".to_owned(),
        (Some(_), 0) => format!("all {} after it", plural(room.joins.len() as u64, "join")),
        (Some(_), early) => format!("{early} of {} not after it", plural(room.joins.len() as u64, "join")),
    });
    detail.push_str("; ");
    detail.push_str(&match (reveal, matching) {
        (None, _) if served_unrevealed > 0 => {
            format!("seed not revealed, yet {} passed", plural(served_unrevealed, "place"))
        }
        (None, _) => "seed not revealed yet".to_owned(),
        (Some(_), None) if by_beacon => {
            "the revealed seed is the beacon round's randomness (see queue_beacon)".to_owned()
        }
        (Some(_), None) => "the revealed seed's SHA-256 ≠ any committed hash".to_owned(),
        (Some(_), Some(_)) if !before_reveal => "the revealed seed's SHA-256 was committed after the reveal".to_owned(),
        (Some(_), Some(c)) => format!("the revealed seed's SHA-256 = the committed {}…", short(&c.record.seed_hash)),
    });
    if !reveals_agree {
        detail.push_str(&format!("; {} disagree", plural(room.reveals.len() as u64, "reveal")));
    }
    RuleResult::new(
        RULE,
        pass,
        detail,
        json!({
            "commitments": commitments.len(),
            "distinct_hashes": hashes.len(),
            "joins": room.joins.len(),
            "joins_not_after_commitment": joins_before,
            "revealed": reveal.is_some(),
            "seed_matches_commitment": reveal.is_some() && seed_matches,
            "committed_before_reveal": reveal.is_some() && before_reveal,
            "reveals": room.reveals.len(),
            "reveals_agree": reveals_agree,
            "passed_unrevealed": served_unrevealed,
        }),
    )
}

/// The places passed, in the order `queue_advance.lua` passed them, are
/// 1, 2, 3, … without gap or repeat,
/// and each went to the holder the revealed seed and the logged joins give
/// it: the served order is the shuffle, nobody was served out of turn.
pub(super) fn served_in_shuffle(log: &VoucherLog) -> RuleResult {
    const RULE: (&str, &str) = ("queue_served_in_shuffle", "places served in the shuffle's order, each once");
    let room = &log.queue;
    let mut passes = room.passes();
    passes.sort_by_key(|pass| (pass.emitted_at, pass.record.place()));
    let issued = passes.iter().filter(|pass| matches!(pass.record, Pass::Issued(_))).count() as u64;
    let (passed, expired) = (passes.len() as u64, passes.len() as u64 - issued);
    let Some(holders) = room.holders() else {
        let pass = passes.is_empty();
        let detail = if pass {
            "seed not revealed yet: no place passed".to_owned()
        } else {
            format!("{} passed and no reveal in the log to check them against", plural(passed, "place"))
        };
        return RuleResult::new(RULE, pass, detail, json!({"revealed": false, "passed": passed}));
    };
    let pre_queue = holders.pre_queue.len() as u64;
    let after_start = holders.after_start.len() as u64;
    let (mut out_of_sequence, mut wrong_holder) = (0u64, 0u64);
    let mut example = None;
    for (expected, pass) in (1u64..).zip(&passes) {
        let place = pass.record.place();
        if place != expected {
            out_of_sequence += 1;
            example.get_or_insert_with(|| format!("place {place} passed {expected}th"));
        }
        let holder = holders.at(place);
        if holder != Some(pass.record.user()) {
            wrong_holder += 1;
            let should = holder.map_or_else(|| "nobody".to_owned(), UserId::to_string);
            example.get_or_insert_with(|| format!("place {place} went to {}, not {should}", pass.record.user()));
        }
    }
    let count_agrees = holders.pre_queued == pre_queue;
    let seq_conflicts = holders.seq_conflicts();
    let pass = out_of_sequence == 0 && wrong_holder == 0 && count_agrees && seq_conflicts == 0;
    let mut detail = format!(
        "{pre_queue} pre-queue joins (the reveal says {}), {after_start} after the start; {passed} places passed in \
         the room's order ({issued} served, {expired} expired): {out_of_sequence} out of sequence, {wrong_holder} to another \
         user than the shuffle's",
        holders.pre_queued
    );
    if seq_conflicts > 0 {
        detail.push_str(&format!("; {} claimed by two users", plural(seq_conflicts, "seq")));
    }
    with_example(&mut detail, pass, example);
    RuleResult::new(
        RULE,
        pass,
        detail,
        json!({
            "revealed": true,
            "pre_queue_joins": pre_queue,
            "pre_queued_revealed": holders.pre_queued,
            "after_start_joins": after_start,
            "passed": passed,
            "issued": issued,
            "expired": expired,
            "out_of_sequence": out_of_sequence,
            "wrong_holder": wrong_holder,
            "seq_conflicts": seq_conflicts,
        }),
    )
}

/// No entry admitted two orders, every entry spent was issued to the user
/// who spent it, and every order admitted has an entry spent on it.
pub(super) fn entries_single_use(log: &VoucherLog) -> RuleResult {
    const RULE: (&str, &str) = ("queue_entries_single_use", "every order spent its own entry, each entry once");
    let room = &log.queue;
    let mut issued_to: BTreeMap<u64, BTreeSet<&UserId>> = BTreeMap::new();
    for pass in room.passes.values() {
        if let Pass::Issued(issued) = &pass.record {
            issued_to.entry(issued.entry).or_default().insert(&issued.user_id);
        }
    }
    let mut orders_of: BTreeMap<u64, BTreeSet<OrderId>> = BTreeMap::new();
    let mut not_issued: BTreeSet<(u64, &UserId)> = BTreeSet::new();
    for used in room.used.values() {
        let used = &used.record;
        orders_of.entry(used.entry).or_default().insert(used.order_id);
        // An entry number issued twice (to two users) is no one's own.
        let own = issued_to.get(&used.entry).is_some_and(|users| users.len() == 1 && users.contains(&used.user_id));
        if !own {
            not_issued.insert((used.entry, &used.user_id));
        }
    }
    let twice = orders_of.values().filter(|orders| orders.len() > 1).count() as u64;
    let spent_on: BTreeSet<OrderId> = orders_of.values().flatten().copied().collect();
    let accepted: Vec<&OrderId> =
        log.orders.iter().filter(|(_, order)| order.accepted.is_some()).map(|(id, _)| id).collect();
    let without = accepted.iter().filter(|order| !spent_on.contains(order)).count() as u64;
    let pass = twice == 0 && not_issued.is_empty() && without == 0;
    RuleResult::new(
        RULE,
        pass,
        format!(
            "{} issued, {} spent: {twice} on two or more orders, {} not issued to the user who spent it; {} \
             accepted, {without} without an entry spent",
            entries(issued_to.len() as u64),
            orders_of.len(),
            not_issued.len(),
            plural(accepted.len() as u64, "order")
        ),
        json!({
            "entries_issued": issued_to.len(),
            "entries_spent": orders_of.len(),
            "spent_twice": twice,
            "spent_not_issued": not_issued.len(),
            "orders_accepted": accepted.len(),
            "orders_without_entry": without,
        }),
    )
}

/// `1 entry`, `2 entries`.
fn entries(count: u64) -> String {
    if count == 1 {
        "1 entry".to_owned()
    } else {
        format!("{count} entries")
    }
}

/// The first 12 hex digits of a hash, for the detail.
fn short(hash: &str) -> &str {
    hash.get(..12).unwrap_or(hash)
}
