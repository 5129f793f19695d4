//! Each rule on a clean scripted sale, and each corruption breaking
//! exactly the rule it should.

use std::collections::HashMap;

use seckill_core::event::{CancelReason, Event, OrderPaid};
use seckill_core::Envelope;
use seckill_store::VoucherView;

use super::*;
use crate::sale::script::{at, busy_sale, Script};

fn failing(audit: &VoucherAudit) -> Vec<&'static str> {
    audit.failed().map(|rule| rule.rule).collect()
}

/// The detail of `audit`'s rule `rule`.
fn detail<'a>(audit: &'a VoucherAudit, rule: &str) -> &'a str {
    audit.rules.iter().find(|r| r.rule == rule).map(|r| r.detail.as_str()).unwrap_or_else(|| panic!("{rule}"))
}

/// `audit` as `seckill audit` prints it.
fn text(audit: &VoucherAudit) -> String {
    Audit::new(vec![audit.clone()], false).text()
}

mod draw;
mod payments;
mod provider;
mod queue;
mod queue_windows;

/// What the live stores hold when they agree with the log.
fn agreeing(sale: &Script) -> LiveFigures {
    let books = sale.log.books();
    let definition = sale.log.definition.clone().expect("defined");
    let bought = sale.log.units_admitted_per_user().into_iter().map(|(user, units)| (user.to_string(), units));
    LiveFigures {
        view: Some(VoucherView {
            voucher_id: sale.voucher,
            stock: books.offered,
            remaining: books.offered - books.units_sold,
            per_user_limit: definition.per_user_limit,
            begins_at: definition.begins_at,
            ends_at: definition.ends_at,
            payment_seconds: definition.hold_seconds,
            hold_seconds: definition.hold_seconds,
            title: definition.title.clone(),
            description: definition.description.clone(),
            price: definition.price,
            currency: definition.currency,
            paused: false,
            admitted: books.orders,
            created: books.created,
            paid: books.paid,
            failed: books.failed,
            cancelled: books.cancelled - books.refunded,
            refunded: books.refunded,
            revenue: books.paid_amount - books.refunded_amount,
        }),
        stock: Some(StockFigures { stock: books.offered, remaining: books.units_left.expect("defined") }),
        gate: Some(GateFigures {
            stock: books.offered,
            remaining: u64::try_from(books.admission_left).expect("not oversold"),
            bought: bought.collect(),
        }),
        outbox: Vec::new(),
    }
}

#[test]
fn a_clean_sale_passes_every_rule() {
    let sale = busy_sale();
    let audit = audit_voucher(&sale.log, None);
    assert!(audit.pass, "{}", Audit::new(vec![audit.clone()], false).text());
    assert_eq!(audit.rules.len(), 5);
    let live = audit_voucher(&sale.log, Some(&agreeing(&sale)));
    assert!(live.pass, "{}", Audit::new(vec![live.clone()], true).text());
    assert_eq!(live.rules.len(), 8);
    let balance = &live.rules[0];
    assert_eq!((balance.rule, balance.detail.as_str()), ("stock_balance", "4 + 2 = 6 sold + 0 left"));
    assert_eq!(live.rules[4].detail, "3 returned = 3 re-sold + 0 left");
}

#[test]
fn cancels_that_overtook_their_orders_are_dated_where_the_processor_decided_them() {
    // Every buyer cancels right after the 202, and each cancel overtakes its
    // order through the outbox: the request is on the sales topic before the
    // acceptance, the processor parks it and decides it right after the
    // order. Zoe's request with an expiry was ignored (her order was paid),
    // her own later cancel returned the unit.
    let mut sale = Script::new(3, 1, 60);
    for (i, user) in ["ann", "ben", "cat"].into_iter().enumerate() {
        let ms = 100 * i as i64;
        let order = sale.admitted(user, 1, ms);
        sale.request_cancel(&order, ms + 1, CancelReason::Requested);
        sale.relayed(&order);
        sale.decide(&order, ms + 10);
        sale.cancelled(&order, ms + 11, CancelReason::Requested);
    }
    let zoe = sale.accept("zoe", 1, 500);
    sale.decide(&zoe, 510);
    sale.confirm(&zoe, 520);
    sale.request_cancel(&zoe, 600, CancelReason::Expired);
    let eve = sale.admitted("eve", 1, 700);
    sale.request_cancel(&eve, 701, CancelReason::Requested);
    sale.cancel(&zoe, 800, CancelReason::Requested);
    sale.relayed(&eve);
    sale.decide(&eve, 810);
    sale.cancelled(&eve, 811, CancelReason::Requested);

    let books = sale.log.books();
    assert_eq!((books.units_sold, books.units_left), (0, Some(3)), "{books:?}");
    // The live stores as the processor left them (not as the books say).
    let mut live = agreeing(&sale);
    live.stock = Some(StockFigures { stock: books.offered, remaining: sale.left });
    let audit = audit_voucher(&sale.log, Some(&live));
    assert!(audit.pass, "{}", Audit::new(vec![audit.clone()], true).text());
    let timeline = crate::sale::Timeline::of(&sale.sale().log, &sale.sale().stats);
    assert_eq!(timeline.stock_left.last().map(|step| step.value), Some(3), "the chart ends with every unit left");
}

