//! The fold, the books and the timeline of scripted sales.

use chrono::{DateTime, Utc};
use seckill_core::event::{CancelReason, OrderRequest};
use seckill_core::Event;

use super::script::{at, busy_sale, ms, Script};
use super::*;

fn steps(steps: &[Step]) -> Vec<(i64, i64)> {
    steps.iter().map(|step| ((step.at - at(0)).num_milliseconds(), step.value)).collect()
}

#[test]
fn the_books_of_a_busy_sale_balance() {
    let sale = busy_sale();
    let books = sale.log.books();
    assert_eq!((books.initial_stock, books.added_stock, books.offered), (4, 2, 6));
    assert_eq!((books.orders, books.accepted), (7, 7));
    assert_eq!((books.created, books.failed, books.paid, books.cancelled, books.pending), (6, 1, 1, 2, 0));
    assert_eq!((books.created_units, books.cancelled_units, books.units_sold), (9, 3, 6));
    assert_eq!((books.units_left, books.admission_left), (Some(0), 0));
    assert_eq!((books.returned_units, books.resold_units, books.fresh_left), (3, 3, 0));
    assert_eq!(sale.left, 0, "the script's processor agrees");
}

#[test]
fn redelivered_records_change_nothing_and_a_second_decision_is_kept_apart() {
    let mut sale = busy_sale();
    let before = (sale.log.books(), Timeline::of(&sale.sale().log, &sale.sale().stats));
    // Every record read again at a later offset (a redelivery, or the
    // processor re-emitting its stored outcomes).
    for (envelope, orders_topic) in sale.records.clone() {
        sale.put(&envelope, orders_topic);
    }
    assert_eq!((sale.log.books(), Timeline::of(&sale.sale().log, &sale.sale().stats)), before);

    // The same decision under a new event id is a second decision.
    sale.add_stock(1, 6_950);
    let order = sale.accept("heidi", 1, 7_000);
    let created = sale.decide(&order, 7_010);
    let books = sale.log.books();
    let mut again = seckill_core::Envelope::new(created.event.clone());
    again.emitted_at = created.emitted_at;
    sale.put(&again, true);
    assert_eq!(sale.log.orders[&order.order_id].decisions.len(), 2);
    let books_after = sale.log.books();
    assert_eq!(books_after.created_units, books.created_units, "units are counted per order");
    assert_eq!(books_after.units_left, books.units_left, "the copy carries the same remaining");
    assert_eq!(books_after.resold_units, books.resold_units, "only an order's first creation takes units");
}

#[test]
fn units_left_include_stock_added_after_the_last_decision() {
    let mut sale = Script::new(2, 1, 0);
    let a = sale.accept("a", 1, 0);
    sale.decide(&a, 1);
    sale.add_stock(5, 10);
    let books = sale.log.books();
    assert_eq!((books.offered, books.units_sold, books.units_left), (7, 1, Some(6)));
    assert_eq!(books.admission_left, 6);
}

#[test]
fn units_left_follow_the_processor_order_not_the_clocks() {
    // The update is emitted before the order is decided, but the processor
    // reads the order's acceptance first: the decision's remaining does not
    // include the added stock, so the stock is added on top.
    let mut sale = Script::new(3, 1, 0);
    let a = sale.accept("a", 1, 0);
    sale.add_stock(4, 5);
    sale.left -= 4; // the processor has not applied the update yet
    sale.decide(&a, 20);
    sale.left += 4;
    assert_eq!(sale.log.books().units_left, Some(6));
    assert_eq!(sale.left, 6);
}

#[test]
fn an_expiry_refused_for_an_unsettled_checkout_does_not_place_the_cancellation() {
    // The sweeper's first expiry request settled no session, but the log
    // held one by then: the processor ignored it. Another order took a
    // unit; the sweeper's second request, with the session settled,
    // cancelled the first order. The last change is that cancellation.
    let mut sale = Script::new(3, 1, 0);
    let a = sale.accept("a", 1, 0);
    sale.decide(&a, 1);
    let checkout = |sale: &mut Script| {
        sale.sales(Event::CheckoutOpened(seckill_core::event::CheckoutOpened {
            order_id: a.order_id,
            voucher_id: sale.voucher,
            session_id: "cs_test_1".to_owned(),
            opened_at: at(2),
            expires_at: at(1_800_002),
        }))
    };
    checkout(&mut sale);
    let expiry = |sale: &mut Script, settled: Vec<String>, ms: i64| {
        sale.sales(Event::CancelRequested(OrderRequest {
            order_id: a.order_id,
            voucher_id: sale.voucher,
            reason: Some(CancelReason::Expired),
            requested_at: at(ms),
            settled_checkouts: Some(settled),
        }))
    };
    expiry(&mut sale, Vec::new(), 10);
    let b = sale.accept("b", 1, 11);
    sale.decide(&b, 12);
    expiry(&mut sale, vec!["cs_test_1".to_owned()], 40);
    sale.cancelled(&a, 41, CancelReason::Expired);
    let books = sale.log.books();
    assert_eq!(sale.left, 2);
    assert_eq!((books.units_sold, books.units_left), (1, Some(2)), "{books:?}");
    assert_eq!((books.returned_units, books.resold_units, books.fresh_left), (1, 0, 1));

    // A checkout opened after the first request was not the processor's
    // to see: that request cancelled.
    let mut early = Script::new(3, 1, 0);
    let c = early.accept("c", 1, 0);
    early.decide(&c, 1);
    early.sales(Event::CancelRequested(OrderRequest {
        order_id: c.order_id,
        voucher_id: early.voucher,
        reason: Some(CancelReason::Expired),
        requested_at: at(10),
        settled_checkouts: Some(Vec::new()),
    }));
    early.cancelled(&c, 11, CancelReason::Expired);
    let d = early.accept("d", 1, 12);
    early.decide(&d, 13);
    assert_eq!(early.log.books().units_left, Some(2));
}

