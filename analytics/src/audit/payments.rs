//! The rules a sale that takes money must satisfy, from the log alone
//! (see the decision table in `seckill_core::decision`), and against the
//! payment provider when the audit is given one.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use seckill_core::event::{CancelReason, RefundReason};
use seckill_core::ids::OrderId;
use seckill_core::money::Currency;
use serde_json::json;

use super::provider::{ProviderFigures, ProviderIntent};
use super::RuleResult;
use crate::sale::{Money, OrderLog, OutcomeKind, PaymentLog, Position, Settlement, Totals, VoucherLog};
use crate::wording::{plural, with_example};

/// Every payment reported either paid the one order it was made for and
/// was kept, or was refunded exactly once.
pub(super) fn payments_settled(log: &VoucherLog) -> RuleResult {
    const RULE: (&str, &str) = ("payments_settled", "every payment paid its order or was refunded once");
    let mut counts: BTreeMap<Settlement, u64> = BTreeMap::new();
    for payment in log.payments.values() {
        *counts.entry(payment.settlement()).or_default() += 1;
    }
    let count = |settlement| counts.get(&settlement).copied().unwrap_or(0);
    let reported = log.payments.values().filter(|payment| payment.is_reported()).count() as u64;
    let problems = [
        (Settlement::RefundPending, "refund_pending", "refund requested and not done (pending)"),
        (Settlement::RefundedMoreThanOnce, "refunded_more_than_once", "refunded more than once"),
        (Settlement::PaidWrongly, "paid_another_or_second_order", "paid another or a second order"),
        (Settlement::Undecided, "neither_paid_nor_refunded", "neither paid an order nor refunded"),
        (Settlement::Unreported, "never_reported", "named but never reported by a PaymentReceived"),
    ];
    let found: Vec<String> = problems
        .iter()
        .filter(|(settlement, _, _)| count(*settlement) > 0)
        .map(|(settlement, _, words)| format!("{} {words}", count(*settlement)))
        .collect();
    let pass = found.is_empty();
    let mut detail = format!(
        "{} reported: {} paid their order and kept, {} refunded once; ",
        plural(reported, "payment"),
        count(Settlement::Kept),
        count(Settlement::Refunded)
    );
    detail.push_str(&if pass { "none unsettled".to_owned() } else { found.join(", ") });
    let mut figures = json!({
        "payments": reported,
        "kept": count(Settlement::Kept),
        "refunded_once": count(Settlement::Refunded),
    });
    for (settlement, name, _) in problems {
        figures[name] = count(settlement).into();
    }
    RuleResult::new(RULE, pass, detail, figures)
}

/// No order was paid by two payments, and every paid order an admin
/// refunded had its payment refunded exactly once.
pub(super) fn no_order_paid_twice(log: &VoucherLog) -> RuleResult {
    const RULE: (&str, &str) = ("no_order_paid_twice", "no order paid twice; an admin refund refunds its payment once");
    let paid_by = payments_per_order(log);
    let twice = paid_by.values().filter(|payments| payments.len() > 1).count() as u64;
    let (mut admin, mut not_once) = (0u64, 0u64);
    for (order_id, order) in &log.orders {
        let refunded = order.cancellations.iter().any(|c| c.kind == OutcomeKind::Cancelled(CancelReason::Refunded));
        let payments = paid_by.get(order_id);
        if !refunded || (payments.is_none() && order.amount == 0) {
            continue; // not refunded, or a free claim: no money to give back
        }
        admin += 1;
        let once = match payments.map(|ids| ids.iter().collect::<Vec<_>>()).as_deref() {
            Some([id]) => log.payments.get(**id).is_some_and(|payment| payment.refunds.len() == 1),
            _ => false,
        };
        not_once += u64::from(!once);
    }
    RuleResult::new(
        RULE,
        twice == 0 && not_once == 0,
        format!(
            "{} paid by a payment, {twice} by two or more; {} refunded by an admin, {not_once} of them without \
             exactly one refund of their payment",
            plural(paid_by.len() as u64, "order"),
            plural(admin, "paid order")
        ),
        json!({
            "orders_paid": paid_by.len(),
            "paid_twice": twice,
            "admin_refunded": admin,
            "admin_refunds_not_once": not_once,
        }),
    )
}

