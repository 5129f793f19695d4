//! Writes one clean draw, as the platform would have logged it, as JSON
//! Lines on stdout (the form `seckill replay` writes) or to the sales and
//! orders topics, for trying and measuring `seckill draw verify` without
//! a running platform.
//!
//! ```text
//! cargo run --release -p seckill-analytics --example draw_log -- ENTRIES STOCK > draw.jsonl
//! seckill draw verify --voucher ID --from draw.jsonl       # ID: printed on stderr
//! cargo run --release -p seckill-analytics --example draw_log -- ENTRIES STOCK BROKERS TOPIC_PREFIX
//! SECKILL_KAFKA__BROKERS=BROKERS SECKILL_KAFKA__TOPIC_PREFIX=TOPIC_PREFIX seckill draw verify --voucher ID
//! ```
//!
//! The draw: a draw-mode voucher of STOCK units, one per user; the seed
//! committed; ENTRIES users entering one after the other; the reveal at
//! `draw_at`; the whole ranking in chunks of 1,000; ranks 1..=W winning
//! (W = min(STOCK, ENTRIES)); every winner but one in ten ordering with
//! their win; then as many ranks promoted as wins went unused, each of
//! them ordering. Defaults: 100,000 entries, 1,000 units.

use std::io::{BufWriter, Write};
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::ClientConfig;
use seckill_core::draw::{self, DrawSettings, RANK_CHUNK};
use seckill_core::event::{
    DrawEntered, DrawRanked, DrawSeedCommitted, DrawSeedRevealed, DrawWinUsed, DrawWinnerPromoted, DrawWinnersSelected,
    Event, OrderAccepted, OrderCreated, VoucherCreated,
};
use seckill_core::{queue, Envelope, OrderId, UserId, VoucherId};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let entries: u64 = args.next().map_or(Ok(100_000), |arg| arg.parse())?;
    let stock: u64 = args.next().map_or(Ok(1_000), |arg| arg.parse())?;
    let voucher = VoucherId::generate();
    let sink = match (args.next(), args.next()) {
        (Some(brokers), Some(prefix)) => Sink::kafka(&brokers, &prefix, voucher).await?,
        (None, None) => Sink::Stdout(BufWriter::new(std::io::stdout().lock())),
        _ => return Err("usage: draw_log [ENTRIES [STOCK [BROKERS TOPIC_PREFIX]]]".into()),
    };
    let start = Utc::now() - TimeDelta::hours(2);
    let at = |ms: i64| start + TimeDelta::milliseconds(ms);
    let draw_ms = 3_600_000;
    let settings = DrawSettings { entries_open_at: at(0), draw_at: at(draw_ms), purchase_seconds: 600, beacon: None };
    let mut out = Log { sink, written: 0 };

    out.write(
        at(0),
        Event::VoucherCreated(VoucherCreated {
            voucher_id: voucher,
            stock,
            per_user_limit: 1,
            begins_at: at(draw_ms),
            ends_at: at(draw_ms + 3_600_000),
            hold_seconds: 0,
            shards: 1,
            title: Some("A draw".to_owned()),
            description: None,
            price: 0,
            currency: None,
            queue: None,
            draw: Some(settings),
            challenge_bits: 0,
        }),
    )?;
    let seed = queue::new_seed();
    out.write(
        at(1),
        Event::DrawSeedCommitted(DrawSeedCommitted {
            voucher_id: voucher,
            seed_hash: queue::seed_commitment(&seed),
            sealed_seed: None,
        }),
    )?;
    let entrants: Vec<UserId> =
        (1..=entries).map(|i| UserId::parse(&format!("user{i:07}"))).collect::<Result<_, _>>()?;
    // Entries spread over the hour before the draw.
    let spacing = (draw_ms - 10) as f64 / entries.max(1) as f64;
    for (seq, user) in (1u64..).zip(&entrants) {
        let when = at(2 + (seq as f64 * spacing) as i64);
        out.write(
            when,
            Event::DrawEntered(DrawEntered { voucher_id: voucher, user_id: user.clone(), entered_at: when, seq }),
        )?;
    }
    out.write(
        at(draw_ms),
        Event::DrawSeedRevealed(DrawSeedRevealed {
            voucher_id: voucher,
            seed: seed.clone(),
            entries,
            entries_hash: draw::entries_hash(&entrants),
            beacon: None,
        }),
    )?;
    let ranking = draw::ranking(&seed, &entrants);
    let chunks = ranking.len().div_ceil(RANK_CHUNK) as u64;
    for (chunk, users) in (0u64..).zip(ranking.chunks(RANK_CHUNK)) {
        let first_rank = chunk * RANK_CHUNK as u64 + 1;
        let ranked = DrawRanked { voucher_id: voucher, chunk, chunks, first_rank, users: users.to_vec() };
        out.write(at(draw_ms + 1), Event::DrawRanked(ranked))?;
    }
    let winners = stock.min(entries);
    let until = at(draw_ms + 2 + 600_000);
    out.write(
        at(draw_ms + 2),
        Event::DrawWinnersSelected(DrawWinnersSelected { voucher_id: voucher, winners, purchase_until: until }),
    )?;
    let mut left = stock;
    let mut order = |out: &mut Log<_>, user: &UserId, rank: u64, ms: i64| -> Result<(), Written> {
        let accepted = OrderAccepted {
            order_id: OrderId::generate(),
            voucher_id: voucher,
            user_id: user.clone(),
            quantity: 1,
            accepted_at: at(ms),
            amount: 0,
            currency: None,
            idempotency_key: None,
        };
        out.write(at(ms), Event::OrderAccepted(accepted.clone()))?;
        let used = DrawWinUsed { voucher_id: voucher, user_id: user.clone(), rank, order_id: accepted.order_id };
        out.write(at(ms), Event::DrawWinUsed(used))?;
        left -= 1;
        out.write(
            at(ms + 5),
            Event::OrderCreated(OrderCreated {
                order: accepted,
                decided_at: at(ms + 5),
                remaining: left,
                pay_by: None,
            }),
        )
    };
    let mut unused = 0usize;
    for (rank, user) in (1u64..).zip(&ranking).take(winners as usize) {
        if rank % 10 == 0 {
            unused += 1;
            continue;
        }
        order(&mut out, user, rank, draw_ms + 100 + rank as i64)?;
    }
    // The unused wins lapse; the next ranks win, and order.
    let lapsed = draw_ms + 2 + 600_000;
    for (rank, user) in (winners + 1..).zip(ranking.iter().skip(winners as usize)).take(unused) {
        let purchase_until = at(lapsed + 600_000);
        out.write(
            at(lapsed),
            Event::DrawWinnerPromoted(DrawWinnerPromoted {
                voucher_id: voucher,
                user_id: user.clone(),
                rank,
                purchase_until,
            }),
        )?;
        order(&mut out, user, rank, lapsed + 100 + rank as i64)?;
    }
    out.finish()?;
    eprintln!("voucher {voucher}: {entries} entries, {winners} winners, {} records", out.written);
    Ok(())
}

