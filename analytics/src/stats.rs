//! Per-voucher sale statistics, computed from the log alone.
//!
//! [`Stats`] is a pure fold over the events of the sales and orders topics:
//! feed it every [`Envelope`] in any order with [`Stats::apply`], then
//! [`Stats::finish`] gives one [`VoucherStats`] per voucher. Everything is
//! counted by order id (and stock updates by event id), so a record delivered
//! twice, or an outcome the processor re-emitted, counts once.
//!
//! Definitions:
//! - `accepted`: distinct orders with an `OrderAccepted`; `created`,
//!   `failed`, `cancelled`, `paid`: distinct orders with that outcome (an
//!   order claimed free by its owner is paid too).
//! - `units_sold`: units of created orders minus units of cancelled ones.
//! - `stock`: the definition's stock plus every `add_stock`, each update
//!   once by its event id.
//! - Sold out: walk the creations (at `decided_at`) and cancellations (at
//!   `cancelled_at`) in time order, keeping the net units taken. The voucher
//!   is sold out when the net ends at the stock; the order that took the last
//!   unit is the creation that brought the net up to the stock for the last
//!   time (a unit given back and sold again moves it to the later buyer). Its
//!   `accepted_at` is the sell-out time; the sell-out duration runs from the
//!   voucher's first acceptance, and the time from start from `begins_at`.
//! - Latency: `decided_at - accepted_at` of every created or failed order;
//!   p50 and p99 are nearest-rank percentiles, in milliseconds.
//!
//! For queue-mode vouchers, [`Stats::queues`] counts their waiting rooms
//! ([`QueueStats`]): places taken, served and skipped, entries spent. For
//! draw-mode vouchers, [`Stats::draws`] counts their draws ([`DrawStats`]):
//! entries, winners at the draw, promotions, wins spent.

use std::collections::{BTreeMap, HashMap, HashSet};

use chrono::{DateTime, TimeDelta, Utc};
use seckill_core::config::KafkaConfig;
use seckill_core::ids::{OrderId, VoucherId};
use seckill_core::{Envelope, Event};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::AnalyticsError;

mod draw;
mod queue;

pub use draw::DrawStats;
pub use queue::QueueStats;

/// One voucher's sale as the log tells it. Field names are the `--json`
/// output's and stay stable.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct VoucherStats {
    pub voucher_id: VoucherId,
    /// Units offered: the definition's stock plus every added stock.
    pub stock: u64,
    /// The sale's start; `None` when the log lacks the definition.
    pub begins_at: Option<DateTime<Utc>>,
    /// Distinct orders the gate admitted.
    pub accepted: u64,
    /// Distinct orders that took their units.
    pub created: u64,
    /// Distinct orders the processor refused.
    pub failed: u64,
    /// Distinct orders that gave their units back.
    pub cancelled: u64,
    /// Distinct orders paid (or, for a free voucher, claimed by their
    /// owner). Older output called it `confirmed`.
    #[serde(alias = "confirmed")]
    pub paid: u64,
    /// Units of created orders minus units of cancelled ones.
    pub units_sold: u64,
    /// Whether the net units sold end at the stock.
    pub sold_out: bool,
    /// The earliest `accepted_at` of the voucher's orders.
    pub first_accepted_at: Option<DateTime<Utc>>,
    /// The order that took the last unit, when sold out.
    pub sold_out_order_id: Option<OrderId>,
    /// That order's `accepted_at`: the sell-out time.
    pub sold_out_at: Option<DateTime<Utc>>,
    /// From the first acceptance to the sell-out time, in milliseconds.
    pub sell_out_ms: Option<f64>,
    /// From `begins_at` to the sell-out time, in milliseconds.
    pub sell_out_since_start_ms: Option<f64>,
    /// Median accept → decision latency, in milliseconds.
    pub latency_p50_ms: Option<f64>,
    /// 99th percentile accept → decision latency, in milliseconds.
    pub latency_p99_ms: Option<f64>,
}

/// The fold: what has been seen of each voucher so far.
#[derive(Debug, Default)]
pub struct Stats {
    vouchers: HashMap<VoucherId, Voucher>,
    /// The waiting rooms of queue-mode vouchers (defined so, or with room
    /// records in the log).
    queues: HashMap<VoucherId, queue::Room>,
    /// The draws of draw-mode vouchers (defined so, or with draw records in
    /// the log).
    draws: HashMap<VoucherId, draw::Draw>,
}