/// Every payment that paid an order did so before its `pay_by`, every
/// refund as late is for a payment made at or after it, or for an order
/// that had failed or been cancelled when the payment was decided, and
/// every refund as a duplicate is for an order another payment paid.
pub(super) fn paid_in_time(log: &VoucherLog) -> RuleResult {
    const RULE: (&str, &str) = ("paid_in_time", "orders paid before their pay_by; late refunds were late");
    let (mut in_time, mut without_deadline, mut late_paid) = (0u64, 0u64, 0u64);
    for payment in log.payments.values() {
        for (event_id, order_id) in &payment.paid {
            let Some(order) = log.orders.get(order_id) else { continue };
            let paid_at = order.paid.iter().find(|paid| paid.event_id == *event_id).map(|paid| paid.at);
            match (paid_at, log.pay_by(order)) {
                (Some(paid_at), Some(deadline)) if paid_at < deadline => in_time += 1,
                (Some(_), None) => without_deadline += 1,
                _ => late_paid += 1,
            }
        }
    }
    let (mut late_refunds, mut unjustified) = (0u64, 0u64);
    for payment in log.payments.values() {
        let late = payment.refund_requests.values().filter(|request| request.reason == RefundReason::Late);
        let Some(first) = late.map(|request| request.position).min() else { continue };
        late_refunds += 1;
        let order = payment.order_id.and_then(|order_id| log.orders.get(&order_id));
        let justified = order.is_some_and(|order| {
            let paid_late = payment.paid_at().zip(log.pay_by(order)).is_some_and(|(paid, deadline)| paid >= deadline);
            paid_late || closed_before(order, first)
        });
        unjustified += u64::from(!justified);
    }
    // A duplicate is a second payment: its order was paid by another one.
    let (mut duplicates, mut lone_duplicates) = (0u64, 0u64);
    for (id, payment) in &log.payments {
        if !payment.refund_requests.values().any(|request| request.reason == RefundReason::Duplicate) {
            continue;
        }
        duplicates += 1;
        let paid_by_another = payment.order_id.is_some_and(|order_id| {
            log.payments.iter().any(|(other, paying)| other != id && paying.paid.values().any(|paid| *paid == order_id))
        });
        lone_duplicates += u64::from(!paid_by_another);
    }
    RuleResult::new(
        RULE,
        late_paid == 0 && unjustified == 0 && lone_duplicates == 0,
        format!(
            "{in_time} paid before their pay_by ({without_deadline} without one), {late_paid} at or after it; \
             {} refunded as late, {unjustified} of them paid in time for a payable order; {} refunded as a \
             duplicate, {lone_duplicates} of them for an order no other payment paid",
            plural(late_refunds, "payment"),
            plural(duplicates, "payment")
        ),
        json!({
            "paid_in_time": in_time,
            "paid_without_deadline": without_deadline,
            "paid_late": late_paid,
            "refunded_late": late_refunds,
            "late_refunds_unjustified": unjustified,
            "refunded_duplicate": duplicates,
            "duplicate_refunds_unjustified": lone_duplicates,
        }),
    )
}

