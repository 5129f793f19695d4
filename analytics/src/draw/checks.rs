//! The checks of a draw, each from the log alone and on its own, so a
//! doctored record shows up as exactly the checks it breaks, with the rank,
//! seq, chunk or order that differs.
//!
//! Positions on the sales topic (not clocks) say what came first: the
//! draw's records are relayed from one outbox stream per voucher, in the
//! order Redis wrote them. The one clock compared is the reveal's
//! `emitted_at` (the Redis clock of the call that closed the entries)
//! against the definition's `draw_at`.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use chrono::{DateTime, SecondsFormat, Utc};
use seckill_core::draw::{self, RANK_CHUNK};
use seckill_core::event::DrawSeedRevealed;
use seckill_core::ids::{OrderId, UserId};
use seckill_core::queue;
use serde_json::json;

use super::Check;
use crate::sale::{DrawLog, Logged, VoucherLog};
use crate::wording::{plural, with_example};

/// What every check reads: the log, and the list and ranking recomputed
/// from it once.
pub(super) struct Recomputed<'a> {
    log: &'a VoucherLog,
    draw: &'a DrawLog,
    reveal: Option<&'a Logged<DrawSeedRevealed>>,
    /// The list the reveal names (seq 1..=entries, as logged), in seq
    /// order; every logged entry before a reveal.
    entrants: Vec<UserId>,
    /// Step 1 over `entrants`, once revealed.
    entries_hash: Option<String>,
    /// Steps 1 to 3 over `entrants` with the revealed seed: rank 1 first.
    ranking: Option<Vec<UserId>>,
}

impl<'a> Recomputed<'a> {
    pub(super) fn of(log: &'a VoucherLog) -> Self {
        let draw = &log.draw;
        let reveal = draw.reveal();
        let through = reveal.map_or(u64::MAX, |reveal| reveal.record.entries);
        let entrants = draw.entrants(through);
        let entries_hash = reveal.map(|_| draw::entries_hash(&entrants));
        let ranking =
            reveal.zip(entries_hash.as_deref()).map(|(reveal, hash)| rank(&reveal.record.seed, hash, &entrants));
        Self { log, draw, reveal, entrants, entries_hash, ranking }
    }

    /// The user the recomputed ranking puts at `rank`.
    fn at_rank(&self, rank: u64) -> Option<&UserId> {
        let index = usize::try_from(rank.checked_sub(1)?).ok()?;
        self.ranking.as_ref()?.get(index)
    }

    /// The user the logged ranking puts at `rank`, else (a chunk missing)
    /// the recomputed one's. Winners and orders are checked against what
    /// the platform published, which the `ranking` check compares with the
    /// recomputation: a doctored ranking fails that check alone.
    fn published_at(&self, rank: u64) -> Option<&UserId> {
        let chunk = rank.checked_sub(1)? / RANK_CHUNK as u64;
        let logged = self.draw.ranked.get(&chunk).and_then(|chunk| {
            let index = usize::try_from(rank.checked_sub(chunk.record.first_rank)?).ok()?;
            chunk.record.users.get(index)
        });
        logged.or_else(|| self.at_rank(rank))
    }

    /// Ranks that won: 1..=winners at the draw, and each promoted.
    fn wins(&self) -> (u64, BTreeSet<u64>) {
        let winners = self.draw.selection().map_or(0, |selection| selection.record.winners);
        let promoted = self.draw.promotions.values().map(|promotion| promotion.record.rank).collect();
        (winners, promoted)
    }
}

/// Steps 2 and 3 of `seckill_core::draw` over `entrants`, whose list hash
/// (step 1) is `list_hash`: `draw::ranking` itself, but for hashing the
/// list a second time (a SHA-1 per entry, the costliest part of a verify).
pub(super) fn rank(seed: &str, list_hash: &str, entrants: &[UserId]) -> Vec<UserId> {
    let mut keyed: Vec<(u64, &str, &UserId)> =
        entrants.iter().map(|user| (draw::rank_key(seed, list_hash, user), user.as_str(), user)).collect();
    keyed.sort_unstable();
    keyed.into_iter().map(|(_, _, user)| user.clone()).collect()
}