/// One voucher's facts, each keyed so that duplicates collapse.
#[derive(Debug, Default)]
struct Voucher {
    /// From `VoucherCreated` (the same on every copy of it).
    stock: Option<u64>,
    begins_at: Option<DateTime<Utc>>,
    /// Added stock by update event id: an update counts once.
    added: HashMap<Uuid, u64>,
    /// `accepted_at` of each order with an `OrderAccepted`.
    accepted: HashMap<OrderId, DateTime<Utc>>,
    /// The decision of each decided order.
    decided: HashMap<OrderId, Decision>,
    /// Cancelled orders.
    cancelled: HashMap<OrderId, Cancellation>,
    /// Paid orders.
    paid: HashSet<OrderId>,
}

/// How the processor decided one order.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Decision {
    created: bool,
    quantity: u32,
    accepted_at: DateTime<Utc>,
    decided_at: DateTime<Utc>,
    /// Breaks ties between two different decisions of one order (which the
    /// processor never makes) so the result does not depend on read order.
    event_id: Uuid,
}

#[derive(Clone, Copy, Debug, PartialEq)]
struct Cancellation {
    quantity: u32,
    cancelled_at: DateTime<Utc>,
}

impl Stats {
    /// An empty fold.
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes one event into account. The order of calls does not matter.
    pub fn apply(&mut self, envelope: &Envelope) {
        let voucher = self.vouchers.entry(envelope.event.voucher_id()).or_default();
        match &envelope.event {
            Event::VoucherCreated(created) => {
                voucher.stock = Some(created.stock);
                voucher.begins_at = Some(created.begins_at);
                if created.queue.is_some() {
                    self.queues.entry(created.voucher_id).or_default();
                }
                if created.draw.is_some() {
                    self.draws.entry(created.voucher_id).or_default();
                }
            }
            Event::VoucherUpdated(update) => {
                if update.add_stock > 0 {
                    voucher.added.insert(envelope.event_id, update.add_stock);
                }
            }
            Event::OrderAccepted(order) => {
                voucher.accepted.insert(order.order_id, order.accepted_at);
            }
            Event::OrderCreated(created) => voucher.decide(
                Decision {
                    created: true,
                    quantity: created.order.quantity,
                    accepted_at: created.order.accepted_at,
                    decided_at: created.decided_at,
                    event_id: envelope.event_id,
                },
                created.order.order_id,
            ),
            Event::OrderFailed(failed) => voucher.decide(
                Decision {
                    created: false,
                    quantity: failed.order.quantity,
                    accepted_at: failed.order.accepted_at,
                    decided_at: failed.decided_at,
                    event_id: envelope.event_id,
                },
                failed.order.order_id,
            ),
            Event::OrderCancelled(cancelled) => {
                let incoming =
                    Cancellation { quantity: cancelled.order.quantity, cancelled_at: cancelled.cancelled_at };
                voucher
                    .cancelled
                    .entry(cancelled.order.order_id)
                    .and_modify(|kept| {
                        if incoming.cancelled_at < kept.cancelled_at {
                            *kept = incoming;
                        }
                    })
                    .or_insert(incoming);
            }
            Event::OrderPaid(paid) => {
                voucher.paid.insert(paid.order.order_id);
            }
            Event::QueueSeedCommitted(_)
            | Event::QueueJoined(_)
            | Event::QueueSeedRevealed(_)
            | Event::QueueEntryIssued(_)
            | Event::QueuePlaceExpired(_)
            | Event::QueueEntryUsed(_) => {
                self.queues.entry(envelope.event.voucher_id()).or_default().apply(envelope);
            }
            Event::DrawSeedCommitted(_)
            | Event::DrawEntered(_)
            | Event::DrawSeedRevealed(_)
            | Event::DrawRanked(_)
            | Event::DrawWinnersSelected(_)
            | Event::DrawWinnerPromoted(_)
            | Event::DrawWinUsed(_) => {
                self.draws.entry(envelope.event.voucher_id()).or_default().apply(envelope);
            }
            Event::CancelRequested(_)
            | Event::ConfirmRequested(_)
            | Event::PaymentReceived(_)
            | Event::RefundRequested(_)
            | Event::PaymentRefunded(_)
            | Event::WindowsExtended(_)
            | Event::CheckoutOpened(_) => {}
        }
    }