#[test]
fn a_second_decision_breaks_only_the_one_decision_rule() {
    let mut sale = busy_sale();
    let (envelope, _) = sale
        .records
        .iter()
        .rev()
        .find(|(e, _)| matches!(e.event, Event::OrderCreated(_)))
        .cloned()
        .expect("a creation");
    let again = Envelope::new(envelope.event.clone());
    sale.put(&again, true);
    let audit = audit_voucher(&sale.log, Some(&agreeing(&busy_sale_like(&sale))));
    assert_eq!(failing(&audit), ["one_decision_per_acceptance"]);
    assert!(audit.rules[1].detail.contains("1 decided more than once"), "{}", audit.rules[1].detail);
}

/// The live figures of the sale before it was corrupted: the stores saw
/// the same platform (the corruption is in the log only).
fn busy_sale_like(sale: &Script) -> Script {
    let mut clean = Script::new(0, 1, 0);
    clean.voucher = sale.voucher;
    clean.log = sale.log.clone();
    for order in clean.log.orders.values_mut() {
        order.decisions.truncate(1);
        order.cancellations.truncate(1);
    }
    clean
}

#[test]
fn a_second_cancellation_breaks_only_the_returns_rule() {
    let mut sale = busy_sale();
    let (envelope, _) = sale
        .records
        .iter()
        .find(|(e, _)| matches!(e.event, Event::OrderCancelled(_)))
        .cloned()
        .expect("a cancellation");
    sale.put(&Envelope::new(envelope.event.clone()), true);
    let audit = audit_voucher(&sale.log, Some(&agreeing(&busy_sale_like(&sale))));
    assert_eq!(failing(&audit), ["returns_resold_or_left"]);
    assert_eq!(audit.rules[4].detail, "5 returned ≠ 3 re-sold + 0 left");
}

#[test]
fn a_payment_without_a_creation_breaks_only_its_rule() {
    let mut sale = busy_sale();
    let failed = sale.log.orders.values().find(|o| o.final_status() == crate::sale::FinalStatus::Failed).cloned();
    let failed = failed.expect("grace's order failed");
    let order = seckill_core::event::OrderAccepted {
        order_id: *sale.log.orders.iter().find(|(_, o)| o.user_id == failed.user_id).expect("found").0,
        voucher_id: sale.voucher,
        user_id: failed.user_id.clone(),
        quantity: failed.quantity,
        accepted_at: failed.accepted_at,
        amount: 0,
        currency: None,
        idempotency_key: None,
    };
    let live = agreeing(&sale);
    sale.orders(Event::OrderPaid(OrderPaid { order, paid_at: at(7_000), payment_id: None }));
    let mut live = live;
    if let Some(view) = &mut live.view {
        view.paid += 1;
    }
    let audit = audit_voucher(&sale.log, Some(&live));
    assert_eq!(failing(&audit), ["cancel_confirm_after_creation"]);
    assert!(audit.rules[2].detail.ends_with("1 without a creation before them"), "{}", audit.rules[2].detail);
}

#[test]
fn a_user_over_the_limit_breaks_only_the_limit_rule() {
    let mut sale = Script::new(10, 2, 0);
    for t in [0, 10] {
        let order = sale.accept("greedy", 2, t);
        sale.decide(&order, t + 1);
    }
    let other = sale.accept("fair", 1, 20);
    sale.decide(&other, 21);
    sale.cancel(&other, 30, CancelReason::Requested);
    let audit = audit_voucher(&sale.log, Some(&agreeing(&sale)));
    assert_eq!(failing(&audit), ["per_user_limit"]);
    assert_eq!(audit.rules[3].detail, "limit 2; most held by one user at once: 4 (greedy); 1 user over");
}

#[test]
fn an_undecided_order_and_a_wrong_remaining_are_found() {
    let mut sale = Script::new(5, 1, 0);
    sale.accept("waiting", 1, 0);
    let audit = audit_voucher(&sale.log, None);
    assert_eq!(failing(&audit), ["one_decision_per_acceptance"]);
    assert!(audit.rules[1].detail.contains("1 undecided"));

    let mut sale = Script::new(5, 1, 0);
    let order = sale.accept("a", 1, 0);
    sale.left += 1; // the processor miscounts
    sale.decide(&order, 3);
    let audit = audit_voucher(&sale.log, None);
    assert_eq!(failing(&audit), ["stock_balance", "returns_resold_or_left"]);
    assert_eq!(audit.rules[0].detail, "5 + 0 ≠ 1 sold + 5 left");

    let mut undefined = sale.log.clone();
    undefined.definition = None;
    assert_eq!(
        failing(&audit_voucher(&undefined, None)),
        ["stock_balance", "per_user_limit", "returns_resold_or_left"]
    );
}

