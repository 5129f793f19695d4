//! A draw's purchase windows, checked from the log: each is as long as the
//! definition says, no stall ate it, each win was spent inside its window,
//! and each promotion was needed.
//!
//! A window opens with the record that grants it (`DrawWinnersSelected` for
//! ranks 1..=W, `DrawWinnerPromoted` for each later rank), both written by
//! `draw_advance.lua` and stamped by the Redis clock. Its `purchase_until`
//! is the record's `emitted_at` plus `purchase_seconds`, to the millisecond.
//! It lasts `purchase_seconds` of time during which an order could be
//! placed: every stall the log holds (`WindowsExtended`: the sale paused,
//! the log down, Redis out of reach, ranks past the first step still being
//! granted) that starts while the window is open moves its end by the
//! stall's length ([`extended_end`]). `admit.lua` judges the window on the
//! same clock, so the end recomputed here is the one it applied.
//!
//! The times of orders are the admitting ingress's (`DrawWinUsed` is
//! stamped before the Redis call), so comparisons of an order with a Redis
//! time allow [`CLOCK_SKEW`] either way; the Redis times among themselves
//! are compared exactly.

use std::collections::{BTreeMap, HashSet};

use chrono::{DateTime, Duration, SecondsFormat, Utc};
use seckill_core::draw::RANK_CHUNK;
use seckill_core::event::StallReason;
use seckill_core::ids::{OrderId, UserId};
use serde_json::json;

use super::Check;
use crate::sale::VoucherLog;
use crate::wording::{plural, with_example};

/// How far an ingress's clock may be from the Redis clock: the bound on
/// how much earlier than its admission an order's stamp may read.
pub(crate) const CLOCK_SKEW: Duration = Duration::seconds(2);

/// A logged stall: nobody could order from `from` to `until` (Redis clock).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Stall {
    pub(crate) from: DateTime<Utc>,
    pub(crate) until: DateTime<Utc>,
    pub(crate) reason: StallReason,
    /// When the record was written: the call that saw the stall end.
    pub(crate) logged_at: DateTime<Utc>,
}

/// The log's stalls, by start.
pub(crate) fn stalls(log: &VoucherLog) -> Vec<Stall> {
    let mut stalls: Vec<Stall> = log
        .stalls
        .values()
        .map(|logged| Stall {
            from: logged.record.from,
            until: logged.record.until,
            reason: logged.record.reason,
            logged_at: logged.emitted_at,
        })
        .collect();
    stalls.sort_by_key(|stall| (stall.from, stall.until));
    stalls.dedup();
    stalls
}

/// Where a window opened at `opened` and due at `due` really ends: each
/// stall starting at or after its opening and before its (moved) end moves
/// it by the stall's length, as the scripts' window clock does.
pub(crate) fn extended_end(opened: DateTime<Utc>, due: DateTime<Utc>, stalls: &[Stall]) -> DateTime<Utc> {
    let mut end = due;
    for stall in stalls {
        if stall.from >= opened && stall.from < end && stall.until > stall.from {
            end += stall.until - stall.from;
        }
    }
    end
}

/// What is wrong with the stalls themselves, if anything: one ending
/// before it starts, logged before it ended, or overlapping the next.
pub(crate) fn stall_fault(stalls: &[Stall]) -> Option<String> {
    for stall in stalls {
        if stall.until < stall.from {
            return Some(format!("a stall ends at {} before it starts at {}", ms(stall.until), ms(stall.from)));
        }
        if stall.logged_at < stall.until {
            return Some(format!(
                "a stall until {} was logged at {}, before it ended",
                ms(stall.until),
                ms(stall.logged_at)
            ));
        }
    }
    stalls
        .windows(2)
        .find(|pair| pair[1].from < pair[0].until)
        .map(|pair| format!("the stalls from {} and from {} overlap", ms(pair[0].from), ms(pair[1].from)))
}

/// One win's window, as the log grants it.
#[derive(Clone, Copy, Debug)]
struct Window {
    rank: u64,
    /// The granting record's `emitted_at`.
    opened: DateTime<Utc>,
    /// Its `purchase_until` moved by the stalls.
    ends: DateTime<Utc>,
}