    /// One entry per voucher seen, ordered by voucher id (UUIDv7, so by
    /// creation time).
    pub fn finish(&self) -> Vec<VoucherStats> {
        let sorted: BTreeMap<_, _> = self.vouchers.iter().collect();
        sorted.into_iter().map(|(id, voucher)| voucher.summarise(*id)).collect()
    }

    /// The waiting room of each queue-mode voucher seen, ordered by
    /// voucher id like [`Stats::finish`].
    pub fn queues(&self) -> Vec<QueueStats> {
        let sorted: BTreeMap<_, _> = self.queues.iter().collect();
        sorted.into_iter().map(|(id, room)| room.summarise(*id)).collect()
    }

    /// The draw of each draw-mode voucher seen, ordered by voucher id like
    /// [`Stats::finish`].
    pub fn draws(&self) -> Vec<DrawStats> {
        let sorted: BTreeMap<_, _> = self.draws.iter().collect();
        sorted.into_iter().map(|(id, draw)| draw.summarise(*id)).collect()
    }
}

impl Voucher {
    fn decide(&mut self, incoming: Decision, order: OrderId) {
        self.decided
            .entry(order)
            .and_modify(|kept| {
                if (incoming.decided_at, incoming.event_id) < (kept.decided_at, kept.event_id) {
                    *kept = incoming;
                }
            })
            .or_insert(incoming);
    }

    fn summarise(&self, voucher_id: VoucherId) -> VoucherStats {
        // Sums of values read from the log saturate: no record, however
        // many or however hostile, can make the fold panic.
        let stock = self.added.values().fold(self.stock.unwrap_or(0), |sum, added| sum.saturating_add(*added));
        let created = self.decided.values().filter(|d| d.created).count() as u64;
        let created_units = saturating_sum(self.decided.values().filter(|d| d.created).map(|d| d.quantity));
        let cancelled_units = saturating_sum(self.cancelled.values().map(|c| c.quantity));
        let first_accepted_at =
            self.accepted.values().copied().chain(self.decided.values().map(|d| d.accepted_at)).min();

        let last_unit = if self.stock.is_some() { self.last_unit(stock) } else { None };
        let sold_out_at = last_unit.map(|(_, accepted_at)| accepted_at);
        let since = |from: Option<DateTime<Utc>>| Some(millis(sold_out_at? - from?));

        let mut latencies: Vec<TimeDelta> = self.decided.values().map(|d| d.decided_at - d.accepted_at).collect();
        latencies.sort_unstable();

        VoucherStats {
            voucher_id,
            stock,
            begins_at: self.begins_at,
            accepted: self.accepted.len() as u64,
            created,
            failed: self.decided.len() as u64 - created,
            cancelled: self.cancelled.len() as u64,
            paid: self.paid.len() as u64,
            units_sold: created_units.saturating_sub(cancelled_units),
            sold_out: last_unit.is_some(),
            first_accepted_at,
            sold_out_order_id: last_unit.map(|(order, _)| order),
            sold_out_at,
            sell_out_ms: since(first_accepted_at),
            sell_out_since_start_ms: since(self.begins_at),
            latency_p50_ms: nearest_rank(&latencies, 50).map(millis),
            latency_p99_ms: nearest_rank(&latencies, 99).map(millis),
        }
    }

    /// The order that took the last unit and its `accepted_at`, if the net
    /// units taken end at `stock`.
    fn last_unit(&self, stock: u64) -> Option<(OrderId, DateTime<Utc>)> {
        if stock == 0 {
            return None;
        }
        // (when, phase, order, units taken): at equal times a cancellation
        // comes first (its units are what a simultaneous creation took),
        // unless it is of an order created at that very time.
        let mut steps: Vec<(DateTime<Utc>, u8, OrderId, i64)> = Vec::new();
        for (order, decision) in self.decided.iter().filter(|(_, d)| d.created) {
            steps.push((decision.decided_at, 1, *order, i64::from(decision.quantity)));
        }
        for (order, cancellation) in &self.cancelled {
            let created_at = self.decided.get(order).filter(|d| d.created).map(|d| d.decided_at);
            let step = match created_at {
                Some(at) if at >= cancellation.cancelled_at => (at, 2),
                _ => (cancellation.cancelled_at, 0),
            };
            steps.push((step.0, step.1, *order, -i64::from(cancellation.quantity)));
        }
        steps.sort_unstable_by_key(|&(at, phase, order, _)| (at, phase, order));

        let stock = i64::try_from(stock).unwrap_or(i64::MAX);
        let mut net = 0i64;
        let mut last_crossing = None;
        for (_, _, order, units) in steps {
            let before = net;
            net = net.saturating_add(units);
            if before < stock && net >= stock {
                last_crossing = Some(order);
            }
        }
        let order = last_crossing.filter(|_| net >= stock)?;
        let decision = self.decided.get(&order)?;
        Some((order, self.accepted.get(&order).copied().unwrap_or(decision.accepted_at)))
    }
}

