//! Scripted sales for unit tests: events with their topic positions, the
//! processor's stock kept as the processor would.

use chrono::{DateTime, TimeDelta, Utc};
use seckill_core::draw::DrawSettings;
use seckill_core::event::{
    CancelReason, FailReason, OrderAccepted, OrderCancelled, OrderCreated, OrderFailed, OrderPaid, OrderRequest,
    PaymentReceived, PaymentRefunded, PaymentSource, RefundReason, RefundRequested, VoucherCreated, VoucherUpdated,
};
use seckill_core::ids::{OrderId, UserId, VoucherId};
use seckill_core::money::Currency;
use seckill_core::queue::QueueSettings;
use seckill_core::{Envelope, Event};

use super::{Position, VoucherLog, VoucherSale};
use crate::stats::Stats;

/// `ms` milliseconds into the scripted sale.
pub(crate) fn at(ms: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(1_800_000_000_000 + ms).expect("in range")
}

/// How a scripted voucher is sold.
pub(crate) enum Mode {
    FirstCome,
    Queue(QueueSettings),
    Draw(DrawSettings),
}

/// A sale being scripted.
pub(crate) struct Script {
    pub(crate) voucher: VoucherId,
    pub(crate) log: VoucherLog,
    stats: Stats,
    sales_offset: i64,
    orders_offset: i64,
    /// The persistent stock left, as the processor keeps it.
    pub(crate) left: u64,
    /// Every record put, and whether on the orders topic.
    pub(crate) records: Vec<(Envelope, bool)>,
    /// Price of a unit, and its currency (None: free).
    price: u64,
    currency: Option<Currency>,
}

impl Script {
    /// `records` (this script's, doctored: edited, dropped or moved)
    /// folded again in the order given, each at the next offset of its
    /// topic.
    pub(crate) fn refolded(&self, records: &[(Envelope, bool)]) -> VoucherLog {
        let mut log = VoucherLog::new(self.voucher);
        for (offset, (envelope, orders_topic)) in (0i64..).zip(records) {
            log.apply(envelope, Position { partition: i32::from(*orders_topic), offset });
        }
        log
    }

    /// The log of this script's records with `edit` applied to each event.
    pub(crate) fn edited(&self, mut edit: impl FnMut(&mut Event)) -> VoucherLog {
        let mut records = self.records.clone();
        for (envelope, _) in &mut records {
            edit(&mut envelope.event);
        }
        self.refolded(&records)
    }

    /// A free voucher with `stock`, `limit` units per user, `hold` seconds.
    pub(crate) fn new(stock: u64, limit: u32, hold: u32) -> Self {
        Self::priced(stock, limit, hold, 0, None)
    }

    /// A voucher selling each unit for `price` minor units of `currency`,
    /// orders payable within `hold` seconds.
    pub(crate) fn priced(stock: u64, limit: u32, hold: u32, price: u64, currency: Option<&str>) -> Self {
        Self::defined(stock, limit, hold, price, currency, Mode::FirstCome)
    }

    /// A voucher as [`Script::priced`], sold in `mode`.
    pub(crate) fn defined(stock: u64, limit: u32, hold: u32, price: u64, currency: Option<&str>, mode: Mode) -> Self {
        let (queue, draw) = match mode {
            Mode::FirstCome => (None, None),
            Mode::Queue(queue) => (Some(queue), None),
            Mode::Draw(draw) => (None, Some(draw)),
        };
        let currency = currency.map(|code| Currency::parse(code).expect("a currency"));
        let voucher = VoucherId::generate();
        let mut script = Self {
            voucher,
            log: VoucherLog::new(voucher),
            stats: Stats::new(),
            sales_offset: 0,
            orders_offset: 0,
            left: stock,
            records: Vec::new(),
            price,
            currency,
        };
        script.sales(Event::VoucherCreated(VoucherCreated {
            voucher_id: voucher,
            stock,
            per_user_limit: limit,
            begins_at: at(-1_000),
            ends_at: at(3_600_000),
            hold_seconds: hold,
            shards: 1,
            title: None,
            description: None,
            price,
            currency,
            queue: queue.map(Box::new),
            draw,
            challenge_bits: 0,
        }));
        script
    }

    /// Puts `envelope` on a topic (the next offset) and folds it.
    pub(crate) fn put(&mut self, envelope: &Envelope, orders_topic: bool) {
        let offset = if orders_topic { &mut self.orders_offset } else { &mut self.sales_offset };
        let position = Position { partition: i32::from(orders_topic), offset: *offset };
        *offset += 1;
        self.records.push((envelope.clone(), orders_topic));
        self.log.apply(envelope, position);
        self.stats.apply(envelope);
    }

    pub(crate) fn sales(&mut self, event: Event) -> Envelope {
        let envelope = Envelope::new(event);
        self.put(&envelope, false);
        envelope
    }

    pub(crate) fn orders(&mut self, event: Event) -> Envelope {
        let envelope = Envelope::new(event);
        self.put(&envelope, true);
        envelope
    }

