//! The rules a sale's books must satisfy, each checked on its own so a
//! broken record shows up as exactly the rule it breaks.

use std::collections::{BTreeMap, HashMap};

use seckill_core::event::OrderAccepted;
use serde_json::json;

use super::live::LiveFigures;
use super::RuleResult;
use crate::sale::{Books, OutcomeKind, VoucherLog};
use crate::wording::plural;

/// Stock plus added stock equals units sold plus units left.
pub(super) fn stock_balance(log: &VoucherLog, books: &Books) -> RuleResult {
    const RULE: (&str, &str) = ("stock_balance", "stock + added stock = units sold + units left");
    let Some(left) = books.units_left.filter(|_| log.definition.is_some()) else {
        return RuleResult::new(RULE, false, "the log has no VoucherCreated for this voucher".to_owned(), json!({}));
    };
    let (stock, added, sold) = (books.initial_stock, books.added_stock, books.units_sold);
    let pass = stock + added == sold + left;
    let sign = if pass { "=" } else { "≠" };
    RuleResult::new(
        RULE,
        pass,
        format!("{stock} + {added} {sign} {sold} sold + {left} left"),
        json!({"stock": stock, "added_stock": added, "units_sold": sold, "units_left": left}),
    )
}

/// Every accepted order has exactly one decision, and every decision an
/// acceptance.
pub(super) fn one_decision_per_acceptance(log: &VoucherLog, books: &Books) -> RuleResult {
    const RULE: (&str, &str) = ("one_decision_per_acceptance", "every acceptance has exactly one decision");
    let (mut once, mut undecided, mut more, mut orphans) = (0u64, 0u64, 0u64, 0u64);
    for order in log.orders.values() {
        if order.accepted.is_none() {
            orphans += u64::from(!order.decisions.is_empty());
            continue;
        }
        match order.decisions.len() {
            0 => undecided += 1,
            1 => once += 1,
            _ => more += 1,
        }
    }
    let pass = undecided == 0 && more == 0 && orphans == 0;
    RuleResult::new(
        RULE,
        pass,
        format!(
            "{} accepted: {once} decided once, {undecided} undecided, {more} decided more than once; \
             {orphans} decided without an acceptance",
            books.accepted
        ),
        json!({
            "accepted": books.accepted,
            "decided_once": once,
            "undecided": undecided,
            "decided_more_than_once": more,
            "decided_without_acceptance": orphans,
        }),
    )
}

/// Every cancellation and payment (`OrderPaid`, a free claim included)
/// comes after a creation of the same order on the orders topic. The rule
/// id predates the rename of confirmed to paid and stays stable.
pub(super) fn cancel_confirm_after_creation(log: &VoucherLog) -> RuleResult {
    const RULE: (&str, &str) = ("cancel_confirm_after_creation", "every cancellation and payment follows a creation");
    let (mut cancellations, mut paid, mut without) = (0u64, 0u64, 0u64);
    for order in log.orders.values() {
        let created = order.creation().map(|creation| creation.position);
        for outcome in order.cancellations.iter().chain(&order.paid) {
            match outcome.kind {
                OutcomeKind::Paid => paid += 1,
                _ => cancellations += 1,
            }
            if created.is_none_or(|created| created > outcome.position) {
                without += 1;
            }
        }
    }
    RuleResult::new(
        RULE,
        without == 0,
        format!(
            "{}, {}; {without} without a creation before them",
            plural(cancellations, "cancellation"),
            plural(paid, "payment")
        ),
        json!({"cancellations": cancellations, "paid": paid, "without_creation": without}),
    )
}

/// No user ever held more units than the per-user limit.
pub(super) fn per_user_limit(log: &VoucherLog) -> RuleResult {
    const RULE: (&str, &str) = ("per_user_limit", "no user over the per-user limit");
    let Some(definition) = &log.definition else {
        return RuleResult::new(RULE, false, "the log has no VoucherCreated for this voucher".to_owned(), json!({}));
    };
    let limit = u64::from(definition.per_user_limit);
    let peaks = log.peak_units_per_user();
    let top = peaks.iter().max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)));
    let over = peaks.values().filter(|&&units| units > limit).count() as u64;
    let most = top.map_or(0, |(_, units)| *units);
    let who = top.map(|(user, _)| format!(" ({user})")).unwrap_or_default();
    RuleResult::new(
        RULE,
        over == 0,
        format!("limit {limit}; most held by one user at once: {most}{who}; {} over", plural(over, "user")),
        json!({"limit": limit, "most_held": most, "users_over": over}),
    )
}

/// Units given back by cancellations were sold again or are still left.
pub(super) fn returns_resold_or_left(books: &Books) -> RuleResult {
    const RULE: (&str, &str) = ("returns_resold_or_left", "units returned by cancellations = re-sold + still left");
    let Some(left) = books.units_left else {
        return RuleResult::new(RULE, false, "the log has no VoucherCreated for this voucher".to_owned(), json!({}));
    };
    // Units never sold are the fresh ones on the shelf; whatever else the
    // processor has left came back from a cancellation.
    let returned_left = crate::sale::signed(left) - crate::sale::signed(books.fresh_left);
    let (returned, resold) = (books.returned_units, books.resold_units);
    let pass = returned_left >= 0 && crate::sale::signed(returned) == crate::sale::signed(resold) + returned_left;
    let sign = if pass { "=" } else { "≠" };
    RuleResult::new(
        RULE,
        pass,
        format!("{returned} returned {sign} {resold} re-sold + {returned_left} left"),
        json!({"returned": returned, "resold": resold, "returned_left": returned_left}),
    )
}

