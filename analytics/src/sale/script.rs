//! Scripted sales for unit tests: events with their topic positions, the
//! processor's stock kept as the processor would.

use chrono::{DateTime, TimeDelta, Utc};
use seckill_core::event::{
    CancelReason, FailReason, OrderAccepted, OrderCancelled, OrderCreated, OrderFailed, OrderPaid, OrderRequest,
    VoucherCreated, VoucherUpdated,
};
use seckill_core::ids::{OrderId, UserId, VoucherId};
use seckill_core::{Envelope, Event};

use super::{Position, VoucherLog, VoucherSale};
use crate::stats::Stats;

/// `ms` milliseconds into the scripted sale.
pub(crate) fn at(ms: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(1_800_000_000_000 + ms).expect("in range")
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
}

impl Script {
    /// A voucher with `stock`, `limit` units per user, `hold` seconds.
    pub(crate) fn new(stock: u64, limit: u32, hold: u32) -> Self {
        let voucher = VoucherId::generate();
        let mut script = Self {
            voucher,
            log: VoucherLog::new(voucher),
            stats: Stats::new(),
            sales_offset: 0,
            orders_offset: 0,
            left: stock,
            records: Vec::new(),
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
            price: 0,
            currency: None,
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
            amount: 0,
            currency: None,
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

    /// The fold and its stats.
    pub(crate) fn sale(&self) -> VoucherSale {
        let stats = self.stats.finish().into_iter().next().expect("one voucher");
        VoucherSale { log: self.log.clone(), stats }
    }
}

/// A sale with everything, in time order: four units, two per user, held
/// five seconds unless confirmed. Alice buys one and confirms it, Bob two,
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

/// `ms` as a time delta, for tests comparing latencies.
pub(crate) fn ms(ms: i64) -> TimeDelta {
    TimeDelta::milliseconds(ms)
}
