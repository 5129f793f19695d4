//! The payment rules on a clean priced sale, and each doctored log
//! breaking exactly the rule it should.

use seckill_core::event::{Event, PaymentRefunded, RefundReason};

use super::{agreeing, detail, failing};
use crate::audit::{audit_voucher, audit_voucher_against, Audit, ProviderFigures, ProviderIntent};
use crate::sale::script::{paid_sale, Script};
use crate::sale::VoucherLog;

const PAYMENT_RULES: [&str; 4] = ["payments_settled", "no_order_paid_twice", "paid_in_time", "amounts_match"];

/// What a provider that agrees with the log answers: every payment
/// succeeded, refunded as much as the log says, and found again by
/// searching its order; the orders nobody paid have no intents.
fn provider_agreeing(log: &VoucherLog) -> ProviderFigures {
    let mut figures = ProviderFigures::default();
    for (order_id, order) in &log.orders {
        if order.amount > 0 {
            figures.by_order.insert(*order_id, Vec::new());
        }
    }
    for (id, payment) in &log.payments {
        let intent = ProviderIntent {
            id: id.clone(),
            order_id: payment.order_id.map(|order| order.to_string()),
            status: "succeeded".to_owned(),
            amount: payment.amount,
            currency: payment.currency,
            amount_refunded: Some(payment.refunded_amount()),
        };
        let order = payment.order_id.expect("made for an order");
        figures.by_order.entry(order).or_default().push(intent.clone());
        figures.retrieved.insert(id.clone(), Some(intent));
    }
    figures
}

/// The detail of `rule` in `audit`.
#[test]
fn a_paid_sale_passes_every_payment_rule() {
    let sale = paid_sale();
    let audit = audit_voucher(&sale.log, None);
    assert!(audit.pass, "{}", Audit::new(vec![audit.clone()], false).text());
    let names: Vec<&str> = audit.rules.iter().map(|rule| rule.rule).collect();
    assert_eq!(names[5..], PAYMENT_RULES, "after the five rules every sale has");
    assert_eq!(
        detail(&audit, "payments_settled"),
        "7 payments reported: 3 paid their order and kept, 4 refunded once; none unsettled"
    );
    assert_eq!(
        detail(&audit, "no_order_paid_twice"),
        "4 orders paid by a payment, 0 by two or more; 1 paid order refunded by an admin, 0 of them without \
         exactly one refund of their payment"
    );
    assert_eq!(
        detail(&audit, "paid_in_time"),
        "4 paid before their pay_by (0 without one), 0 at or after it; 1 payment refunded as late, 0 of them paid \
         in time for a payable order; 1 payment refunded as a duplicate, 0 of them for an order no other payment \
         paid"
    );
    assert_eq!(
        detail(&audit, "amounts_match"),
        "price EUR 12.50; orders at price × quantity: 5 of 5; payments at their order's amount: 4 of 4; refund \
         records at their payment's amount: 9 of 9; refunded for the wrong amount: 1 of 1 really wrong"
    );
    let figures = &audit.rules[5].figures;
    assert_eq!((figures["kept"].as_u64(), figures["refund_pending"].as_u64()), (Some(3), Some(0)));

    // The view counts the admin refund apart and the revenue net of it.
    let live = agreeing(&sale);
    let view = live.view.as_ref().expect("a view");
    assert_eq!((view.paid, view.cancelled, view.refunded, view.revenue), (4, 1, 1, 5_000));
    let provider = provider_agreeing(&sale.log);
    let full = audit_voucher_against(&sale.log, Some(&live), Some(&provider));
    let text = Audit::new(vec![full.clone()], true).against_provider().text();
    assert!(full.pass, "{text}");
    assert_eq!(full.rules.len(), 13, "5 + 4 payment rules, 3 live, 1 provider");
    assert!(text.ends_with("against the log, the live stores and the payment provider: 1 passes, 0 fail.\n"), "{text}");
    assert_eq!(
        detail(&full, "provider_agrees"),
        "7 payments in the log: 3 kept, 4 refunded, 0 unsettled; 0 differ at the provider, 0 unknown to it; 5 orders \
         searched, 0 succeeded there missing from the log; paid EUR 109.99 refunded EUR 59.99 on both sides"
    );
}