/// Every entry's seq is 1..N without gap, each seq names one user, and no
/// user entered twice.
pub(super) fn entries(r: &Recomputed<'_>) -> Check {
    const CHECK: (&str, &str) = ("entries", "entries: seq 1..N, each once");
    let draw = r.draw;
    let count = draw.entries.len() as u64;
    let last = draw.entries.keys().next_back().copied().unwrap_or(0);
    let missing = last.saturating_sub(count);
    let mut example = None;
    if missing > 0 {
        let first_gap = (1u64..).zip(draw.entries.keys()).find(|(expected, seq)| expected != *seq);
        if let Some((gap, _)) = first_gap {
            example = Some(format!("seq {gap} missing"));
        }
    }
    if let Some((seq, users)) = draw.seq_conflicts.iter().next() {
        let users: Vec<&str> = users.iter().map(UserId::as_str).collect();
        example.get_or_insert_with(|| format!("seq {seq} logged for {}", users.join(" and ")));
    }
    let mut seqs_of: HashMap<&UserId, Vec<u64>> = HashMap::new();
    for (seq, entry) in &draw.entries {
        seqs_of.entry(&entry.record.user_id).or_default().push(*seq);
    }
    let mut twice: Vec<(&UserId, &Vec<u64>)> =
        seqs_of.iter().filter(|(_, seqs)| seqs.len() > 1).map(|(u, s)| (*u, s)).collect();
    twice.sort_unstable();
    if let Some((user, seqs)) = twice.first() {
        example.get_or_insert_with(|| format!("{user} at seq {} and {}", seqs[0], seqs[1]));
    }
    let conflicts = draw.seq_conflicts.len() as u64;
    let pass = missing == 0 && conflicts == 0 && twice.is_empty();
    let mut detail = if count == 0 {
        "no entries".to_owned()
    } else {
        format!(
            "{count} entries, seq 1..{last}: {missing} missing, {conflicts} logged for two users, {} entered twice",
            users(twice.len() as u64)
        )
    };
    with_example(&mut detail, pass, example);
    Check::new(
        CHECK,
        pass,
        detail,
        json!({
            "entries": count,
            "last_seq": last,
            "missing_seqs": missing,
            "seq_conflicts": conflicts,
            "users_entered_twice": twice.len(),
        }),
    )
}

