//! What the read side asks of Redis: the server clock admission judges the
//! sale window by, admitted orders the log does not have yet, and sales as
//! the gate holds them (every bucket of a voucher split across shards
//! together: what it still admits is the sum of what each bucket has and
//! what is in transit between two).

use std::collections::HashMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use seckill_core::event::OrderAccepted;
use seckill_core::{OrderId, VoucherId};

use crate::keys::{bucket_outbox_pattern, pending_order_key};
use crate::vouchers::available;
use crate::Gate;

/// A sale as the gate holds it: what admission decides by.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SaleState {
    /// Units for sale in all.
    pub stock: u64,
    /// Units admission still has: what a new order can get.
    pub available: u64,
    pub begins_at: DateTime<Utc>,
    pub ends_at: DateTime<Utc>,
    pub per_user_limit: u32,
    pub paused: bool,
    /// None for vouchers loaded before the gate kept it.
    pub hold_seconds: Option<u32>,
    /// `fcfs`, `queue` (orders need the waiting room's entry token) or
    /// `draw` (orders need a win).
    pub mode: &'static str,
    /// Leading zero bits of the proof of work each order, join or entry
    /// needs (0: none).
    pub challenge_bits: u32,
}

/// A voucher's admission state as Redis holds it: what an audit compares
/// with the log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AdmissionSnapshot {
    pub stock: u64,
    pub remaining: u64,
    /// Units per user id.
    pub bought: HashMap<String, u64>,
}

/// The voucher hash's fields, in the order [`SaleState`] reads them, then
/// those of a split voucher.
const SALE_FIELDS: [&str; 12] = [
    "stock",
    "remaining",
    "begins_ms",
    "ends_ms",
    "limit",
    "paused",
    "hold_seconds",
    "shards",
    "voucher_stock",
    "in_transit",
    "mode",
    "challenge_bits",
];

type SaleFields = (
    Option<u64>,
    Option<u64>,
    Option<i64>,
    Option<i64>,
    Option<u32>,
    Option<String>,
    Option<u32>,
    Option<u32>,
    Option<u64>,
    Option<i64>,
    Option<String>,
    Option<u32>,
);

/// The sale from bucket 0's fields and, for a split voucher, what the other
/// buckets still have.
fn sale(fields: SaleFields, others: u64) -> Option<SaleState> {
    let (stock, remaining, begins_ms, ends_ms, limit, paused, hold_seconds, _, voucher_stock, in_transit, mode, bits) =
        fields;
    remaining?;
    Some(SaleState {
        stock: voucher_stock.or(stock)?,
        available: available(remaining, in_transit).saturating_add(others),
        begins_at: DateTime::from_timestamp_millis(begins_ms?)?,
        ends_at: DateTime::from_timestamp_millis(ends_ms?)?,
        per_user_limit: limit?,
        paused: paused.as_deref() == Some("1"),
        hold_seconds,
        mode: match mode.as_deref() {
            Some("queue") => "queue",
            Some("draw") => "draw",
            _ => "fcfs",
        },
        challenge_bits: bits.unwrap_or(0),
    })
}

impl Gate {
    /// The sales of `vouchers` (None: not in Redis): one round trip, and a
    /// second for the other buckets of split vouchers.
    pub async fn sales(&self, vouchers: &[VoucherId]) -> redis::RedisResult<Vec<Option<SaleState>>> {
        let commands = vouchers
            .iter()
            .map(|voucher| {
                let mut command = redis::cmd("HMGET");
                command.arg(self.keys(*voucher).voucher).arg(&SALE_FIELDS);
                command
            })
            .collect();
        let replies: Vec<SaleFields> = self.redis.query_each(commands).await?;
        let mut others = Vec::new();
        let mut rest = Vec::new();
        for (voucher, reply) in vouchers.iter().zip(&replies) {
            let shards = reply.7.unwrap_or(1);
            if reply.0.is_some() && shards > 1 {
                let layout = self.layouts.learn(*voucher, shards);
                for keys in layout.all_keys(&self.prefix).into_iter().skip(1) {
                    let mut command = redis::cmd("HMGET");
                    command.arg(&keys.voucher).arg(&["remaining", "in_transit"]);
                    rest.push(command);
                    others.push(*voucher);
                }
            }
        }
        let levels: Vec<(Option<u64>, Option<i64>)> = self.redis.query_each(rest).await?;
        let mut elsewhere: HashMap<VoucherId, u64> = HashMap::new();
        for (voucher, (remaining, in_transit)) in others.into_iter().zip(levels) {
            *elsewhere.entry(voucher).or_default() += available(remaining, in_transit);
        }
        Ok(vouchers
            .iter()
            .zip(replies)
            .map(|(voucher, reply)| sale(reply, elsewhere.get(voucher).copied().unwrap_or(0)))
            .collect())
    }

    /// The Redis server's clock (`TIME`): `admit.lua` judges every sale
    /// window by it, so a countdown read from it ends when admission opens.
    pub async fn server_time(&self) -> redis::RedisResult<DateTime<Utc>> {
        let (seconds, micros): (i64, i64) = redis::cmd("TIME").query_async(&mut self.redis.clone()).await?;
        DateTime::from_timestamp(seconds, u32::try_from(micros.clamp(0, 999_999)).unwrap_or(0) * 1_000)
            .ok_or_else(|| redis::RedisError::from((redis::ErrorKind::Parse, "TIME answered an impossible time")))
    }