#[test]
fn peaks_per_user_walk_the_sales_topic() {
    let mut sale = Script::new(10, 2, 0);
    let first = sale.accept("ann", 2, 0);
    sale.decide(&first, 1);
    sale.cancel(&first, 5, CancelReason::Requested);
    let second = sale.accept("ann", 2, 3); // a clock behind, but read after the cancellation
    sale.decide(&second, 6);
    let peaks = sale.log.peak_units_per_user();
    assert_eq!(peaks.values().copied().collect::<Vec<_>>(), vec![2]);
    assert_eq!(sale.log.units_held_per_user().values().copied().collect::<Vec<_>>(), vec![2]);

    // Without the cancellation first, the user held four.
    let mut greedy = Script::new(10, 2, 0);
    for t in [0, 1] {
        let order = greedy.accept("bo", 2, t);
        greedy.decide(&order, t + 1);
    }
    assert_eq!(greedy.log.peak_units_per_user().values().copied().collect::<Vec<_>>(), vec![4]);
}

#[test]
fn final_statuses_rank_like_the_view() {
    let sale = busy_sale();
    let mut statuses: Vec<(String, FinalStatus)> =
        sale.log.orders.values().map(|o| (o.user_id.to_string(), o.final_status())).collect();
    statuses.sort();
    let expected = [
        ("alice", FinalStatus::Paid),
        ("bob", FinalStatus::Cancelled),
        ("carol", FinalStatus::Cancelled),
        ("dave", FinalStatus::Created),
        ("erin", FinalStatus::Created),
        ("frank", FinalStatus::Created),
        ("grace", FinalStatus::Failed),
    ];
    assert_eq!(statuses, expected.map(|(user, status)| (user.to_owned(), status)));
}

#[test]
fn buckets_are_round_and_bounded() {
    let t = |s: i64| DateTime::<Utc>::from_timestamp(1_800_000_000 + s, 123_000_000).expect("in range");
    let seconds = Buckets::covering(t(0), t(59));
    assert_eq!((seconds.width_s, seconds.count, seconds.origin), (1, 60, t(0) - ms(123)));
    let minutes = Buckets::covering(t(0), t(3_000));
    assert_eq!(minutes.width_s, 10);
    assert!(minutes.count <= MAX_BUCKETS);
    assert_eq!(minutes.index(t(25)), 2);
    assert_eq!(minutes.index(t(-50)), 0, "clamped");
    assert_eq!(minutes.index(t(1_000_000)), minutes.count - 1, "clamped");
    let days = Buckets::covering(t(0), t(400 * 86_400));
    assert_eq!(days.width_s, 86_400);
    assert_eq!(Buckets::covering(t(5), t(5)).count, 1);
}