/// Every order owes its voucher's price × quantity, every payment that
/// paid an order is for that amount and currency, and every refund gives
/// back exactly its payment.
pub(super) fn amounts_match(log: &VoucherLog) -> RuleResult {
    const RULE: (&str, &str) = ("amounts_match", "amounts: price × quantity, paid in full, refunded in full");
    let Some(definition) = &log.definition else {
        return RuleResult::new(RULE, false, "the log has no VoucherCreated for this voucher".to_owned(), json!({}));
    };
    let currency = definition.currency.filter(|_| definition.price > 0);
    let wrong_orders = log
        .orders
        .values()
        .filter(|order| {
            let owed = definition.price.checked_mul(u64::from(order.quantity));
            owed != Some(order.amount) || order.currency != currency
        })
        .count() as u64;
    let (mut paying, mut wrong_payments, mut refunds, mut wrong_refunds) = (0u64, 0u64, 0u64, 0u64);
    let (mut mismatches, mut false_mismatches) = (0u64, 0u64);
    for payment in log.payments.values() {
        let orders = payment.orders_paid();
        if !orders.is_empty() {
            paying += 1;
            let matches = |order_id: &OrderId| {
                log.orders.get(order_id).is_some_and(|order| {
                    payment.is_reported() && payment.amount == order.amount && payment.currency == order.currency
                })
            };
            wrong_payments += u64::from(!orders.iter().all(matches));
        }
        let gives_back =
            |amount: u64, currency: Currency| amount == payment.amount && Some(currency) == payment.currency;
        let requested = payment.refund_requests.values().map(|request| (request.amount, request.currency));
        let done = payment.refunds.values().map(|refund| (refund.amount, refund.currency));
        for (amount, currency) in requested.chain(done) {
            refunds += 1;
            wrong_refunds += u64::from(!gives_back(amount, currency));
        }
        // Refunded for the wrong amount: it must really differ from what
        // the order owes, or a right payment was given back by mistake.
        if payment.refund_requests.values().any(|request| request.reason == RefundReason::AmountMismatch) {
            mismatches += 1;
            let order = payment.order_id.and_then(|order_id| log.orders.get(&order_id));
            let differs =
                order.is_none_or(|order| payment.amount != order.amount || payment.currency != order.currency);
            false_mismatches += u64::from(!differs);
        }
    }
    let price = match currency {
        Some(currency) => Money::new(currency, definition.price).to_string(),
        None => "free".to_owned(),
    };
    RuleResult::new(
        RULE,
        wrong_orders == 0 && wrong_payments == 0 && wrong_refunds == 0 && false_mismatches == 0,
        format!(
            "price {price}; orders at price × quantity: {} of {}; payments at their order's amount: {} of {paying}; \
             refund records at their payment's amount: {} of {refunds}; refunded for the wrong amount: {} of \
             {mismatches} really wrong",
            log.orders.len() as u64 - wrong_orders,
            log.orders.len(),
            paying - wrong_payments,
            refunds - wrong_refunds,
            mismatches - false_mismatches
        ),
        json!({
            "orders": log.orders.len(),
            "orders_wrong": wrong_orders,
            "paying_payments": paying,
            "payments_wrong": wrong_payments,
            "refund_records": refunds,
            "refunds_wrong": wrong_refunds,
            "refunded_amount_mismatch": mismatches,
            "amount_mismatch_refunds_unjustified": false_mismatches,
        }),
    )
}