/// Every window the log grants, by rank: the selection's for 1..=W, each
/// promotion's for its rank (of a rank granted twice, which the `winners`
/// check fails, the window ending last).
fn windows(log: &VoucherLog, stalls: &[Stall]) -> BTreeMap<u64, Window> {
    let draw = &log.draw;
    let mut windows = BTreeMap::new();
    if let Some(selection) = draw.selection() {
        let (opened, due) = (selection.emitted_at, selection.record.purchase_until);
        let ends = extended_end(opened, due, stalls);
        for rank in 1..=selection.record.winners {
            windows.insert(rank, Window { rank, opened, ends });
        }
    }
    for promotion in draw.promotions() {
        let (opened, due) = (promotion.emitted_at, promotion.record.purchase_until);
        let rank = promotion.record.rank;
        let window = Window { rank, opened, ends: extended_end(opened, due, stalls) };
        let kept = windows.entry(rank).or_insert(window);
        if window.ends > kept.ends {
            *kept = window;
        }
    }
    windows
}

/// Each window's `purchase_until` is its record's time plus the draw's
/// `purchase_seconds`, and the stalls that lengthen windows are sound.
pub(super) fn window_lengths(log: &VoucherLog) -> Check {
    const CHECK: (&str, &str) = ("window_lengths", "every window = its record's time + purchase_seconds");
    let Some(purchase) = purchase(log) else {
        return Check::new(CHECK, false, "the log defines no draw for this voucher".to_owned(), json!({}));
    };
    let stalls = stalls(log);
    let draw = &log.draw;
    let mut records: Vec<(String, DateTime<Utc>, DateTime<Utc>)> = Vec::new();
    if let Some(selection) = draw.selection() {
        records.push(("the selection".to_owned(), selection.emitted_at, selection.record.purchase_until));
    }
    for promotion in draw.promotions() {
        let name = format!("the promotion of rank {}", promotion.record.rank);
        records.push((name, promotion.emitted_at, promotion.record.purchase_until));
    }
    let mut wrong = 0u64;
    let mut example = None;
    for (name, at, until) in &records {
        let expected = *at + purchase;
        if until.timestamp_millis() != expected.timestamp_millis() {
            wrong += 1;
            example.get_or_insert_with(|| {
                format!("{name} at {} gives until {}, not {}", ms(*at), ms(*until), ms(expected))
            });
        }
    }
    let fault = stall_fault(&stalls);
    let uncovered = uncovered_pauses(log, &stalls);
    if let Some((from, until)) = uncovered.first() {
        example.get_or_insert_with(|| {
            format!("the sale was paused from {} to {} with windows open, and no stall logged", ms(*from), ms(*until))
        });
    }
    let pass = wrong == 0 && fault.is_none() && uncovered.is_empty();
    let stalled: Duration = stalls.iter().map(|stall| stall.until - stall.from).sum();
    let mut detail = format!(
        "{} of {} s each: {wrong} of another length; {} logged ({} ms in all)",
        plural(records.len() as u64, "window"),
        purchase.num_seconds(),
        plural(stalls.len() as u64, "stall"),
        stalled.num_milliseconds()
    );
    if !uncovered.is_empty() {
        detail.push_str(&format!(
            "; {} with windows open not logged as a stall",
            plural(uncovered.len() as u64, "pause")
        ));
    }
    if let Some(fault) = &fault {
        detail.push_str(&format!("; {fault}"));
    }
    with_example(&mut detail, pass, example);
    Check::new(
        CHECK,
        pass,
        detail,
        json!({
            "windows": records.len(),
            "purchase_seconds": purchase.num_seconds(),
            "wrong_length": wrong,
            "stalls": stalls.len(),
            "stalled_ms": stalled.num_milliseconds(),
            "stalls_unsound": fault.is_some(),
            "pauses_not_logged": uncovered.len(),
        }),
    )
}