/// The seed's SHA-256 was logged before the first entry and before the
/// reveal, and the revealed seed hashes to it: the operator chose the seed
/// before anyone entered, and cannot have changed it since.
pub(super) fn commitment(r: &Recomputed<'_>) -> Check {
    const CHECK: (&str, &str) = ("commitment", "seed committed before the first entry");
    let draw = r.draw;
    let commitments = draw.commitments();
    let hashes: BTreeSet<&str> = commitments.iter().map(|c| c.record.seed_hash.as_str()).collect();
    let revealed_hash = r.reveal.map(|reveal| queue::seed_commitment(&reveal.record.seed));
    // The commitment that must come first is the one the revealed seed
    // hashes to: a later commitment to a seed picked once the entrants
    // were known must not pass on the strength of an earlier, other one.
    let matching = revealed_hash.as_deref().and_then(|hash| commitments.iter().find(|c| c.record.seed_hash == hash));
    let commitment = matching.or(commitments.first());
    let before = |position| commitment.is_some_and(|c| c.position < position);
    let entries_before = draw.entries.values().filter(|entry| !before(entry.position)).count() as u64;
    // A beacon draw's seed is the round's randomness, checked by `beacon`.
    let by_beacon = super::beacon::plan(r.log).is_some();
    let seed_matches = r.reveal.is_none() || matching.is_some() || by_beacon;
    let before_reveal = r.reveal.is_none_or(|reveal| before(reveal.position));
    let reveals_agree = draw.reveals_agree();
    let altered = draw.altered_of(&["DrawSeedCommitted", "DrawSeedRevealed"]);
    // A ranking or a win means the draw was made, and the seed must be public.
    let drawn_unrevealed =
        if r.reveal.is_none() { (draw.ranked.len() + draw.selections.len() + draw.promotions.len()) as u64 } else { 0 };
    // No commitment yet is fine while nothing depends on it: the first
    // entry or the reveal without one fails through the counts below.
    let pass =
        entries_before == 0 && seed_matches && before_reveal && reveals_agree && altered == 0 && drawn_unrevealed == 0;

    let mut parts = vec![format!("{} ({} distinct)", plural(commitments.len() as u64, "commitment"), hashes.len())];
    parts.push(match (draw.entries.len() as u64, entries_before) {
        (0, _) => "no entry yet".to_owned(),
        (all, 0) => format!("all {all} entries after it"),
        (all, early) => format!("{early} of {all} entries not after it"),
    });
    parts.push(match (r.reveal, matching) {
        (None, _) if drawn_unrevealed > 0 => {
            format!("seed not revealed, yet {} of the draw logged", plural(drawn_unrevealed, "record"))
        }
        (None, _) => "seed not revealed yet".to_owned(),
        (Some(_), None) if by_beacon => "the revealed seed is the beacon round's randomness (see beacon)".to_owned(),
        (Some(_), None) => format!(
            "SHA-256(revealed seed) = {}… ≠ any committed hash",
            short(revealed_hash.as_deref().unwrap_or_default())
        ),
        (Some(_), Some(_)) if !before_reveal => "SHA-256(revealed seed) was committed after the reveal".to_owned(),
        (Some(_), Some(c)) => format!("SHA-256(revealed seed) = the committed {}…", short(&c.record.seed_hash)),
    });
    if !reveals_agree {
        parts.push(format!("{} disagree", plural(draw.reveals.len() as u64, "reveal")));
    }
    if altered > 0 {
        parts.push(format!("{} with copies that differ", plural(altered, "record")));
    }
    Check::new(
        CHECK,
        pass,
        parts.join("; "),
        json!({
            "commitments": commitments.len(),
            "distinct_hashes": hashes.len(),
            "entries_not_after_commitment": entries_before,
            "revealed": r.reveal.is_some(),
            "seed_matches_commitment": r.reveal.is_some() && seed_matches,
            "committed_before_reveal": r.reveal.is_some() && before_reveal,
            "reveals": draw.reveals.len(),
            "reveals_agree": reveals_agree,
            "altered_copies": altered,
            "drawn_unrevealed": drawn_unrevealed,
        }),
    )
}

/// The SHA-1 chain over the logged entries, in seq order, is the hash the
/// reveal fixed: the list drawn from is the list in the log.
pub(super) fn entries_hash(r: &Recomputed<'_>) -> Check {
    const CHECK: (&str, &str) = ("entries_hash", "entries hash recomputed = revealed");
    let (Some(reveal), Some(recomputed)) = (r.reveal, &r.entries_hash) else {
        return Check::new(CHECK, true, "seed not revealed yet".to_owned(), json!({"revealed": false}));
    };
    let revealed = &reveal.record.entries_hash;
    let pass = recomputed == revealed;
    let sign = if pass { "=" } else { "≠" };
    Check::new(
        CHECK,
        pass,
        format!(
            "SHA-1 chain over the {} logged entries of the list = {} {sign} revealed {}",
            r.entrants.len(),
            shown(recomputed),
            shown(revealed)
        ),
        json!({"revealed": true, "entries_hashed": r.entrants.len(), "recomputed": recomputed, "revealed_hash": revealed}),
    )
}