#[test]
fn free_sales_get_no_payment_rules() {
    let mut sale = Script::new(3, 1, 0);
    let order = sale.accept("ann", 1, 0);
    sale.decide(&order, 1);
    let audit = audit_voucher_against(&sale.log, None, Some(&ProviderFigures::default()));
    assert!(audit.pass);
    assert_eq!(audit.rules.len(), 5, "nothing to pay, nothing to ask the provider");
}

#[test]
fn a_second_refund_id_for_one_payment_breaks_only_payments_settled() {
    let mut sale = paid_sale();
    let refund = sale.records.iter().find_map(|(envelope, _)| match &envelope.event {
        Event::PaymentRefunded(refund) if refund.payment_id == "pi_c" => Some(refund.clone()),
        _ => None,
    });
    let refund = refund.expect("carol's refund");
    // The same refund delivered again changes nothing...
    sale.orders(Event::PaymentRefunded(refund.clone()));
    assert!(audit_voucher(&sale.log, None).pass);
    // ...a second refund of the same payment is money given back twice.
    sale.orders(Event::PaymentRefunded(PaymentRefunded { refund_id: "re_c2".to_owned(), ..refund }));
    let audit = audit_voucher(&sale.log, None);
    assert_eq!(failing(&audit), ["payments_settled"]);
    assert_eq!(
        detail(&audit, "payments_settled"),
        "7 payments reported: 3 paid their order and kept, 3 refunded once; 1 refunded more than once"
    );
}

#[test]
fn a_refund_not_done_is_pending_and_fails_payments_settled() {
    let mut sale = paid_sale();
    let order = sale.records.iter().find_map(|(envelope, _)| match &envelope.event {
        Event::OrderCreated(created) if created.order.user_id.as_str() == "carol" => Some(created.order.clone()),
        _ => None,
    });
    let order = order.expect("carol's order");
    let again = sale.payment(&order, "pi_c2", 1_250, 63_000);
    sale.refund_requested(&again, RefundReason::Late, 63_010);
    let audit = audit_voucher(&sale.log, None);
    assert_eq!(failing(&audit), ["payments_settled"]);
    assert!(
        detail(&audit, "payments_settled").ends_with("; 1 refund requested and not done (pending)"),
        "{}",
        detail(&audit, "payments_settled")
    );
    sale.refunded(&again, "re_c2", 63_100);
    assert!(audit_voucher(&sale.log, None).pass, "done, it is settled");
}

#[test]
fn an_order_paid_by_two_payments_breaks_only_no_order_paid_twice() {
    let mut sale = Script::priced(3, 1, 60, 500, Some("USD"));
    let order = sale.accept("ann", 1, 0);
    sale.decide(&order, 10);
    sale.pay(&order, "pi_1", 1_000);
    sale.pay(&order, "pi_2", 2_000);
    let audit = audit_voucher(&sale.log, None);
    assert_eq!(failing(&audit), ["no_order_paid_twice"]);
    assert!(detail(&audit, "no_order_paid_twice").starts_with("1 order paid by a payment, 1 by two or more"));

    // An admin refund of a paid order whose payment is never refunded.
    let mut sale = Script::priced(3, 1, 60, 500, Some("USD"));
    let order = sale.accept("bea", 1, 0);
    sale.decide(&order, 10);
    let payment = sale.pay(&order, "pi_3", 1_000);
    sale.cancel(&order, 5_000, seckill_core::event::CancelReason::Refunded);
    let audit = audit_voucher(&sale.log, None);
    assert_eq!(failing(&audit), ["no_order_paid_twice"]);
    assert!(detail(&audit, "no_order_paid_twice").ends_with("1 of them without exactly one refund of their payment"));
    sale.refund(&payment, RefundReason::Admin, "re_3", 5_010);
    assert!(audit_voucher(&sale.log, None).pass);
}