/// The pauses the log holds (`VoucherUpdated`, stamped by the ingress that
/// took the admin's request) that lasted over twice [`CLOCK_SKEW`] while a
/// window was open, and that no logged stall covers (within the skew at
/// each end): a pause that ate the windows.
fn uncovered_pauses(log: &VoucherLog, stalls: &[Stall]) -> Vec<(DateTime<Utc>, DateTime<Utc>)> {
    let mut updates: Vec<(DateTime<Utc>, bool)> =
        log.updates.values().filter_map(|update| Some((update.emitted_at, update.paused?))).collect();
    updates.sort();
    let windows = windows(log, stalls);
    let mut spent: BTreeMap<u64, DateTime<Utc>> = BTreeMap::new();
    for used in log.draw.wins_used.values() {
        let at = spent.entry(used.record.rank).or_insert(used.emitted_at);
        *at = (*at).min(used.emitted_at);
    }
    let mut uncovered = Vec::new();
    let mut paused_at = None;
    for (at, paused) in updates {
        match (paused, paused_at) {
            (true, None) => paused_at = Some(at),
            (false, Some(from)) => {
                paused_at = None;
                let (start, end) = (from + CLOCK_SKEW, at - CLOCK_SKEW);
                let open = windows.values().any(|window| {
                    window.opened < from
                        && window.ends > start
                        && spent.get(&window.rank).is_none_or(|used| *used > from)
                });
                let covered = stalls.iter().any(|stall| stall.from <= start && stall.until >= end);
                if end > start && open && !covered {
                    uncovered.push((from, at));
                }
            }
            _ => {}
        }
    }
    uncovered
}

/// Every win was spent on an order placed before its window, lengthened by
/// the stalls, ended.
pub(super) fn wins_in_window(log: &VoucherLog) -> Check {
    const CHECK: (&str, &str) = ("wins_in_window", "every win spent before its window ended");
    let stalls = stalls(log);
    let windows = windows(log, &stalls);
    let (mut late, mut no_window) = (0u64, 0u64);
    let mut example = None;
    let mut latest_margin: Option<Duration> = None;
    for used in log.draw.wins_used.values() {
        let rank = used.record.rank;
        let Some(window) = windows.get(&rank) else {
            // A rank that never won: the `orders` check says so.
            no_window += 1;
            continue;
        };
        let margin = window.ends - used.emitted_at;
        latest_margin = Some(latest_margin.map_or(margin, |kept| kept.min(margin)));
        if used.emitted_at >= window.ends + CLOCK_SKEW || used.emitted_at + CLOCK_SKEW < window.opened {
            late += 1;
            example.get_or_insert_with(|| {
                format!(
                    "order {} of {} spent rank {rank} at {}, its window {}..{}",
                    used.record.order_id,
                    used.record.user_id,
                    ms(used.emitted_at),
                    ms(window.opened),
                    ms(window.ends)
                )
            });
        }
    }
    let pass = late == 0;
    let mut detail = format!(
        "{} spent: {late} outside the window (±{} s of clock), {no_window} of a rank without a window",
        plural(log.draw.wins_used.len() as u64, "win"),
        CLOCK_SKEW.num_seconds()
    );
    with_example(&mut detail, pass, example);
    Check::new(
        CHECK,
        pass,
        detail,
        json!({
            "wins_used": log.draw.wins_used.len(),
            "outside_window": late,
            "without_window": no_window,
            "least_margin_ms": latest_margin.map(|margin| margin.num_milliseconds()),
        }),
    )
}