/// The log holds exactly the entries the reveal counts, and none after.
pub(super) fn entry_count(r: &Recomputed<'_>) -> Check {
    const CHECK: (&str, &str) = ("entry_count", "entries in the log = revealed count");
    let Some(reveal) = r.reveal else {
        let detail = format!("seed not revealed yet ({} so far)", plural(r.draw.entries.len() as u64, "entry"));
        return Check::new(CHECK, true, detail, json!({"revealed": false, "entries": r.draw.entries.len()}));
    };
    let revealed = reveal.record.entries;
    let listed = r.entrants.len() as u64;
    let beyond = (r.draw.entries.len() as u64).saturating_sub(listed);
    let pass = listed == revealed && beyond == 0;
    let sign = if listed == revealed { "=" } else { "≠" };
    let mut detail = format!("{listed} in the log {sign} {revealed} revealed; {beyond} with a seq past the count");
    if let Some((seq, entry)) = r.draw.entries.range(revealed + 1..).next() {
        detail.push_str(&format!(" (e.g. seq {seq}, {})", entry.record.user_id));
    }
    Check::new(
        CHECK,
        pass,
        detail,
        json!({"revealed": true, "logged": listed, "revealed_entries": revealed, "past_count": beyond}),
    )
}

/// The `DrawRanked` chunks, put together, are the ranking recomputed from
/// the revealed seed and the logged entries: every chunk present, each
/// rank's user the recomputed one.
pub(super) fn ranking(r: &Recomputed<'_>) -> Check {
    const CHECK: (&str, &str) = ("ranking", "ranking recomputed = ranking logged");
    let draw = r.draw;
    let Some(ranking) = &r.ranking else {
        let pass = draw.ranked.is_empty();
        let detail = if pass {
            "seed not revealed yet: nothing ranked".to_owned()
        } else {
            format!("{} logged and no reveal to check them against", plural(draw.ranked.len() as u64, "chunk"))
        };
        return Check::new(CHECK, pass, detail, json!({"revealed": false, "chunks_logged": draw.ranked.len()}));
    };
    if ranking.is_empty() && draw.ranked.is_empty() {
        let detail = "no entries: nothing to rank, no chunk logged".to_owned();
        return Check::new(CHECK, true, detail, json!({"revealed": true, "chunks_expected": 0, "chunks_logged": 0}));
    }
    let expected_chunks = ranking.len().div_ceil(RANK_CHUNK) as u64;
    let declared: BTreeSet<u64> = draw.ranked.values().map(|chunk| chunk.record.chunks).collect();
    let span = declared.iter().copied().chain([expected_chunks]).max().unwrap_or(0);
    let missing: Vec<u64> = (0..span).filter(|chunk| !draw.ranked.contains_key(chunk)).collect();
    let beyond = draw.ranked.keys().filter(|chunk| **chunk >= expected_chunks).count() as u64;
    let misplaced: Vec<u64> = draw
        .ranked
        .iter()
        .filter(|(chunk, logged)| logged.record.first_rank != *chunk * RANK_CHUNK as u64 + 1)
        .map(|(chunk, _)| *chunk)
        .collect();

    let (mut logged, mut differing) = (0u64, 0u64);
    let mut first_difference: Option<(u64, &UserId, Option<&UserId>)> = None;
    let mut ranked_users: HashMap<&str, u64> = HashMap::new();
    for chunk in draw.ranked.values() {
        for (rank, user) in (chunk.record.first_rank..).zip(&chunk.record.users) {
            logged += 1;
            *ranked_users.entry(user.as_str()).or_default() += 1;
            let recomputed = r.at_rank(rank);
            if recomputed != Some(user) {
                differing += 1;
                if first_difference.is_none_or(|(first, _, _)| rank < first) {
                    first_difference = Some((rank, user, recomputed));
                }
            }
        }
    }
    let ranked_twice = ranked_users.values().filter(|times| **times > 1).count() as u64;
    let entered: HashSet<&str> = r.entrants.iter().map(UserId::as_str).collect();
    let mut never_entered: Vec<&str> = ranked_users.keys().copied().filter(|user| !entered.contains(user)).collect();
    never_entered.sort_unstable();
    let listed = r.reveal.map_or(0, |reveal| reveal.record.entries);
    let not_ranked: Vec<(u64, &UserId)> = draw
        .entries
        .range(1..=listed)
        .filter(|(_, entry)| !ranked_users.contains_key(entry.record.user_id.as_str()))
        .map(|(seq, entry)| (*seq, &entry.record.user_id))
        .collect();
    let conflicts = draw.chunk_conflicts.len() as u64;
    let pass = declared.iter().all(|chunks| *chunks == expected_chunks)
        && missing.is_empty()
        && beyond == 0
        && misplaced.is_empty()
        && differing == 0
        && logged == ranking.len() as u64
        && ranked_twice == 0
        && conflicts == 0;

    let mut parts = Vec::new();
    if pass {
        parts.push(format!(
            "{} (ranks 1..{}) = the ranking recomputed from the revealed seed and the {} entries",
            plural(draw.ranked.len() as u64, "chunk"),
            ranking.len(),
            ranking.len()
        ));
    } else {
        parts.push(format!(
            "{} of {expected_chunks} chunks logged, {logged} of {} ranks",
            draw.ranked.len(),
            ranking.len()
        ));
        if declared.iter().any(|chunks| *chunks != expected_chunks) {
            let declared: Vec<String> = declared.iter().map(u64::to_string).collect();
            parts.push(format!("chunks declared as {} ({expected_chunks} expected)", declared.join(" and ")));
        }
        if let Some(chunk) = missing.first() {
            let (from, to) =
                (chunk * RANK_CHUNK as u64 + 1, ((chunk + 1) * RANK_CHUNK as u64).min(ranking.len() as u64));
            parts.push(format!(
                "{} missing (e.g. chunk {chunk}: ranks {from}..{to} not logged)",
                plural(missing.len() as u64, "chunk")
            ));
        }
        if beyond > 0 {
            parts.push(format!("{} past the last expected", plural(beyond, "chunk")));
        }
        if let Some(chunk) = misplaced.first() {
            parts.push(format!(
                "{} with a wrong first_rank (e.g. chunk {chunk} starts at {}, not {})",
                plural(misplaced.len() as u64, "chunk"),
                draw.ranked[chunk].record.first_rank,
                chunk * RANK_CHUNK as u64 + 1
            ));
        }
        if conflicts > 0 {
            parts.push(format!("{} logged twice with different users", plural(conflicts, "chunk")));
        }
        if let Some((rank, user, recomputed)) = first_difference {
            let should = recomputed.map_or_else(|| "no one (past the last entry)".to_owned(), UserId::to_string);
            parts.push(format!(
                "{} differ, the first at rank {rank}: the log has {user}, the recomputation {should}",
                plural(differing, "rank")
            ));
        }
        if ranked_twice > 0 {
            parts.push(format!("{} ranked twice", users(ranked_twice)));
        }
        if let Some(user) = never_entered.first() {
            parts.push(format!("{} ranked but not among the entries (e.g. {user})", users(never_entered.len() as u64)));
        }
        if let Some((seq, user)) = not_ranked.first() {
            parts.push(format!(
                "{} entered but not ranked (e.g. {user}, seq {seq})",
                plural(not_ranked.len() as u64, "entry")
            ));
        }
    }
    Check::new(
        CHECK,
        pass,
        parts.join("; "),
        json!({
            "revealed": true,
            "chunks_expected": expected_chunks,
            "chunks_logged": draw.ranked.len(),
            "chunks_missing": missing,
            "chunks_past_expected": beyond,
            "chunks_misplaced": misplaced,
            "chunk_conflicts": conflicts,
            "ranks_recomputed": ranking.len(),
            "ranks_logged": logged,
            "ranks_differing": differing,
            "first_differing_rank": first_difference.map(|(rank, _, _)| rank),
            "users_ranked_twice": ranked_twice,
            "ranked_not_entered": never_entered.len(),
            "entered_not_ranked": not_ranked.len(),
        }),
    )
}