#[test]
fn a_late_payment_that_paid_and_a_timely_one_refunded_as_late_break_only_paid_in_time() {
    // Created at 10 ms with 60 s to pay: pay_by is 61 s (whole seconds).
    let mut sale = Script::priced(3, 1, 60, 500, Some("USD"));
    let order = sale.accept("ann", 1, 0);
    sale.decide(&order, 10);
    sale.pay(&order, "pi_late", 61_000);
    let audit = audit_voucher(&sale.log, None);
    assert_eq!(failing(&audit), ["paid_in_time"]);
    assert!(detail(&audit, "paid_in_time").starts_with("0 paid before their pay_by (0 without one), 1 at or after it"));

    let mut sale = Script::priced(3, 1, 60, 500, Some("USD"));
    let order = sale.accept("bea", 1, 0);
    sale.decide(&order, 10);
    let timely = sale.payment(&order, "pi_timely", 500, 60_999);
    sale.refund(&timely, RefundReason::Late, "re_timely", 61_000);
    sale.cancel(&order, 61_000, seckill_core::event::CancelReason::Expired);
    let audit = audit_voucher(&sale.log, None);
    assert_eq!(failing(&audit), ["paid_in_time"]);
    assert!(detail(&audit, "paid_in_time")
        .contains("1 payment refunded as late, 1 of them paid in time for a payable order"));
}

#[test]
fn a_duplicate_refund_for_an_order_no_other_payment_paid_breaks_only_paid_in_time() {
    // The only payment of a created order, refunded as if it were a second.
    let mut sale = Script::priced(3, 1, 60, 500, Some("USD"));
    let order = sale.accept("ann", 1, 0);
    sale.decide(&order, 10);
    let lone = sale.payment(&order, "pi_lone", 500, 1_000);
    sale.refund(&lone, RefundReason::Duplicate, "re_lone", 1_100);
    sale.cancel(&order, 61_000, seckill_core::event::CancelReason::Expired);
    let audit = audit_voucher(&sale.log, None);
    assert_eq!(failing(&audit), ["paid_in_time"]);
    assert!(detail(&audit, "paid_in_time")
        .ends_with("1 payment refunded as a duplicate, 1 of them for an order no other payment paid"));
}

#[test]
fn a_right_payment_refunded_as_the_wrong_amount_breaks_only_amounts_match() {
    let mut sale = Script::priced(3, 1, 60, 500, Some("USD"));
    let order = sale.accept("ann", 1, 0);
    sale.decide(&order, 10);
    let right = sale.payment(&order, "pi_right", 500, 1_000);
    sale.refund(&right, RefundReason::AmountMismatch, "re_right", 1_100);
    sale.cancel(&order, 61_000, seckill_core::event::CancelReason::Expired);
    let audit = audit_voucher(&sale.log, None);
    assert_eq!(failing(&audit), ["amounts_match"]);
    assert!(detail(&audit, "amounts_match").ends_with("refunded for the wrong amount: 0 of 1 really wrong"));
}

#[test]
fn amounts_that_differ_break_only_amounts_match() {
    // A payment short of the amount paid the order.
    let mut sale = Script::priced(3, 1, 60, 500, Some("USD"));
    let order = sale.accept("ann", 1, 0);
    sale.decide(&order, 10);
    let short = sale.payment(&order, "pi_short", 499, 1_000);
    sale.paid(&order, &short);
    let audit = audit_voucher(&sale.log, None);
    assert_eq!(failing(&audit), ["amounts_match"]);
    assert!(detail(&audit, "amounts_match").contains("payments at their order's amount: 0 of 1"));

    // An order that owes less than price × quantity.
    let mut sale = Script::priced(3, 2, 60, 500, Some("USD"));
    let mut order = sale.admitted("bea", 2, 0);
    order.amount = 500;
    sale.relayed(&order);
    sale.decide(&order, 10);
    sale.pay(&order, "pi_half", 1_000);
    let audit = audit_voucher(&sale.log, None);
    assert_eq!(failing(&audit), ["amounts_match"]);
    assert!(detail(&audit, "amounts_match").contains("orders at price × quantity: 0 of 1"));

    // A refund of less than the payment.
    let mut sale = paid_sale();
    let refund = sale.log.payments.get_mut("pi_e").and_then(|payment| payment.refunds.get_mut("re_e"));
    refund.expect("erin's refund").amount -= 1;
    let audit = audit_voucher(&sale.log, None);
    assert_eq!(failing(&audit), ["amounts_match"]);
    assert!(detail(&audit, "amounts_match").contains("refund records at their payment's amount: 8 of 9"));
}

