//! Fills the sales and orders topics with one flash sale whose books
//! balance, as the platform would have logged it, for measuring
//! `seckill report` and `seckill audit` on a long log.
//!
//! ```text
//! cargo run --release -p seckill-analytics --example produce_sale -- BROKERS TOPIC_PREFIX EVENTS
//! ```
//!
//! The sale is simulated in time order: a burst of buyers (a few thousand
//! a second, fading), the gate admitting while it has units and the user is
//! under the limit, the processor deciding each order against its stock,
//! owners confirming or cancelling, unconfirmed orders expiring after the
//! hold, stock added once, and now and then a drifted gate admitting an
//! order the processor then refuses. It stops once EVENTS events are
//! written; later events (a hold still running) are left in the future.
//! Deterministic: the same EVENTS give the same sale (ids and clocks aside).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::time::{Duration, Instant};

use chrono::{DateTime, TimeDelta, Utc};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::ClientConfig;
use seckill_core::event::{
    CancelReason, Event, FailReason, OrderAccepted, OrderCancelled, OrderCreated, OrderFailed, OrderPaid, OrderRequest,
    VoucherCreated, VoucherUpdated,
};
use seckill_core::{Envelope, OrderId, UserId, VoucherId};

const PARTITIONS: i32 = 6;
/// Units a user may hold.
const LIMIT: u64 = 2;
/// Seconds an unconfirmed order is held.
const HOLD_SECONDS: i64 = 60;

/// Something that happens at a point of the simulated sale.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Step {
    /// A buyer tries to order.
    Attempt,
    /// The admin adds stock.
    AddStock,
    /// The processor decides order `i`.
    Decide(usize),
    /// The owner confirms order `i`.
    Confirm(usize),
    /// Order `i` is cancelled (`true`: it expired).
    Cancel(usize, bool),
}

/// A small deterministic generator (xorshift64*).
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A whole number in `0..n`.
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

struct Sale {
    producer: BaseProducer,
    sales: String,
    orders: String,
    key: String,
    voucher: VoucherId,
    written: usize,
}