/// At most as many winners as entries and as the units take (each win may
/// buy up to the per-user limit: ⌈stock / limit⌉), and the promotions are
/// the ranks after the winners, each once, to the user the ranking puts
/// there.
///
/// Promotions are judged by their ranks and their Redis-clock times, not by
/// where they sit in the log: with several ingresses, their relays publish
/// one outbox in parallel, so records written one after the other by the
/// draw's scripts may reach the topic in another order.
pub(super) fn winners(r: &Recomputed<'_>) -> Check {
    const CHECK: (&str, &str) = ("winners", "winners within stock, promotions in rank order");
    let draw = r.draw;
    let stock = r.log.initial_stock() + r.log.added_stock();
    let per_win = r.log.definition.as_ref().map_or(1, |definition| u64::from(definition.per_user_limit.max(1)));
    let most_wins = stock.div_ceil(per_win);
    let mut promotions = draw.promotions();
    promotions.sort_by_key(|promotion| promotion.record.rank);
    let altered = draw.altered_of(&["DrawWinnersSelected", "DrawWinnerPromoted"]);
    let Some(selection) = draw.selection() else {
        let pass = promotions.is_empty() && altered == 0;
        let detail = if pass {
            "no winners selected yet".to_owned()
        } else {
            format!("{} and no selection of winners", plural(promotions.len() as u64, "promotion"))
        };
        return Check::new(CHECK, pass, detail, json!({"selected": false, "promoted": promotions.len()}));
    };
    let winners = selection.record.winners;
    let entries = r.reveal.map_or(r.draw.entries.len() as u64, |reveal| reveal.record.entries);
    let selections: BTreeSet<u64> = draw.selections.values().map(|s| s.record.winners).collect();
    let within = winners <= most_wins && winners <= entries;

    let (mut out_of_order, mut wrong_user, mut before_selection, mut past_entries) = (0u64, 0u64, 0u64, 0u64);
    let mut example = None;
    for (expected, promotion) in (winners + 1..).zip(&promotions) {
        let record = &promotion.record;
        if record.rank != expected {
            out_of_order += 1;
            example.get_or_insert_with(|| format!("rank {} promoted where rank {expected} was next", record.rank));
        }
        if record.rank > entries {
            past_entries += 1;
        }
        let should = r.published_at(record.rank);
        if should != Some(&record.user_id) {
            wrong_user += 1;
            let should = should.map_or_else(|| "nobody".to_owned(), UserId::to_string);
            example.get_or_insert_with(|| {
                format!("rank {} promoted {}, the ranking has {should}", record.rank, record.user_id)
            });
        }
        // Both written by draw_advance.lua, stamped by the Redis clock.
        if promotion.emitted_at < selection.emitted_at {
            before_selection += 1;
        }
    }
    let promoted = promotions.len() as u64;
    let pass = within
        && selections.len() == 1
        && out_of_order == 0
        && wrong_user == 0
        && before_selection == 0
        && past_entries == 0
        && altered == 0;
    let units = match per_win {
        1 => format!("stock {stock}"),
        _ => format!("stock {stock} ({per_win} units a win: {most_wins} wins)"),
    };
    let mut parts = vec![format!(
        "{winners} winners at the draw {} {units} and {entries} entries",
        if within { "within" } else { "NOT within" }
    )];
    if selections.len() > 1 {
        parts.push(format!("{} selections disagree", draw.selections.len()));
    }
    parts.push(match promoted {
        0 => "none promoted".to_owned(),
        _ => format!(
            "{promoted} promoted (ranks {}..{} expected): {out_of_order} out of rank order, {wrong_user} to another user \
             than the ranking's, {before_selection} before the selection",
            winners + 1,
            winners + promoted
        ),
    });
    if past_entries > 0 {
        parts.push(format!("{} past the last rank", plural(past_entries, "promotion")));
    }
    if altered > 0 {
        parts.push(format!("{} with copies that differ", plural(altered, "record")));
    }
    let mut detail = parts.join("; ");
    with_example(&mut detail, pass, example);
    Check::new(
        CHECK,
        pass,
        detail,
        json!({
            "selected": true,
            "winners": winners,
            "stock": stock,
            "units_a_win": per_win,
            "most_wins": most_wins,
            "entries": entries,
            "selections": draw.selections.len(),
            "promoted": promoted,
            "promotions_out_of_order": out_of_order,
            "promotions_to_another_user": wrong_user,
            "promotions_before_selection": before_selection,
            "promotions_past_last_rank": past_entries,
            "altered_copies": altered,
        }),
    )
}