/// Each promotion was needed: at its time, the wins still open (granted
/// before, window not over, not spent) times the per-user limit were fewer
/// than the units left, as `draw_advance.lua` requires.
///
/// The units left are bounded from above (the stock, every unit added,
/// every unit that came back by then, less the orders surely admitted
/// before: stamped more than [`CLOCK_SKEW`] earlier) and the open wins from
/// below (a win counts as spent once its order is stamped), so a promotion
/// fails only when it was unneeded whatever the clocks.
pub(super) fn promotions_needed(log: &VoucherLog) -> Check {
    const CHECK: (&str, &str) = ("promotions_needed", "every promotion needed: open wins × limit < units left");
    let stalls = stalls(log);
    let windows = windows(log, &stalls);
    let per_win = log.definition.as_ref().map_or(1, |definition| u64::from(definition.per_user_limit.max(1)));
    let stock = log.initial_stock() + log.added_stock();
    // Each win's first use by its holder: when, and the order it admitted
    // (a use of a rank that did not win, or by another user, fails the
    // `orders` check).
    let mut first_use: BTreeMap<u64, (DateTime<Utc>, OrderId)> = BTreeMap::new();
    let own_win = |rank: u64, user: &UserId| windows.contains_key(&rank) && published_at(log, rank) == Some(user);
    for used in log.draw.wins_used.values().filter(|used| own_win(used.record.rank, &used.record.user_id)) {
        let this = (used.emitted_at, used.record.order_id);
        let kept = first_use.entry(used.record.rank).or_insert(this);
        *kept = (*kept).min(this);
    }
    let mut promotions = log.draw.promotions();
    promotions.sort_by_key(|promotion| (promotion.emitted_at, promotion.record.rank));
    let mut seen = HashSet::new();
    let mut unneeded = 0u64;
    let mut example = None;
    for promotion in &promotions {
        let (at, rank) = (promotion.emitted_at, promotion.record.rank);
        if !seen.insert(rank) {
            continue;
        }
        // Open at `at`: granted before it (or earlier in the same call, by
        // rank), not over, not spent by then.
        let open = windows
            .values()
            .filter(|window| window.rank != rank)
            .filter(|window| window.opened < at || (window.opened == at && window.rank < rank))
            .filter(|window| window.ends > at)
            .filter(|window| first_use.get(&window.rank).is_none_or(|(used, _)| *used > at))
            .count() as u64;
        let left = units_left_at_most(log, stock, &first_use, at);
        if open * per_win >= left {
            unneeded += 1;
            example.get_or_insert_with(|| {
                format!(
                    "rank {rank} ({}) promoted at {} while {open} wins were open for {} left",
                    promotion.record.user_id,
                    ms(at),
                    plural(left, "unit")
                )
            });
        }
    }
    let pass = unneeded == 0;
    let mut detail = format!(
        "{}, {per_win} units a win: {unneeded} while the open wins covered the units left",
        plural(seen.len() as u64, "promotion")
    );
    with_example(&mut detail, pass, example);
    Check::new(CHECK, pass, detail, json!({"promoted": seen.len(), "units_a_win": per_win, "unneeded": unneeded}))
}

/// The most units Redis can have had left at `at`: the stock and every
/// addition, plus every unit that came back by then, less the units of the
/// wins' first orders admitted surely before it. (Orders beyond those, an
/// order without a win or a win spent twice, fail the `orders` check; here
/// they are not counted, which can only leave more units.)
fn units_left_at_most(
    log: &VoucherLog,
    stock: u64,
    first_use: &BTreeMap<u64, (DateTime<Utc>, OrderId)>,
    at: DateTime<Utc>,
) -> u64 {
    let (mut taken, mut returned) = (0u64, 0u64);
    for (used_at, order_id) in first_use.values() {
        let order = log.orders.get(order_id).filter(|order| order.accepted.is_some());
        if let (Some(order), true) = (order, *used_at + CLOCK_SKEW < at) {
            taken += u64::from(order.quantity);
        }
    }
    for order in log.orders.values().filter(|order| order.accepted.is_some()) {
        let back = order.cancellations.iter().chain(
            order.decisions.iter().filter(|decision| matches!(decision.kind, crate::sale::OutcomeKind::Failed(_))),
        );
        if back.map(|outcome| outcome.at).min().is_some_and(|first| first < at + CLOCK_SKEW) {
            returned += u64::from(order.quantity);
        }
    }
    (stock + returned).saturating_sub(taken)
}

/// The user the logged ranking puts at `rank`.
fn published_at(log: &VoucherLog, rank: u64) -> Option<&UserId> {
    let chunk = log.draw.ranked.get(&(rank.checked_sub(1)? / RANK_CHUNK as u64))?;
    chunk.record.users.get(usize::try_from(rank.checked_sub(chunk.record.first_rank)?).ok()?)
}

/// The draw's `purchase_seconds`, from the definition.
fn purchase(log: &VoucherLog) -> Option<Duration> {
    let settings = log.definition.as_ref()?.draw.as_ref()?;
    Some(Duration::seconds(i64::from(settings.purchase_seconds)))
}

/// A time as the details show it: UTC, milliseconds.
pub(crate) fn ms(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Millis, true)
}