#[test]
fn each_live_store_is_compared_on_its_own() {
    let sale = busy_sale();
    let clean = agreeing(&sale);

    let mut view = clean.clone();
    if let Some(row) = &mut view.view {
        row.paid += 1;
    }
    let audit = audit_voucher(&sale.log, Some(&view));
    assert_eq!(failing(&audit), ["view_matches_log"]);
    assert!(audit.rules[5].detail.contains("paid: view 2, log 1"), "{}", audit.rules[5].detail);

    let mut stock = clean.clone();
    stock.stock = Some(StockFigures { stock: 6, remaining: 1 });
    assert_eq!(failing(&audit_voucher(&sale.log, Some(&stock))), ["stock_matches_log"]);

    let mut gate = clean.clone();
    if let Some(gate) = &mut gate.gate {
        gate.remaining = 3;
    }
    let audit = audit_voucher(&sale.log, Some(&gate));
    assert_eq!(failing(&audit), ["gate_matches_log"]);
    assert!(audit.rules[7].detail.starts_with("stock 6 = 6, remaining 3 ≠ 0"), "{}", audit.rules[7].detail);

    let mut user = clean.clone();
    if let Some(gate) = &mut user.gate {
        gate.bought.insert("mallory".to_owned(), 1);
    }
    let audit = audit_voucher(&sale.log, Some(&user));
    assert_eq!(failing(&audit), ["gate_matches_log"]);
    assert!(audit.rules[7].detail.contains("1 differ (e.g. mallory)"), "{}", audit.rules[7].detail);

    let missing = LiveFigures::default();
    let audit = audit_voucher(&sale.log, Some(&missing));
    assert_eq!(failing(&audit), ["view_matches_log", "stock_matches_log", "gate_matches_log"]);
}

#[test]
fn orders_in_the_outbox_count_at_the_gate() {
    let mut sale = Script::new(5, 1, 0);
    let order = sale.accept("ann", 1, 0);
    sale.decide(&order, 2);
    // Ivan was admitted a moment ago; the relay has not published it yet.
    let ivan = seckill_core::event::OrderAccepted {
        order_id: seckill_core::OrderId::generate(),
        voucher_id: sale.voucher,
        user_id: seckill_core::UserId::parse("ivan").expect("valid"),
        quantity: 1,
        accepted_at: at(10),
        amount: 0,
        currency: None,
        idempotency_key: None,
    };
    let mut live = agreeing(&sale);
    if let Some(gate) = &mut live.gate {
        gate.remaining -= 1;
        gate.bought.insert("ivan".to_owned(), 1);
    }
    assert_eq!(failing(&audit_voucher(&sale.log, Some(&live))), ["gate_matches_log"]);
    live.outbox = vec![ivan];
    let audit = audit_voucher(&sale.log, Some(&live));
    assert!(audit.pass, "{}", audit.rules[7].detail);
    assert_eq!(
        audit.rules[7].detail,
        "stock 5 = 5, remaining 3 = 3, units per user: 2 users, 0 differ; 1 order still in the outbox counted"
    );
}

#[test]
fn the_text_and_json_forms_say_the_same() {
    let sale = busy_sale();
    let mut broken = agreeing(&sale);
    broken.stock = Some(StockFigures { stock: 6, remaining: 2 });
    let audit = Audit::new(
        vec![audit_voucher(&sale.log, Some(&agreeing(&sale))), audit_voucher(&sale.log, Some(&broken))],
        true,
    );
    assert!(!audit.pass);
    let text = audit.text();
    assert_eq!(text.lines().filter(|line| line.starts_with("voucher ")).count(), 2, "{text}");
    assert_eq!(text.lines().filter(|line| line.trim_start().starts_with("FAIL")).count(), 1, "{text}");
    assert!(text.contains("FAIL  the persistent stock equals the log's"), "{text}");
    assert!(text.ends_with("2 vouchers audited against the log and the live stores: 1 passes, 1 fails.\n"), "{text}");
    let json = serde_json::to_value(&audit).expect("json");
    assert_eq!(json["pass"], false);
    assert_eq!(json["vouchers"][1]["rules"][6]["rule"], "stock_matches_log");
    assert_eq!(json["vouchers"][1]["rules"][6]["figures"]["remaining"], serde_json::json!({"processor": 2, "log": 0}));
    assert_eq!(json["vouchers"][0]["books"]["units_sold"], 6);
    let _: HashMap<String, serde_json::Value> =
        serde_json::from_value(json["vouchers"][0]["rules"][0]["figures"].clone()).expect("an object");
}
