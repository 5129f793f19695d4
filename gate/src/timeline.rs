//! A draw's or a waiting room's own timeline and progress, as the voucher
//! read shows it to every reader: when entries close, the beacon round the
//! draw waits for (if any), when it was drawn, winners and promotions so
//! far; when a room opens, how many wait in it, and the beacon round its
//! pre-queue waits for (if any). Read from the room hash
//! (`lua/queue_open.lua` says what it holds) and, for a room, its line.

use chrono::{DateTime, Utc};
use seckill_core::beacon::BeaconChain;
use seckill_core::VoucherId;

use crate::gate::millis;
use crate::Gate;

/// A draw's timeline.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct DrawTimeline {
    pub entries_open_at: DateTime<Utc>,
    /// When entries close (`draw_at`).
    pub draw_at: DateTime<Utc>,
    pub entries: u64,
    /// The beacon round the ranking takes its seed from, and when it is
    /// published (None: the operator's committed seed).
    pub beacon_round: Option<(u64, DateTime<Utc>)>,
    /// Entries closed and the round is not in yet: the draw waits for it.
    pub awaiting_beacon: bool,
    /// When the winners were selected (None before).
    pub drawn_at: Option<DateTime<Utc>>,
    /// Ranks that won at the draw.
    pub winners: Option<u64>,
    /// Ranks promoted since.
    pub promoted: u64,
}

/// A waiting room's timeline.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct QueueTimeline {
    /// When the room opens for joins.
    pub opens_at: DateTime<Utc>,
    /// Places whose turn has not come yet.
    pub waiting: u64,
    /// The beacon round the pre-queue's shuffle takes its key from, and when
    /// it is published (None: the operator's committed seed).
    pub beacon_round: Option<(u64, DateTime<Utc>)>,
    /// The pre-queue closed and the round is not in yet: nobody is served.
    pub awaiting_beacon: bool,
}

/// The timeline of `voucher`'s draw or room.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Timeline {
    Draw(DrawTimeline),
    Queue(QueueTimeline),
}

const FIELDS: [&str; 15] = [
    "kind",
    "entries_ms",
    "draw_ms",
    "entries",
    "cursor",
    "selected",
    "selected_until",
    "purchase_ms",
    "beacon_round",
    "beacon_wait",
    "beacon_chain",
    "phase",
    "opens_ms",
    "revealed",
    "closed",
];

impl Gate {
    /// `voucher`'s timeline (None: it has no room or draw open).
    pub async fn timeline(&self, voucher: VoucherId) -> redis::RedisResult<Option<Timeline>> {
        let keys = self.keys(voucher);
        let (fields, line): (Vec<Option<String>>, u64) = redis::pipe()
            .cmd("HMGET")
            .arg(&keys.room)
            .arg(&FIELDS)
            .cmd("ZCARD")
            .arg(&keys.line)
            .query_async(&mut self.redis.clone())
            .await?;
        let field = |name: &str| FIELDS.iter().position(|f| *f == name).and_then(|i| fields.get(i).cloned().flatten());
        let number = |name: &str| field(name).and_then(|value| value.parse::<i64>().ok());
        let count = |name: &str| number(name).and_then(|value| u64::try_from(value).ok());
        let chain: Option<BeaconChain> = field("beacon_chain").and_then(|json| serde_json::from_str(&json).ok());
        let beacon_round = count("beacon_round").zip(chain).map(|(round, chain)| (round, chain.round_time(round)));
        if field("kind").as_deref() == Some("draw") {
            let (Some(entries_ms), Some(draw_ms)) = (number("entries_ms"), number("draw_ms")) else {
                return Ok(None);
            };
            let winners = count("selected");
            let drawn_at = number("selected_until").zip(number("purchase_ms")).map(|(until, ms)| millis(until - ms));
            return Ok(Some(Timeline::Draw(DrawTimeline {
                entries_open_at: millis(entries_ms),
                draw_at: millis(draw_ms),
                entries: count("entries").unwrap_or_default(),
                beacon_round,
                // A draw restored past its reveal keeps the flag: only the
                // entering phase waits.
                awaiting_beacon: field("beacon_wait").as_deref() == Some("1")
                    && field("phase").as_deref() == Some("entering")
                    && seckill_core::clock::now().timestamp_millis() >= draw_ms,
                drawn_at: winners.and(drawn_at),
                winners,
                promoted: count("cursor").unwrap_or_default().saturating_sub(winners.unwrap_or(u64::MAX)),
            })));
        }
        let Some(opens_ms) = number("opens_ms") else { return Ok(None) };
        Ok(Some(Timeline::Queue(QueueTimeline {
            opens_at: millis(opens_ms),
            waiting: line.saturating_sub(count("cursor").unwrap_or_default()),
            beacon_round,
            // queue_advance.lua marks the pre-queue closed at the start.
            awaiting_beacon: field("beacon_wait").as_deref() == Some("1")
                && field("closed").as_deref() == Some("1")
                && field("revealed").as_deref() != Some("1"),
        })))
    }
}