#[test]
fn the_timeline_of_a_busy_sale() {
    let sale = busy_sale();
    let sale = sale.sale();
    let timeline = Timeline::of(&sale.log, &sale.stats);
    assert_eq!((timeline.buckets.origin, timeline.buckets.width_s, timeline.buckets.count), (at(0), 1, 7));
    // created, paid, cancelled, failed, pending
    assert_eq!(
        timeline.accepted,
        vec![[0, 1, 1, 0, 0], [0, 0, 1, 0, 0], [1, 0, 0, 0, 0], [1, 0, 0, 0, 0], [0; 5], [0; 5], [1, 0, 0, 1, 0]]
    );
    assert_eq!(
        timeline.cancellations,
        vec![[0, 0, 0], [0, 0, 0], [1, 0, 0], [0, 0, 0], [0, 0, 0], [0, 0, 0], [0, 1, 0]]
    );
    let latency: Vec<Option<(f64, f64, u64)>> =
        timeline.latency.iter().map(|p| p.map(|p| (p.p50_ms, p.p99_ms, p.orders))).collect();
    assert_eq!(
        latency,
        vec![
            Some((5.0, 10.0, 2)),
            Some((10.0, 10.0, 1)),
            Some((20.0, 20.0, 1)),
            Some((30.0, 30.0, 1)),
            None,
            None,
            Some((20.0, 100.0, 2))
        ]
    );
    let bins: Vec<(f64, u64)> = timeline.latency_bins.iter().map(|b| (b.from_ms, b.orders)).collect();
    assert_eq!(bins, vec![(5.0, 1), (10.0, 2), (20.0, 3), (50.0, 0), (100.0, 1)]);
    assert_eq!(timeline.latency_bins.last().and_then(|b| b.to_ms), Some(200.0));

    assert_eq!(
        steps(&timeline.stock_left),
        vec![
            (0, 4),
            (5, 3),
            (310, 1),
            (1_210, 0),
            (2_100, 2),
            (2_520, 0),
            (3_000, 2),
            (3_430, 1),
            (6_210, 2),
            (6_720, 0)
        ]
    );
    assert_eq!(
        steps(&timeline.admission_left),
        vec![
            (0, 3),
            (300, 1),
            (1_200, 0),
            (2_100, 2),
            (2_500, 0),
            (3_000, 2),
            (3_400, 1),
            (6_210, 2),
            (6_700, 0),
            (6_800, -1),
            (6_900, 0)
        ]
    );
    assert_eq!(steps(&timeline.returned), vec![(0, 0), (2_100, 2), (6_210, 3)]);
    assert_eq!(steps(&timeline.resold), vec![(0, 0), (2_520, 2), (6_720, 3)]);
    assert_eq!(timeline.added, vec![(at(3_000), 2)]);
    assert_eq!(timeline.sold_out_at, Some(at(6_700)));
}

#[test]
fn buyers_are_counted_by_units_held_and_orders() {
    let mut sale = busy_sale();
    let extra = sale.accept("erin", 1, 7_000);
    sale.decide(&extra, 7_005); // fails: nothing left
    let buyers = sale.log.buyers();
    assert_eq!(buyers.users, 7);
    // alice 1, dave 2, erin 1, frank 2; bob, carol, grace hold nothing.
    assert_eq!(buyers.units_per_user.into_iter().collect::<Vec<_>>(), vec![(1, 2), (2, 2)]);
    let top = &buyers.top[0];
    assert_eq!(
        (top.user_id.as_str(), top.orders, top.units, top.created, top.failed, top.cancelled),
        ("erin", 2, 1, 1, 1, 0)
    );
    assert_eq!(buyers.top[1].user_id.as_str(), "dave", "then by units");
    assert_eq!(buyers.top.len(), 7);
}

#[test]
fn a_paid_sale_counts_its_money_once_per_payment_and_refund() {
    let mut sale = super::script::paid_sale();
    let revenue = sale.log.revenue();
    let eur = seckill_core::money::Currency::parse("EUR").expect("valid");
    assert_eq!(revenue.by_currency[&eur], Totals { paid: 10_999, refunded: 5_999 });
    assert_eq!(revenue.by_currency[&eur].net(), 5_000);
    assert_eq!((revenue.payments, revenue.paid_orders, revenue.refunded(), revenue.refund_pending), (7, 4, 4, 0));
    assert_eq!(revenue.refunded_by_reason.get("duplicate"), Some(&1), "two requests, one payment");
    let books = sale.log.books();
    assert_eq!((books.paid, books.refunded, books.paid_amount, books.refunded_amount), (4, 1, 6_250, 1_250));
    assert_eq!(books.paid_amount - books.refunded_amount, 5_000, "the view's revenue: the log's net");
    for (envelope, orders_topic) in sale.records.clone() {
        sale.put(&envelope, orders_topic);
    }
    assert_eq!(sale.log.revenue(), revenue, "redeliveries change nothing");
}

#[test]
fn the_payment_deadline_is_the_creations_or_the_definitions() {
    let mut sale = Script::priced(2, 1, 60, 100, Some("EUR"));
    let order = sale.accept("ann", 1, 0);
    sale.decide(&order, 10);
    let log = &sale.log.orders[&order.order_id];
    assert_eq!(sale.log.pay_by(log), Some(at(61_000)), "60 s after the decision, rounded up to a second");
    let explicit = sale.accept("bob", 1, 20);
    sale.orders(seckill_core::Event::OrderCreated(seckill_core::event::OrderCreated {
        order: explicit.clone(),
        decided_at: at(30),
        remaining: 0,
        pay_by: Some(at(90_000)),
    }));
    assert_eq!(sale.log.pay_by(&sale.log.orders[&explicit.order_id]), Some(at(90_000)));
    let free = Script::new(1, 1, 0);
    assert!(!free.log.takes_payments());
    assert!(sale.log.takes_payments());
}