/// The total of `quantities`, saturating at `u64::MAX`.
fn saturating_sum(quantities: impl Iterator<Item = u32>) -> u64 {
    quantities.fold(0, |sum, quantity| sum.saturating_add(u64::from(quantity)))
}

/// The nearest-rank `percentile` of ascending `sorted`: the smallest value
/// with at least `percentile`% of the values at or below it.
pub(crate) fn nearest_rank<T: Copy>(sorted: &[T], percentile: usize) -> Option<T> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (percentile * sorted.len()).div_ceil(100).max(1);
    sorted.get(rank - 1).copied()
}

/// A duration in milliseconds, with microsecond precision.
pub(crate) fn millis(delta: TimeDelta) -> f64 {
    match delta.num_microseconds() {
        Some(micros) => micros as f64 / 1000.0,
        None => delta.num_milliseconds() as f64,
    }
}

/// Reads the sales and orders topics as they are now and folds them.
/// Records that are not valid events are skipped (and counted in a log line).
pub async fn stats_from_log(kafka: &KafkaConfig) -> Result<Vec<VoucherStats>, AnalyticsError> {
    Ok(fold_log(kafka).await?.finish())
}

/// As [`stats_from_log`], with the waiting rooms of the queue-mode
/// vouchers ([`Stats::queues`]) from the same read.
pub async fn stats_and_queues_from_log(
    kafka: &KafkaConfig,
) -> Result<(Vec<VoucherStats>, Vec<QueueStats>), AnalyticsError> {
    let stats = fold_log(kafka).await?;
    Ok((stats.finish(), stats.queues()))
}

/// Everything `seckill stats` shows, from one read of the log.
#[derive(Clone, Debug, PartialEq)]
pub struct LogStats {
    pub vouchers: Vec<VoucherStats>,
    /// The waiting rooms of the queue-mode vouchers ([`Stats::queues`]).
    pub queues: Vec<QueueStats>,
    /// The draws of the draw-mode vouchers ([`Stats::draws`]).
    pub draws: Vec<DrawStats>,
}

/// As [`stats_from_log`], with the waiting rooms and the draws from the
/// same read.
pub async fn all_stats_from_log(kafka: &KafkaConfig) -> Result<LogStats, AnalyticsError> {
    let stats = fold_log(kafka).await?;
    Ok(LogStats { vouchers: stats.finish(), queues: stats.queues(), draws: stats.draws() })
}

/// The fold of the sales and orders topics as they are now.
async fn fold_log(kafka: &KafkaConfig) -> Result<Stats, AnalyticsError> {
    let topics = kafka.topics();
    let brokers = kafka.brokers.clone();
    let (stats, read, skipped) = tokio::task::spawn_blocking(move || {
        let mut stats = Stats::new();
        let mut skipped = 0u64;
        let read = seckill_kafka::read_to_end(&brokers, &[&topics.sales, &topics.orders], |message| {
            use seckill_kafka::Message;
            match Envelope::decode(message.payload().unwrap_or_default()) {
                Ok(envelope) => stats.apply(&envelope),
                Err(_) => skipped += 1,
            }
        });
        (stats, read, skipped)
    })
    .await
    .map_err(|error| AnalyticsError::Task(format!("reading the log: {error}")))?;
    let read = read?;
    if skipped > 0 {
        tracing::warn!(read, skipped, "Skipped records that are not valid events.");
    }
    Ok(stats)
}

#[cfg(test)]
mod tests {
    use seckill_core::event::{
        CancelReason, FailReason, OrderAccepted, OrderCancelled, OrderCreated, OrderFailed, OrderPaid, VoucherCreated,
        VoucherUpdated,
    };
    use seckill_core::ids::UserId;

    use super::*;

    /// A point in time `ms` milliseconds into the sale.
    fn at(ms: i64) -> DateTime<Utc> {
        DateTime::from_timestamp_millis(1_800_000_000_000 + ms).expect("in range")
    }

    struct Sale {
        voucher: VoucherId,
        events: Vec<Envelope>,
    }