    /// An order the gate admitted at `ms`, not in the log yet.
    pub(crate) fn admitted(&self, user: &str, quantity: u32, ms: i64) -> OrderAccepted {
        OrderAccepted {
            order_id: OrderId::generate(),
            voucher_id: self.voucher,
            user_id: UserId::parse(user).expect("valid user"),
            quantity,
            accepted_at: at(ms),
            amount: self.price * u64::from(quantity),
            currency: self.currency.filter(|_| self.price > 0),
            idempotency_key: None,
        }
    }

    /// The order's acceptance, reaching the sales topic.
    pub(crate) fn relayed(&mut self, order: &OrderAccepted) {
        self.sales(Event::OrderAccepted(order.clone()));
    }

    pub(crate) fn accept(&mut self, user: &str, quantity: u32, ms: i64) -> OrderAccepted {
        let order = self.admitted(user, quantity, ms);
        self.relayed(&order);
        order
    }

    /// The processor's decision: created while units are left, else failed.
    pub(crate) fn decide(&mut self, order: &OrderAccepted, ms: i64) -> Envelope {
        let units = u64::from(order.quantity);
        if self.left >= units {
            self.left -= units;
            self.orders(Event::OrderCreated(OrderCreated {
                order: order.clone(),
                decided_at: at(ms),
                remaining: self.left,
                pay_by: None,
            }))
        } else {
            self.orders(Event::OrderFailed(OrderFailed {
                order: order.clone(),
                decided_at: at(ms),
                reason: FailReason::SoldOut,
            }))
        }
    }

    /// A request on the sales topic, then the cancellation on the orders topic.
    pub(crate) fn cancel(&mut self, order: &OrderAccepted, ms: i64, reason: CancelReason) -> Envelope {
        self.request_cancel(order, ms, reason);
        self.cancelled(order, ms, reason)
    }

    /// A cancel request on the sales topic.
    pub(crate) fn request_cancel(&mut self, order: &OrderAccepted, ms: i64, reason: CancelReason) {
        self.sales(Event::CancelRequested(OrderRequest {
            order_id: order.order_id,
            voucher_id: self.voucher,
            reason: Some(reason),
            requested_at: at(ms),
            settled_checkouts: None,
        }));
    }

    /// The processor's cancellation on the orders topic.
    pub(crate) fn cancelled(&mut self, order: &OrderAccepted, ms: i64, reason: CancelReason) -> Envelope {
        self.left += u64::from(order.quantity);
        self.orders(Event::OrderCancelled(OrderCancelled {
            order: order.clone(),
            cancelled_at: at(ms),
            reason,
            remaining: self.left,
        }))
    }

    pub(crate) fn confirm(&mut self, order: &OrderAccepted, ms: i64) -> Envelope {
        self.sales(Event::ConfirmRequested(OrderRequest {
            order_id: order.order_id,
            voucher_id: self.voucher,
            reason: None,
            requested_at: at(ms),
            settled_checkouts: None,
        }));
        self.orders(Event::OrderPaid(OrderPaid { order: order.clone(), paid_at: at(ms), payment_id: None }))
    }

    pub(crate) fn add_stock(&mut self, units: u64, ms: i64) -> Envelope {
        let mut envelope = Envelope::new(Event::VoucherUpdated(VoucherUpdated {
            voucher_id: self.voucher,
            paused: None,
            ends_at: None,
            add_stock: units,
        }));
        envelope.emitted_at = at(ms);
        self.put(&envelope, false);
        self.left += units;
        envelope
    }

    /// The provider reports `payment_id`, for `amount`, paid at `ms`.
    pub(crate) fn payment(&mut self, order: &OrderAccepted, payment_id: &str, amount: u64, ms: i64) -> PaymentReceived {
        let payment = PaymentReceived {
            order_id: order.order_id,
            voucher_id: self.voucher,
            payment_id: payment_id.to_owned(),
            amount,
            currency: order.currency.or(self.currency).expect("a priced sale"),
            paid_at: at(ms),
            source: PaymentSource::Webhook,
        };
        self.sales(Event::PaymentReceived(payment.clone()));
        payment
    }

    /// The processor's decision that `payment` paid `order`.
    pub(crate) fn paid(&mut self, order: &OrderAccepted, payment: &PaymentReceived) -> Envelope {
        self.orders(Event::OrderPaid(OrderPaid {
            order: order.clone(),
            paid_at: payment.paid_at,
            payment_id: Some(payment.payment_id.clone()),
        }))
    }

    /// The provider reports `payment_id` at the order's amount, and it pays
    /// the order.
    pub(crate) fn pay(&mut self, order: &OrderAccepted, payment_id: &str, ms: i64) -> PaymentReceived {
        let payment = self.payment(order, payment_id, order.amount, ms);
        self.paid(order, &payment);
        payment
    }

    /// The processor asks for `payment` back.
    pub(crate) fn refund_requested(&mut self, payment: &PaymentReceived, reason: RefundReason, ms: i64) -> Envelope {
        self.orders(Event::RefundRequested(RefundRequested {
            order_id: payment.order_id,
            voucher_id: self.voucher,
            payment_id: payment.payment_id.clone(),
            amount: payment.amount,
            currency: payment.currency,
            reason,
            requested_at: at(ms),
        }))
    }