impl Sale {
    fn send(&mut self, orders_topic: bool, envelope: &Envelope) -> Result<(), KafkaError> {
        let topic = if orders_topic { &self.orders } else { &self.sales };
        let payload = envelope.encode();
        loop {
            match self.producer.send(BaseRecord::to(topic).key(&self.key).payload(&payload)) {
                Ok(()) => break,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _)) => {
                    self.producer.poll(Duration::from_millis(10));
                }
                Err((error, _)) => return Err(error),
            }
        }
        self.written += 1;
        if self.written % 1000 == 0 {
            self.producer.poll(Duration::ZERO);
        }
        Ok(())
    }

    fn sales(&mut self, event: Event) -> Result<(), KafkaError> {
        self.send(false, &Envelope::new(event))
    }

    fn orders(&mut self, event: Event) -> Result<(), KafkaError> {
        self.send(true, &Envelope::new(event))
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, brokers, prefix, events] = args.as_slice() else {
        return Err("usage: produce_sale BROKERS TOPIC_PREFIX EVENTS".into());
    };
    let target: usize = events.parse()?;
    let topics = seckill_core::topics::Topics::with_prefix(prefix);
    let kept = |name| seckill_kafka::TopicSpec { name, retention: seckill_kafka::Retention::Forever };
    seckill_kafka::ensure_topics(brokers, &[kept(&topics.sales), kept(&topics.orders)], PARTITIONS, 1).await?;
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", brokers.as_str())
        .set("linger.ms", "20")
        .set("batch.size", "1000000")
        .set("queue.buffering.max.messages", "200000")
        .set("enable.idempotence", "true")
        .set("partitioner", "murmur2_random")
        .create()?;
    let started = Instant::now();
    let voucher = VoucherId::generate();
    let mut sale = Sale {
        producer,
        sales: topics.sales.clone(),
        orders: topics.orders.clone(),
        key: voucher.to_string(),
        voucher,
        written: 0,
    };

    // Four events per order (acceptance, decision, and a confirmation or a
    // cancellation of two records each), and units sold more than once.
    let stock = (target as u64 / 5).max(10);
    let added = stock / 15;
    let begins_at = DateTime::from_timestamp(Utc::now().timestamp() - 600, 0).unwrap_or_default();
    // The simulation's clock counts microseconds from the sale's start.
    let at = |us: i64| begins_at + TimeDelta::microseconds(us);
    let seconds = |s: i64| s * 1_000_000;
    sale.sales(Event::VoucherCreated(VoucherCreated {
        voucher_id: voucher,
        stock,
        per_user_limit: LIMIT as u32,
        begins_at,
        ends_at: begins_at + TimeDelta::hours(2),
        hold_seconds: HOLD_SECONDS as u32,
        shards: 1,
        title: None,
        description: None,
        price: 0,
        currency: None,
        queue: None,
        draw: None,
        challenge_bits: 0,
    }))?;

    let mut random = Random(0x5EC0_0C1D_2026_1123);
    let mut queue: BinaryHeap<Reverse<(i64, Step)>> = BinaryHeap::new();
    queue.push(Reverse((0, Step::Attempt)));
    queue.push(Reverse((seconds(20), Step::AddStock)));
    let (mut gate_left, mut stock_left) = (stock, stock);
    let mut held: HashMap<u64, u64> = HashMap::new();
    let mut placed: Vec<(OrderAccepted, u64)> = Vec::new();
    let buyers = stock * 6 / 5;
    while sale.written < target {
        let Some(Reverse((now, step))) = queue.pop() else { break };
        match step {
            Step::Attempt => {
                // Tens of thousands a second at first, fading to a trickle.
                let rate = (20_000.0 * (-(now as f64) / 5e6).exp()).max(300.0);
                queue.push(Reverse((now + (1e6 / rate).ceil() as i64, Step::Attempt)));
                let user = random.below(buyers);
                let quantity = if random.below(10) == 0 { 2 } else { 1 };
                let drifted = gate_left == 0 && random.below(500) == 0;
                let under_limit = held.get(&user).copied().unwrap_or(0) + quantity <= LIMIT;
                if !(under_limit && (gate_left >= quantity || drifted)) {
                    continue;
                }
                gate_left = gate_left.saturating_sub(quantity);
                *held.entry(user).or_default() += quantity;
                let order = OrderAccepted {
                    order_id: OrderId::generate(),
                    voucher_id: voucher,
                    user_id: UserId::parse(&format!("buyer-{user}"))?,
                    quantity: quantity as u32,
                    accepted_at: at(now),
                    amount: 0,
                    currency: None,
                    idempotency_key: None,
                };
                sale.sales(Event::OrderAccepted(order.clone()))?;
                placed.push((order, user));
                let latency = 2_000 + random.below(38_000) as i64;
                queue.push(Reverse((now + latency, Step::Decide(placed.len() - 1))));
            }
            Step::AddStock => {
                let mut update = Envelope::new(Event::VoucherUpdated(VoucherUpdated {
                    voucher_id: voucher,
                    paused: None,
                    ends_at: None,
                    add_stock: added,
                }));
                update.emitted_at = at(now);
                sale.send(false, &update)?;
                gate_left += added;
                stock_left += added;
            }
            Step::Decide(index) => {
                let (order, user) = placed[index].clone();
                let quantity = u64::from(order.quantity);
                if stock_left < quantity {
                    sale.orders(Event::OrderFailed(OrderFailed {
                        order,
                        decided_at: at(now),
                        reason: FailReason::SoldOut,
                    }))?;
                    release(&mut held, user, quantity);
                    continue;
                }
                stock_left -= quantity;
                sale.orders(Event::OrderCreated(OrderCreated {
                    order,
                    decided_at: at(now),
                    remaining: stock_left,
                    pay_by: None,
                }))?;
                let fate = random.below(100);
                let after = seconds(1) + random.below(seconds(20) as u64) as i64;
                if fate < 80 {
                    queue.push(Reverse((now + after, Step::Confirm(index))));
                } else if fate < 88 {
                    queue.push(Reverse((now + after, Step::Cancel(index, false))));
                } else {
                    queue.push(Reverse((now + seconds(HOLD_SECONDS), Step::Cancel(index, true))));
                }
            }
            Step::Confirm(index) => {
                let order = placed[index].0.clone();
                sale.sales(Event::ConfirmRequested(OrderRequest {
                    order_id: order.order_id,
                    voucher_id: voucher,
                    reason: None,
                    requested_at: at(now),
                    settled_checkouts: None,
                }))?;
                sale.orders(Event::OrderPaid(OrderPaid { order, paid_at: at(now), payment_id: None }))?;
            }
            Step::Cancel(index, expired) => {
                let (order, user) = placed[index].clone();
                let reason = if expired { CancelReason::Expired } else { CancelReason::Requested };
                sale.sales(Event::CancelRequested(OrderRequest {
                    order_id: order.order_id,
                    voucher_id: voucher,
                    reason: Some(reason),
                    requested_at: at(now),
                    settled_checkouts: None,
                }))?;
                let quantity = u64::from(order.quantity);
                stock_left += quantity;
                gate_left += quantity;
                release(&mut held, user, quantity);
                sale.orders(Event::OrderCancelled(OrderCancelled {
                    order,
                    cancelled_at: at(now),
                    reason,
                    remaining: stock_left,
                }))?;
            }
        }
    }
    sale.producer.flush(Duration::from_secs(120))?;
    eprintln!(
        "Produced a sale of {} orders ({} events) for voucher {} to {} and {} in {:.1} s.",
        placed.len(),
        sale.written,
        sale.voucher,
        topics.sales,
        topics.orders,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// The gate gives a user's units back.
fn release(held: &mut HashMap<u64, u64>, user: u64, quantity: u64) {
    if let Some(units) = held.get_mut(&user) {
        *units = units.saturating_sub(quantity);
    }
}