/// Why a record could not be written.
type Written = Box<dyn std::error::Error>;

/// Where the records go.
enum Sink<W: Write> {
    /// JSON Lines.
    Stdout(BufWriter<W>),
    /// The topics, keyed by the voucher as the platform keys them.
    Kafka { producer: BaseProducer, sales: String, orders: String, key: String },
}

impl<W: Write> Sink<W> {
    async fn kafka(brokers: &str, prefix: &str, voucher: VoucherId) -> Result<Self, Written> {
        let topics = seckill_core::topics::Topics::with_prefix(prefix);
        let kept = |name| seckill_kafka::TopicSpec { name, retention: seckill_kafka::Retention::Forever };
        seckill_kafka::ensure_topics(brokers, &[kept(&topics.sales), kept(&topics.orders)], 6, 1).await?;
        let producer: BaseProducer = ClientConfig::new()
            .set("bootstrap.servers", brokers)
            .set("linger.ms", "20")
            .set("enable.idempotence", "true")
            .set("partitioner", "murmur2_random")
            .create()?;
        Ok(Self::Kafka { producer, sales: topics.sales, orders: topics.orders, key: voucher.to_string() })
    }
}

/// The records being written.
struct Log<W: Write> {
    sink: Sink<W>,
    written: u64,
}

impl<W: Write> Log<W> {
    fn write(&mut self, emitted_at: DateTime<Utc>, event: Event) -> Result<(), Written> {
        let orders_topic = matches!(event, Event::OrderCreated(_));
        let mut envelope = Envelope::new(event);
        envelope.emitted_at = emitted_at;
        let payload = envelope.encode();
        match &mut self.sink {
            Sink::Stdout(out) => {
                out.write_all(&payload)?;
                out.write_all(b"\n")?;
            }
            Sink::Kafka { producer, sales, orders, key } => {
                let topic = if orders_topic { orders } else { sales };
                loop {
                    match producer.send(BaseRecord::to(topic.as_str()).key(key.as_str()).payload(&payload)) {
                        Ok(()) => break,
                        Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _)) => {
                            producer.poll(Duration::from_millis(10));
                        }
                        Err((error, _)) => return Err(error.into()),
                    }
                }
                producer.poll(Duration::ZERO);
            }
        }
        self.written += 1;
        Ok(())
    }

    fn finish(&mut self) -> Result<(), Written> {
        match &mut self.sink {
            Sink::Stdout(out) => out.flush()?,
            Sink::Kafka { producer, .. } => producer.flush(Duration::from_secs(120))?,
        }
        Ok(())
    }
}