#[test]
fn the_provider_is_compared_payment_by_payment_and_order_by_order() {
    let sale = paid_sale();
    let clean = provider_agreeing(&sale.log);
    let audit = |provider: &ProviderFigures| audit_voucher_against(&sale.log, None, Some(provider));
    assert!(audit(&clean).pass);

    // A payment the log kept was refunded at the provider.
    let mut refunded = clean.clone();
    if let Some(Some(intent)) = refunded.retrieved.get_mut("pi_a") {
        intent.amount_refunded = Some(intent.amount);
    }
    let found = audit(&refunded);
    assert_eq!(failing(&found), ["provider_agrees"]);
    let shown = detail(&found, "provider_agrees");
    assert!(shown.contains("1 differ at the provider"), "{shown}");
    assert!(
        shown.contains("log paid EUR 109.99 refunded EUR 59.99 ≠ provider paid EUR 109.99 refunded EUR 72.49"),
        "{shown}"
    );
    assert!(
        shown.ends_with("(e.g. pi_a: kept in the log, succeeded with 1250 of 1250 refunded at the provider)"),
        "{shown}"
    );

    // The provider has never heard of a payment the log has.
    let mut unknown = clean.clone();
    unknown.retrieved.insert("pi_b".to_owned(), None);
    unknown.by_order.values_mut().for_each(|intents| intents.retain(|intent| intent.id != "pi_b"));
    let found = audit(&unknown);
    assert_eq!(failing(&found), ["provider_agrees"]);
    assert!(detail(&found, "provider_agrees").contains("1 unknown to it"));

    // A succeeded payment for one of the sale's orders the log never had.
    let mut missed = clean.clone();
    let (order, intents) = missed.by_order.iter_mut().next().expect("an order");
    intents.push(ProviderIntent {
        id: "pi_missed".to_owned(),
        order_id: Some(order.to_string()),
        status: "succeeded".to_owned(),
        amount: 1_250,
        currency: seckill_core::money::Currency::parse("EUR").ok(),
        amount_refunded: Some(0),
    });
    let found = audit(&missed);
    assert_eq!(failing(&found), ["provider_agrees"]);
    assert!(detail(&found, "provider_agrees").contains("1 succeeded there missing from the log"));

    // Intents never paid (an abandoned checkout) are nobody's money.
    let mut abandoned = missed.clone();
    for intent in abandoned.by_order.values_mut().flatten().filter(|intent| intent.id == "pi_missed") {
        intent.status = "canceled".to_owned();
    }
    assert!(audit(&abandoned).pass);
}

/// The processor expires an unpaid order when a payment made after its
/// pay_by arrives, with no cancellation request in the log: the units it
/// gives back are counted where that payment was decided, and the books
/// balance.
#[test]
fn an_order_expired_by_its_late_payment_balances_the_books() {
    let mut sale = Script::priced(3, 1, 60, 1_250, Some("EUR"));
    let early = sale.accept("early", 1, 0);
    sale.decide(&early, 5);
    let late_buyer = sale.accept("late", 1, 10);
    sale.decide(&late_buyer, 15);
    sale.pay(&early, "pi_early", 2_000);
    // After the deadline: reported, refunded, and the order expires with it.
    let late = sale.payment(&late_buyer, "pi_late", 1_250, 62_000);
    sale.cancelled(&late_buyer, 62_001, seckill_core::event::CancelReason::Expired);
    sale.refund(&late, RefundReason::Late, "re_late", 62_010);
    let next = sale.accept("next", 1, 63_000);
    sale.decide(&next, 63_010);
    let audit = audit_voucher(&sale.log, None);
    assert!(audit.pass, "{}", Audit::new(vec![audit.clone()], false).text());
}
