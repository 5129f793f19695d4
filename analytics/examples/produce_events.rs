//! Fills a topic with realistic events for `scripts/bench-replay`: voucher
//! definitions, then admitted orders and their outcomes, keyed by voucher.
//!
//! ```text
//! cargo run --release -p seckill-analytics --example produce_events -- BROKERS TOPIC_PREFIX EVENTS
//! ```
//! Writes to `<TOPIC_PREFIX>.sales` (created with 6 partitions, beside an
//! empty `<TOPIC_PREFIX>.orders`).

use std::time::{Duration, Instant};

use chrono::Utc;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::ClientConfig;
use seckill_core::event::{Event, OrderAccepted, OrderCreated, VoucherCreated};
use seckill_core::{Envelope, OrderId, UserId, VoucherId};

/// Distinct vouchers the events spread over.
const VOUCHERS: usize = 500;
const PARTITIONS: i32 = 6;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, brokers, prefix, events] = args.as_slice() else {
        return Err("usage: produce_events BROKERS TOPIC_PREFIX EVENTS".into());
    };
    let events: usize = events.parse()?;
    let topics = seckill_core::topics::Topics::with_prefix(prefix);
    let topic = topics.sales;
    // The orders topic too, empty: `seckill export` reads both, as a platform's log has them.
    let specs = [&topic, &topics.orders]
        .map(|name| seckill_kafka::TopicSpec { name, retention: seckill_kafka::Retention::Forever });
    seckill_kafka::ensure_topics(brokers, &specs, PARTITIONS, 1).await?;

    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("linger.ms", "20")
        .set("batch.size", "1000000")
        .set("queue.buffering.max.messages", "200000")
        .set("partitioner", "murmur2_random")
        .create()?;
    let started = Instant::now();
    let vouchers: Vec<VoucherId> = (0..VOUCHERS).map(|_| VoucherId::generate()).collect();
    let mut pending = None;
    for i in 0..events {
        let voucher = vouchers[i % VOUCHERS];
        let now = Utc::now();
        let event = if i < VOUCHERS {
            Event::VoucherCreated(VoucherCreated {
                voucher_id: voucher,
                stock: 1_000_000,
                per_user_limit: 5,
                begins_at: now,
                ends_at: now + chrono::Duration::hours(1),
                hold_seconds: 0,
                shards: 1,
                title: None,
                description: None,
                price: 0,
                currency: None,
                queue: None,
                draw: None,
                challenge_bits: 0,
            })
        } else if let Some(order) = pending.take() {
            Event::OrderCreated(OrderCreated {
                order,
                decided_at: now,
                remaining: 1_000_000 - (i as u64 / 2),
                pay_by: None,
            })
        } else {
            let order = OrderAccepted {
                order_id: OrderId::generate(),
                voucher_id: voucher,
                user_id: UserId::parse(&format!("user-{}", i % 50_000))?,
                quantity: 1 + (i % 3) as u32,
                accepted_at: now,
                amount: 0,
                currency: None,
                idempotency_key: None,
            };
            pending = Some(order.clone());
            Event::OrderAccepted(order)
        };
        let key = voucher.to_string();
        let payload = Envelope::new(event).encode();
        loop {
            match producer.send(BaseRecord::to(&topic).key(&key).payload(&payload)) {
                Ok(()) => break,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _)) => {
                    producer.poll(Duration::from_millis(10));
                }
                Err((error, _)) => return Err(error.into()),
            }
        }
        if i % 1000 == 0 {
            producer.poll(Duration::ZERO);
        }
    }
    producer.flush(Duration::from_secs(120))?;
    eprintln!("Produced {events} events to {topic} in {:.1} s.", started.elapsed().as_secs_f64());
    Ok(())
}