    /// Redis's clock minus this host's, measured by one `TIME` against the
    /// middle of its round trip (so within half of it), with that round
    /// trip: the platform's clock follows it (`seckill_core::clock`), and
    /// the services' probes report it.
    pub async fn clock_reading(&self) -> redis::RedisResult<(chrono::Duration, std::time::Duration)> {
        let sent = std::time::Instant::now();
        let local_before = Utc::now();
        let redis_time = self.server_time().await?;
        let round_trip = sent.elapsed();
        let local_mid = local_before + chrono::Duration::from_std(round_trip / 2).unwrap_or_default();
        Ok((redis_time - local_mid, round_trip))
    }

    /// What Redis holds for `voucher` now, every bucket together: stock,
    /// remaining (with units in transit between buckets) and units per user
    /// (None: not loaded).
    pub async fn admission_snapshot(&self, voucher: VoucherId) -> redis::RedisResult<Option<AdmissionSnapshot>> {
        let Some(layout) = self.layout(voucher).await? else { return Ok(None) };
        let all = layout.all_keys(&self.prefix);
        let command = |name: &str, key: &str, fields: &[&str]| {
            let mut command = redis::cmd(name);
            command.arg(key).arg(fields);
            command
        };
        type Figures = (Option<u64>, Option<u64>, Option<u64>, Option<i64>);
        let figures: Vec<Figures> = self
            .redis
            .query_each(
                all.iter()
                    .map(|keys| command("HMGET", &keys.voucher, &["stock", "voucher_stock", "remaining", "in_transit"]))
                    .collect(),
            )
            .await?;
        let bought: Vec<HashMap<String, u64>> =
            self.redis.query_each(all.iter().map(|keys| command("HGETALL", &keys.bought, &[])).collect()).await?;
        let Some((Some(stock), voucher_stock, Some(_), _)) = figures.first().copied() else { return Ok(None) };
        Ok(Some(AdmissionSnapshot {
            stock: voucher_stock.unwrap_or(stock),
            remaining: figures.iter().map(|(_, _, remaining, in_transit)| available(*remaining, *in_transit)).sum(),
            bought: bought.into_iter().flatten().collect(),
        }))
    }

    /// The records in the outbox (admitted, not yet published), oldest
    /// first per outbox, at most `limit`: the one stream of a single Redis,
    /// or every bucket's on a cluster.
    pub async fn outbox_records(&self, limit: usize) -> redis::RedisResult<Vec<Vec<u8>>> {
        let streams = match self.single_outbox() {
            Some(stream) => vec![stream.to_owned()],
            None => self.redis.scan(&bucket_outbox_pattern(&self.prefix), "stream").await?,
        };
        let mut records = Vec::new();
        for stream in streams {
            if records.len() >= limit {
                break;
            }
            let reply: redis::streams::StreamRangeReply = redis::cmd("XRANGE")
                .arg(&stream)
                .arg("-")
                .arg("+")
                .arg("COUNT")
                .arg(limit - records.len())
                .query_async(&mut self.redis.clone())
                .await?;
            records.extend(reply.ids.into_iter().filter_map(|entry| match entry.map.get("record") {
                Some(redis::Value::BulkString(bytes)) => Some(bytes.clone()),
                _ => None,
            }));
        }
        Ok(records)
    }

    /// Keeps an admitted order readable by its id for `ttl`, until the log
    /// and the view have it: the ingress writes it before answering `202`,
    /// so the owner can read, cancel and confirm the order at once, through
    /// any ingress. `only_if_missing` never overwrites a record (a replayed
    /// request restores one its first ingress did not get to write).
    pub async fn remember_pending(
        &self,
        order: &OrderAccepted,
        ttl: Duration,
        only_if_missing: bool,
    ) -> redis::RedisResult<()> {
        let record = serde_json::to_vec(order).expect("orders serialize: every field is plain data");
        let mut command = redis::cmd("SET");
        command.arg(pending_order_key(&self.prefix, order.order_id)).arg(record).arg("PX").arg(ttl.as_millis() as u64);
        if only_if_missing {
            command.arg("NX");
        }
        let _: Option<String> = command.query_async(&mut self.redis.clone()).await?;
        Ok(())
    }

    /// The admitted order `order`, while its pending record lasts: the
    /// bare order ([`Gate::remember_pending`]) or the outbox's record
    /// (`admit.lua` writes it on a single Redis), whose envelope fields sit
    /// beside the order's and are passed over.
    pub async fn pending(&self, order: OrderId) -> redis::RedisResult<Option<OrderAccepted>> {
        let raw: Option<Vec<u8>> =
            redis::cmd("GET").arg(pending_order_key(&self.prefix, order)).query_async(&mut self.redis.clone()).await?;
        Ok(raw.and_then(|raw| serde_json::from_slice::<OrderAccepted>(&raw).ok()).filter(|o| o.order_id == order))
    }
}