    /// The provider refunded `payment` under `refund_id`.
    pub(crate) fn refunded(&mut self, payment: &PaymentReceived, refund_id: &str, ms: i64) -> Envelope {
        self.orders(Event::PaymentRefunded(PaymentRefunded {
            order_id: payment.order_id,
            voucher_id: self.voucher,
            payment_id: payment.payment_id.clone(),
            refund_id: refund_id.to_owned(),
            amount: payment.amount,
            currency: payment.currency,
            refunded_at: at(ms),
        }))
    }

    /// A refund asked for and done.
    pub(crate) fn refund(&mut self, payment: &PaymentReceived, reason: RefundReason, refund_id: &str, ms: i64) {
        self.refund_requested(payment, reason, ms);
        self.refunded(payment, refund_id, ms + 50);
    }

    /// The fold and its stats.
    pub(crate) fn sale(&self) -> VoucherSale {
        let stats = self.stats.finish().into_iter().next().expect("one voucher");
        VoucherSale { log: self.log.clone(), stats }
    }
}

/// A sale with everything, in time order: four units, two per user, held
/// five seconds unless claimed (paid). Alice buys one and claims it, Bob two,
/// Carol the last one (sold out at 1.2 s); Bob cancels and Dave buys his
/// two units again (sold out again); two units are added; Erin buys one;
/// Carol's order expires; Frank takes the last two (sold out for good at
/// 6.7 s); Grace's order, admitted by a gate that had a unit too many, fails.
pub(crate) fn busy_sale() -> Script {
    let mut sale = Script::new(4, 2, 5);
    let a = sale.accept("alice", 1, 0);
    sale.decide(&a, 5);
    let b = sale.accept("bob", 2, 300);
    sale.decide(&b, 310);
    let c = sale.accept("carol", 1, 1_200);
    sale.decide(&c, 1_210);
    sale.confirm(&a, 1_500);
    sale.cancel(&b, 2_100, CancelReason::Requested);
    let d = sale.accept("dave", 2, 2_500);
    sale.decide(&d, 2_520);
    sale.add_stock(2, 3_000);
    let e = sale.accept("erin", 1, 3_400);
    sale.decide(&e, 3_430);
    sale.cancel(&c, 6_210, CancelReason::Expired);
    let f = sale.accept("frank", 2, 6_700);
    sale.decide(&f, 6_720);
    let g = sale.accept("grace", 1, 6_800);
    sale.decide(&g, 6_900);
    sale
}

/// A priced sale with every way a payment ends, in time order: six units
/// at EUR 12.50, two per user, payable within 60 s. Alice pays (`pi_a`).
/// Bob pays for two units (`pi_b`), then pays again (`pi_b2`), refunded as
/// a duplicate (its refund request delivered twice, under two event ids).
/// Carol never pays; her order expires at 61 s and her payment (`pi_c`) at
/// 62 s is refunded as late. Dave pays (`pi_d`) and an admin refunds his
/// order. Erin pays the wrong amount (`pi_e`, refunded), then the right
/// one (`pi_e2`). Paid EUR 109.99, refunded EUR 59.99: net EUR 50.00.
pub(crate) fn paid_sale() -> Script {
    let mut sale = Script::priced(6, 2, 60, 1_250, Some("EUR"));
    let alice = sale.accept("alice", 1, 0);
    sale.decide(&alice, 5);
    let bob = sale.accept("bob", 2, 100);
    sale.decide(&bob, 110);
    let carol = sale.accept("carol", 1, 200);
    sale.decide(&carol, 210);
    let dave = sale.accept("dave", 1, 300);
    sale.decide(&dave, 310);
    let erin = sale.accept("erin", 1, 400);
    sale.decide(&erin, 410);
    sale.pay(&alice, "pi_a", 2_000);
    sale.pay(&bob, "pi_b", 3_000);
    let again = sale.payment(&bob, "pi_b2", 2_500, 3_500);
    sale.refund_requested(&again, RefundReason::Duplicate, 3_510);
    sale.refund(&again, RefundReason::Duplicate, "re_b2", 3_520);
    let paid = sale.pay(&dave, "pi_d", 4_000);
    let wrong = sale.payment(&erin, "pi_e", 999, 5_000);
    sale.refund(&wrong, RefundReason::AmountMismatch, "re_e", 5_010);
    sale.pay(&erin, "pi_e2", 6_000);
    sale.request_cancel(&dave, 10_000, CancelReason::Refunded);
    sale.cancelled(&dave, 10_000, CancelReason::Refunded);
    sale.refund(&paid, RefundReason::Admin, "re_d", 10_010);
    sale.cancel(&carol, 61_000, CancelReason::Expired);
    let late = sale.payment(&carol, "pi_c", 1_250, 62_000);
    sale.refund(&late, RefundReason::Late, "re_c", 62_010);
    sale
}

/// `ms` as a time delta, for tests comparing latencies.
pub(crate) fn ms(ms: i64) -> TimeDelta {
    TimeDelta::milliseconds(ms)
}