/// The provider agrees with the log: every payment the log kept succeeded
/// there and was not refunded, every payment it refunded was refunded in
/// full there, no succeeded payment for one of its orders is missing from
/// the log, and the paid and refunded sums per currency are the same.
pub(super) fn provider_agrees(log: &VoucherLog, provider: &ProviderFigures) -> RuleResult {
    const RULE: (&str, &str) = ("provider_agrees", "the payment provider agrees with the log");
    let (mut kept, mut refunded, mut unsettled, mut unknown, mut differing) = (0u64, 0u64, 0u64, 0u64, 0u64);
    let mut example: Option<String> = None;
    for (id, payment) in &log.payments {
        let Some(intent) = provider.retrieved.get(id).and_then(Option::as_ref) else {
            unknown += 1;
            example.get_or_insert_with(|| format!("{id} unknown to the provider"));
            continue;
        };
        let agrees = match payment.settlement() {
            Settlement::Kept => {
                kept += 1;
                intent.succeeded() && intent.amount_refunded == Some(0)
            }
            Settlement::Refunded => {
                refunded += 1;
                intent.succeeded() && intent.amount_refunded == Some(intent.amount)
            }
            _ => {
                unsettled += 1;
                true
            }
        };
        if !agrees {
            differing += 1;
            example.get_or_insert_with(|| describe(id, payment, intent));
        }
    }
    // Every intent the provider answered, each once: retrieved by id or
    // found by searching an order.
    let mut intents: BTreeMap<&str, &ProviderIntent> = BTreeMap::new();
    for intent in provider.by_order.values().flatten().chain(provider.retrieved.values().flatten()) {
        intents.insert(&intent.id, intent);
    }
    let missed: Vec<&str> = intents
        .values()
        .filter(|intent| intent.succeeded())
        .filter(|intent| !log.payments.get(&intent.id).is_some_and(PaymentLog::is_reported))
        .map(|intent| intent.id.as_str())
        .collect();
    if let Some(first) = missed.first() {
        example.get_or_insert_with(|| format!("{first} succeeded and is not in the log"));
    }
    let ours = log.revenue().by_currency;
    let mut theirs: BTreeMap<Option<Currency>, Totals> = BTreeMap::new();
    for intent in intents.values().filter(|intent| intent.succeeded()) {
        let totals = theirs.entry(intent.currency).or_default();
        totals.paid = totals.paid.saturating_add(intent.amount);
        totals.refunded = totals.refunded.saturating_add(intent.amount_refunded.unwrap_or(0));
    }
    let ours: BTreeMap<Option<Currency>, Totals> = ours.into_iter().map(|(c, totals)| (Some(c), totals)).collect();
    let sums_agree = ours == theirs;
    let pass = unknown == 0 && differing == 0 && missed.is_empty() && sums_agree;
    let sums = |side: &BTreeMap<Option<Currency>, Totals>| {
        let shown: Vec<String> = side
            .iter()
            .map(|(currency, totals)| match currency {
                Some(currency) => format!(
                    "paid {} refunded {}",
                    Money::new(*currency, totals.paid),
                    Money::new(*currency, totals.refunded)
                ),
                None => format!("paid {} refunded {} in an unknown currency", totals.paid, totals.refunded),
            })
            .collect();
        if shown.is_empty() {
            "nothing paid".to_owned()
        } else {
            shown.join(", ")
        }
    };
    let mut detail = format!(
        "{} in the log: {kept} kept, {refunded} refunded, {unsettled} unsettled; {differing} differ at the \
         provider, {unknown} unknown to it; {} searched, {} succeeded there missing from the log; ",
        plural(log.payments.len() as u64, "payment"),
        plural(provider.by_order.len() as u64, "order"),
        missed.len()
    );
    if sums_agree {
        detail.push_str(&format!("{} on both sides", sums(&ours)));
    } else {
        detail.push_str(&format!("log {} ≠ provider {}", sums(&ours), sums(&theirs)));
    }
    with_example(&mut detail, pass, example);
    let totals = |side: &BTreeMap<Option<Currency>, Totals>| -> serde_json::Value {
        side.iter()
            .map(|(currency, totals)| {
                let code = currency.map_or_else(|| "unknown".to_owned(), |c| c.as_str().to_owned());
                (code, json!({"paid": totals.paid, "refunded": totals.refunded}))
            })
            .collect::<serde_json::Map<_, _>>()
            .into()
    };
    RuleResult::new(
        RULE,
        pass,
        detail,
        json!({
            "payments": log.payments.len(),
            "kept": kept,
            "refunded": refunded,
            "unsettled": unsettled,
            "unknown_to_provider": unknown,
            "differing": differing,
            "orders_searched": provider.by_order.len(),
            "missing_from_log": missed.len(),
            "log": totals(&ours),
            "provider": totals(&theirs),
        }),
    )
}

/// How a payment and the provider's intent differ, for the detail.
fn describe(id: &str, payment: &PaymentLog, intent: &ProviderIntent) -> String {
    let refunded = intent.amount_refunded.map_or_else(|| "unknown".to_owned(), |amount| amount.to_string());
    let log = match payment.settlement() {
        Settlement::Refunded => "refunded",
        _ => "kept",
    };
    format!("{id}: {log} in the log, {} with {refunded} of {} refunded at the provider", intent.status, intent.amount)
}

/// The distinct payments `OrderPaid` events name for each order.
fn payments_per_order(log: &VoucherLog) -> HashMap<OrderId, BTreeSet<&str>> {
    let mut paid_by: HashMap<OrderId, BTreeSet<&str>> = HashMap::new();
    for (id, payment) in &log.payments {
        for order_id in payment.paid.values() {
            paid_by.entry(*order_id).or_default().insert(id.as_str());
        }
    }
    paid_by
}

/// Whether `order` had failed or been cancelled on the orders topic
/// before `position`: it was not payable when a payment was decided there.
fn closed_before(order: &OrderLog, position: Position) -> bool {
    let failed = order.decisions.iter().any(|d| matches!(d.kind, OutcomeKind::Failed(_)) && d.position < position);
    failed || order.cancellations.iter().any(|c| c.position < position)
}