    impl Sale {
        fn new(stock: u64) -> Self {
            let voucher = VoucherId::generate();
            let mut sale = Self { voucher, events: Vec::new() };
            sale.push(Event::VoucherCreated(VoucherCreated {
                voucher_id: voucher,
                stock,
                per_user_limit: 10,
                begins_at: at(-1_000),
                ends_at: at(3_600_000),
                hold_seconds: 0,
                shards: 1,
                title: None,
                description: None,
                price: 0,
                currency: None,
                queue: None,
                draw: None,
                challenge_bits: 0,
            }));
            sale
        }

        fn push(&mut self, event: Event) -> Envelope {
            let envelope = Envelope::new(event);
            self.events.push(envelope.clone());
            envelope
        }

        fn accept(&mut self, quantity: u32, accepted_ms: i64) -> OrderAccepted {
            let order = OrderAccepted {
                order_id: OrderId::generate(),
                voucher_id: self.voucher,
                user_id: UserId::parse("user").expect("valid"),
                quantity,
                accepted_at: at(accepted_ms),
                amount: 0,
                currency: None,
                idempotency_key: None,
            };
            self.push(Event::OrderAccepted(order.clone()));
            order
        }

        fn create(&mut self, order: &OrderAccepted, decided_ms: i64) -> Envelope {
            self.push(Event::OrderCreated(OrderCreated {
                order: order.clone(),
                decided_at: at(decided_ms),
                remaining: 0,
                pay_by: None,
            }))
        }

        fn fail(&mut self, order: &OrderAccepted, decided_ms: i64) -> Envelope {
            self.push(Event::OrderFailed(OrderFailed {
                order: order.clone(),
                decided_at: at(decided_ms),
                reason: FailReason::SoldOut,
            }))
        }

        fn cancel(&mut self, order: &OrderAccepted, cancelled_ms: i64) -> Envelope {
            self.push(Event::OrderCancelled(OrderCancelled {
                order: order.clone(),
                cancelled_at: at(cancelled_ms),
                reason: CancelReason::Requested,
                remaining: 0,
            }))
        }

        fn stats(&self) -> VoucherStats {
            let mut stats = Stats::new();
            self.events.iter().for_each(|event| stats.apply(event));
            let mut all = stats.finish();
            assert_eq!(all.len(), 1);
            all.remove(0)
        }
    }

    #[test]
    fn duplicates_count_once() {
        let mut sale = Sale::new(10);
        let first = sale.accept(2, 0);
        let second = sale.accept(1, 10);
        let redelivered = sale.events.last().cloned().expect("an event");
        sale.events.push(redelivered);
        let created = sale.create(&first, 5);
        sale.events.push(created.clone());
        sale.events.push(created);
        sale.fail(&second, 30);
        let update = sale.push(Event::VoucherUpdated(VoucherUpdated {
            voucher_id: sale.voucher,
            paused: None,
            ends_at: None,
            add_stock: 5,
        }));
        sale.events.push(update);
        let paid = sale.push(Event::OrderPaid(OrderPaid { order: first.clone(), paid_at: at(40), payment_id: None }));
        sale.events.push(paid);

        let stats = sale.stats();
        assert_eq!((stats.accepted, stats.created, stats.failed, stats.paid, stats.cancelled), (2, 1, 1, 1, 0));
        assert_eq!((stats.units_sold, stats.stock), (2, 15));
        assert!(!stats.sold_out);
        assert_eq!((stats.sold_out_at, stats.sell_out_ms), (None, None));
        assert_eq!(stats.first_accepted_at, Some(at(0)));
    }

    #[test]
    fn the_result_does_not_depend_on_the_order_of_events() {
        let mut sale = Sale::new(2);
        let a = sale.accept(1, 0);
        let b = sale.accept(1, 1);
        let c = sale.accept(1, 2);
        sale.create(&a, 3);
        sale.create(&b, 4);
        sale.cancel(&a, 20);
        sale.create(&c, 25);
        let forward = sale.stats();
        sale.events.reverse();
        assert_eq!(sale.stats(), forward);
        sale.events.swap(0, 3);
        sale.events.swap(2, 5);
        assert_eq!(sale.stats(), forward);
    }