/// The view's voucher row equals the log's figures.
pub(super) fn view_matches_log(books: &Books, live: &LiveFigures) -> RuleResult {
    const RULE: (&str, &str) = ("view_matches_log", "the view's figures equal the log's");
    let Some(view) = &live.view else {
        return RuleResult::new(RULE, false, "the view has no such voucher".to_owned(), json!({}));
    };
    let fields = [
        ("stock", view.stock, books.offered),
        ("remaining", view.remaining, books.offered.saturating_sub(books.units_sold)),
        ("orders", view.admitted, books.orders),
        ("created", view.created, books.created),
        ("failed", view.failed, books.failed),
        ("paid", view.paid, books.paid),
        ("cancelled", view.cancelled, books.cancelled.saturating_sub(books.refunded)),
        ("refunded", view.refunded, books.refunded),
        ("revenue", view.revenue, books.paid_amount.saturating_sub(books.refunded_amount)),
    ];
    compare(RULE, &fields, "view")
}

/// The processor's persistent stock equals the log's.
pub(super) fn stock_matches_log(books: &Books, live: &LiveFigures) -> RuleResult {
    const RULE: (&str, &str) = ("stock_matches_log", "the persistent stock equals the log's");
    let Some(stock) = &live.stock else {
        return RuleResult::new(RULE, false, "the processor has no stock for this voucher".to_owned(), json!({}));
    };
    let fields = [("stock", stock.stock, books.offered), ("remaining", stock.remaining, books.units_left.unwrap_or(0))];
    compare(RULE, &fields, "processor")
}

/// Redis (the gate) holds the stock, the units left and each user's count
/// the log implies, counting the orders still in the outbox.
pub(super) fn gate_matches_log(log: &VoucherLog, books: &Books, live: &LiveFigures) -> RuleResult {
    const RULE: (&str, &str) = ("gate_matches_log", "Redis (the gate) equals the log");
    let Some(gate) = &live.gate else {
        return RuleResult::new(RULE, false, "Redis has no such voucher".to_owned(), json!({}));
    };
    let in_outbox: Vec<&OrderAccepted> =
        live.outbox.iter().filter(|order| !log.orders.contains_key(&order.order_id)).collect();
    let outbox_units: u64 = in_outbox.iter().map(|order| u64::from(order.quantity)).sum();
    let mut expected: BTreeMap<String, u64> =
        log.units_admitted_per_user().into_iter().map(|(user, units)| (user.to_string(), units)).collect();
    for order in &in_outbox {
        *expected.entry(order.user_id.to_string()).or_default() += u64::from(order.quantity);
    }
    let held: HashMap<&str, u64> = gate.bought.iter().map(|(user, units)| (user.as_str(), *units)).collect();
    let users =
        expected.keys().map(String::as_str).chain(held.keys().copied()).collect::<std::collections::BTreeSet<_>>();
    let differing: Vec<&str> = users
        .into_iter()
        .filter(|user| held.get(user).copied().unwrap_or(0) != expected.get(*user).copied().unwrap_or(0))
        .collect();
    let remaining = books.admission_left - crate::sale::signed(outbox_units);
    let stock_ok = gate.stock == books.offered;
    let remaining_ok = crate::sale::signed(gate.remaining) == remaining;
    let pass = stock_ok && remaining_ok && differing.is_empty();
    let mark = |ok: bool| if ok { "=" } else { "≠" };
    let mut detail = format!(
        "stock {} {} {}, remaining {} {} {}, units per user: {}, {} differ",
        gate.stock,
        mark(stock_ok),
        books.offered,
        gate.remaining,
        mark(remaining_ok),
        remaining,
        plural(expected.len() as u64, "user"),
        differing.len()
    );
    if let Some(first) = differing.first() {
        detail.push_str(&format!(" (e.g. {first})"));
    }
    if !in_outbox.is_empty() {
        detail.push_str(&format!("; {} still in the outbox counted", plural(in_outbox.len() as u64, "order")));
    }
    RuleResult::new(
        RULE,
        pass,
        detail,
        json!({
            "redis": {"stock": gate.stock, "remaining": gate.remaining},
            "log": {"stock": books.offered, "remaining": remaining},
            "users": expected.len(),
            "users_differing": differing.len(),
            "outbox_orders": in_outbox.len(),
        }),
    )
}

/// A rule that holds when every (live, log) pair is equal.
fn compare(rule: (&'static str, &'static str), fields: &[(&str, u64, u64)], source: &str) -> RuleResult {
    let pass = fields.iter().all(|(_, live, log)| live == log);
    let detail = fields
        .iter()
        .map(
            |(name, live, log)| {
                if live == log {
                    format!("{name} {live}")
                } else {
                    format!("{name}: {source} {live}, log {log}")
                }
            },
        )
        .collect::<Vec<_>>()
        .join(", ");
    let figures: serde_json::Map<String, serde_json::Value> =
        fields.iter().map(|(name, live, log)| ((*name).to_owned(), json!({ source: live, "log": log }))).collect();
    RuleResult::new(rule, pass, detail, serde_json::Value::Object(figures))
}