/// Every order of the sale spent a win of its own user's rank, and no win
/// admitted two orders.
pub(super) fn orders(r: &Recomputed<'_>) -> Check {
    const CHECK: (&str, &str) = ("orders", "every order spent its user's win, each once");
    let draw = r.draw;
    let (winners, promoted) = r.wins();
    let is_win = |rank: u64| (1..=winners).contains(&rank) || promoted.contains(&rank);
    let mut wins_of: HashMap<OrderId, BTreeSet<(u64, &UserId)>> = HashMap::new();
    let mut orders_of: BTreeMap<u64, BTreeSet<OrderId>> = BTreeMap::new();
    let (mut not_a_win, mut not_their_rank) = (0u64, 0u64);
    let mut example = None;
    for logged in draw.wins_used.values() {
        let used = &logged.record;
        wins_of.entry(used.order_id).or_default().insert((used.rank, &used.user_id));
        orders_of.entry(used.rank).or_default().insert(used.order_id);
        if !is_win(used.rank) {
            not_a_win += 1;
            example.get_or_insert_with(|| format!("{} spent rank {}, which did not win", used.user_id, used.rank));
        }
        if r.published_at(used.rank) != Some(&used.user_id) {
            not_their_rank += 1;
            let holder = r.published_at(used.rank).map_or_else(|| "nobody".to_owned(), UserId::to_string);
            example.get_or_insert_with(|| format!("{} spent rank {}, which is {holder}'s", used.user_id, used.rank));
        }
    }
    let accepted: BTreeMap<&OrderId, &UserId> = r
        .log
        .orders
        .iter()
        .filter(|(_, order)| order.accepted.is_some())
        .map(|(id, order)| (id, &order.user_id))
        .collect();
    let (mut without, mut other_user, mut two_wins) = (0u64, 0u64, 0u64);
    for (order, user) in &accepted {
        match wins_of.get(order) {
            None => {
                without += 1;
                example.get_or_insert_with(|| format!("order {order} of {user} spent no win"));
            }
            Some(wins) => {
                if wins.iter().any(|(_, winner)| winner != user) {
                    other_user += 1;
                    example.get_or_insert_with(|| format!("order {order} of {user} spent another user's win"));
                }
                if wins.len() > 1 {
                    two_wins += 1;
                }
            }
        }
    }
    let not_in_log = wins_of.keys().filter(|order| !accepted.contains_key(order)).count() as u64;
    let twice: Vec<(&u64, &BTreeSet<OrderId>)> = orders_of.iter().filter(|(_, orders)| orders.len() > 1).collect();
    if let Some((rank, orders)) = twice.first() {
        example.get_or_insert_with(|| format!("rank {rank} admitted {} orders", orders.len()));
    }
    let used_twice = twice.len() as u64;
    let altered = draw.altered_of(&["DrawWinUsed"]);
    let pass = without == 0
        && other_user == 0
        && two_wins == 0
        && not_a_win == 0
        && not_their_rank == 0
        && used_twice == 0
        && not_in_log == 0
        && altered == 0;
    let mut detail = format!(
        "{} accepted: {without} without a win spent on it, {other_user} spending another user's; {} used: {not_a_win} \
         not a win, {not_their_rank} not the spender's rank, {used_twice} used twice, {not_in_log} for an order not in \
         the log",
        plural(accepted.len() as u64, "order"),
        plural(orders_of.len() as u64, "win")
    );
    if two_wins > 0 {
        detail.push_str(&format!("; {} spent two wins", plural(two_wins, "order")));
    }
    if altered > 0 {
        detail.push_str(&format!("; {} with copies that differ", plural(altered, "record")));
    }
    with_example(&mut detail, pass, example);
    Check::new(
        CHECK,
        pass,
        detail,
        json!({
            "orders_accepted": accepted.len(),
            "orders_without_win": without,
            "orders_with_another_users_win": other_user,
            "orders_with_two_wins": two_wins,
            "wins_used": orders_of.len(),
            "used_not_a_win": not_a_win,
            "used_not_spenders_rank": not_their_rank,
            "wins_used_twice": used_twice,
            "used_for_order_not_in_log": not_in_log,
            "altered_copies": altered,
        }),
    )
}