    #[test]
    fn cancellations_give_units_back_and_the_resale_is_the_sell_out() {
        let mut sale = Sale::new(2);
        let a = sale.accept(1, 100);
        let b = sale.accept(1, 150);
        sale.create(&a, 110);
        sale.create(&b, 160);
        sale.cancel(&a, 500);
        let c = sale.accept(1, 900);
        sale.create(&c, 905);

        let stats = sale.stats();
        assert_eq!((stats.created, stats.cancelled, stats.units_sold), (3, 1, 2));
        assert!(stats.sold_out);
        assert_eq!((stats.sold_out_order_id, stats.sold_out_at), (Some(c.order_id), Some(at(900))));
        assert_eq!(stats.sell_out_ms, Some(800.0));
        assert_eq!(stats.sell_out_since_start_ms, Some(1_900.0));
    }

    #[test]
    fn sold_out_then_a_unit_given_back_is_not_sold_out() {
        let mut sale = Sale::new(2);
        let a = sale.accept(1, 0);
        let b = sale.accept(1, 1);
        sale.create(&a, 2);
        sale.create(&b, 3);
        assert_eq!(sale.stats().sold_out_order_id, Some(b.order_id));
        sale.cancel(&b, 50);
        let stats = sale.stats();
        assert_eq!((stats.sold_out, stats.sold_out_order_id, stats.units_sold), (false, None, 1));
    }

    #[test]
    fn sell_out_follows_decisions_not_acceptances_and_counts_units() {
        let mut sale = Sale::new(5);
        let big = sale.accept(3, 0);
        let small = sale.accept(2, 5);
        let late = sale.accept(1, 6);
        // Decided in the other order: the big order takes the last units.
        sale.create(&small, 7);
        sale.create(&big, 9);
        sale.fail(&late, 12);
        let stats = sale.stats();
        assert!(stats.sold_out);
        assert_eq!((stats.sold_out_order_id, stats.sell_out_ms), (Some(big.order_id), Some(0.0)));
        assert_eq!((stats.units_sold, stats.failed), (5, 1));
    }

    #[test]
    fn added_stock_must_sell_too() {
        let mut sale = Sale::new(1);
        let a = sale.accept(1, 0);
        sale.create(&a, 1);
        assert!(sale.stats().sold_out);
        sale.push(Event::VoucherUpdated(VoucherUpdated {
            voucher_id: sale.voucher,
            paused: None,
            ends_at: None,
            add_stock: 1,
        }));
        assert!(!sale.stats().sold_out);
        let b = sale.accept(1, 40);
        sale.create(&b, 41);
        assert_eq!(sale.stats().sold_out_order_id, Some(b.order_id));
    }

    #[test]
    fn latency_percentiles_are_nearest_rank() {
        let mut sale = Sale::new(1_000);
        // Latencies 1..=200 ms over created and failed orders.
        for i in 0..200 {
            let order = sale.accept(1, i * 1_000);
            if i % 3 == 0 {
                sale.fail(&order, i * 1_000 + i + 1);
            } else {
                sale.create(&order, i * 1_000 + i + 1);
            }
        }
        let stats = sale.stats();
        assert_eq!((stats.latency_p50_ms, stats.latency_p99_ms), (Some(100.0), Some(198.0)));

        assert_eq!(nearest_rank(&[7], 50), Some(7));
        assert_eq!(nearest_rank(&[7], 99), Some(7));
        assert_eq!(nearest_rank(&[1, 2, 3, 4], 50), Some(2));
        assert_eq!(nearest_rank(&[1, 2, 3, 4], 99), Some(4));
        assert_eq!(nearest_rank::<u8>(&[], 50), None);
    }

    #[test]
    fn sub_millisecond_latencies_keep_their_precision() {
        let mut sale = Sale::new(3);
        let order = sale.accept(1, 0);
        sale.push(Event::OrderCreated(OrderCreated {
            order: order.clone(),
            decided_at: order.accepted_at + TimeDelta::microseconds(1_250),
            remaining: 2,
            pay_by: None,
        }));
        assert_eq!(sale.stats().latency_p50_ms, Some(1.25));
    }

    #[test]
    fn vouchers_are_kept_apart_and_sorted_by_id() {
        let one = Sale::new(1);
        let mut two = Sale::new(1);
        let order = two.accept(1, 0);
        two.create(&order, 1);
        let mut stats = Stats::new();
        two.events.iter().chain(&one.events).for_each(|event| stats.apply(event));
        let all = stats.finish();
        assert_eq!(all.iter().map(|s| s.voucher_id).collect::<Vec<_>>(), vec![one.voucher, two.voucher]);
        assert_eq!((all[0].created, all[1].created, all[1].sold_out), (0, 1, true));
    }
}