/// The seed was revealed at or after `draw_at`, no entry was taken after
/// the reveal (none has a seq past its count), and the whole ranking was
/// written after the reveal and before any win. The order of writing is
/// the Redis clock's (`emitted_at` of the records `draw_advance.lua`
/// writes), not the log's: several relays may interleave one outbox.
pub(super) fn timing(r: &Recomputed<'_>) -> Check {
    const CHECK: (&str, &str) = ("timing", "revealed at draw_at, ranking before winners");
    let Some(definition) = &r.log.definition else {
        return Check::new(CHECK, false, "the log has no VoucherCreated for this voucher".to_owned(), json!({}));
    };
    let Some(settings) = &definition.draw else {
        return Check::new(CHECK, false, "the voucher's VoucherCreated defines no draw".to_owned(), json!({}));
    };
    let draw_at = settings.draw_at;
    let Some(reveal) = r.reveal else {
        let detail = format!("seed not revealed yet (draw_at {})", rfc3339(draw_at));
        return Check::new(CHECK, true, detail, json!({"revealed": false, "draw_at": draw_at}));
    };
    // The scripts keep time in whole milliseconds (`draw_at` reaches them
    // truncated), so a reveal in draw_at's own millisecond is on time.
    let on_time = reveal.emitted_at.timestamp_millis() >= draw_at.timestamp_millis();
    let draw = r.draw;
    let late_entries = draw.entries.range(reveal.record.entries + 1..).count() as u64;
    let ranked_early = draw.ranked.values().filter(|chunk| chunk.emitted_at < reveal.emitted_at).count() as u64;
    let selection = draw.selection();
    let ranked_late = selection.map_or(0, |selection| {
        draw.ranked.values().filter(|chunk| chunk.emitted_at > selection.emitted_at).count() as u64
    });
    let selected_early = selection.is_some_and(|selection| selection.emitted_at < reveal.emitted_at);
    let pass = on_time && late_entries == 0 && ranked_early == 0 && ranked_late == 0 && !selected_early;
    let mut parts = vec![format!(
        "revealed at {} {} draw_at {}",
        rfc3339(reveal.emitted_at),
        if on_time { "≥" } else { "<" },
        rfc3339(draw_at)
    )];
    parts.push(format!("{} after the reveal", plural(late_entries, "entry")));
    parts.push(format!(
        "{} before the reveal, {} after the winners",
        plural(ranked_early, "chunk"),
        plural(ranked_late, "chunk")
    ));
    if selected_early {
        parts.push("winners selected before the reveal".to_owned());
    }
    Check::new(
        CHECK,
        pass,
        parts.join("; "),
        json!({
            "revealed": true,
            "revealed_at": reveal.emitted_at,
            "draw_at": draw_at,
            "revealed_on_time": on_time,
            "entries_after_reveal": late_entries,
            "chunks_before_reveal": ranked_early,
            "chunks_after_winners": ranked_late,
            "winners_before_reveal": selected_early,
        }),
    )
}

/// A time as the details show it: UTC, milliseconds.
fn rfc3339(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// `1 user`, `2 users`.
fn users(count: u64) -> String {
    plural(count, "user")
}

/// The first 12 hex digits of a hash, for a detail.
fn short(hash: &str) -> &str {
    hash.get(..12).unwrap_or(hash)
}

/// A hash as a detail shows it: shortened, or `""` when empty.
fn shown(hash: &str) -> String {
    if hash.is_empty() {
        "\"\" (no entries)".to_owned()
    } else {
        format!("{}…", short(hash))
    }
}
