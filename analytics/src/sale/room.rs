//! A waiting room's figures, as the report shows them: places taken
//! before and after the start, places served and skipped, entries spent,
//! how long the served waited, and the room over time.
//!
//! A wait runs from when the place's holder could first be served, the
//! later of their join and the sale's start (nobody is served before the
//! start, so a pre-queue wait counts from it), to the `emitted_at` of the
//! place's `QueueEntryIssued` (the Redis clock when it was served). The
//! place's join is found as the audit defines it ([`QueueLog::join_of`]).

use std::collections::BTreeSet;

use chrono::{DateTime, TimeDelta, Utc};

use super::fold::VoucherLog;
use super::queue::{Pass, QueueLog};
use super::timeline::{Buckets, Step};
use crate::stats::{millis, nearest_rank};

/// Percentiles of the served places' waits, in milliseconds (nearest
/// rank, as `stats` computes latencies).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Wait {
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    /// Served places whose join is in the log (the waits measured).
    pub places: u64,
}

/// One voucher's waiting room.
#[derive(Clone, Debug, PartialEq)]
pub struct Room {
    /// Places taken before the start (`QueueJoined` with `pre_queue`).
    pub joined_pre_queue: u64,
    /// Places taken after it.
    pub joined_after_start: u64,
    /// Distinct users who took a place.
    pub users: u64,
    /// Places taken again after one expired or lapsed (`attempt` > 1).
    pub rejoined: u64,
    /// Places served an entry (`QueueEntryIssued`).
    pub served: u64,
    /// Places skipped (`QueuePlaceExpired`).
    pub expired: u64,
    /// Distinct entries that admitted an order (`QueueEntryUsed`).
    pub entries_used: u64,
    /// Places taken and not passed when the log was read.
    pub waiting: u64,
    /// The sale's start, when the log has the definition.
    pub begins_at: Option<DateTime<Utc>>,
    pub wait: Option<Wait>,
    /// The room's own time axis: from its first record to its last (the
    /// pre-queue fills before the sale's first order, so the sale's axis
    /// would hide it).
    pub buckets: Buckets,
    /// Places taken, served and skipped, cumulative.
    pub joined_steps: Vec<Step>,
    pub served_steps: Vec<Step>,
    pub expired_steps: Vec<Step>,
}

impl Room {
    /// The room of `log` (empty figures for a sale without one).
    pub fn of(log: &VoucherLog) -> Self {
        let room = &log.queue;
        let begins_at = log.definition.as_ref().map(|definition| definition.begins_at);
        let joined_pre_queue = room.joins.values().filter(|join| join.record.pre_queue).count() as u64;
        let joined = room.joins.len() as u64;
        let users: BTreeSet<_> = room.joins.values().map(|join| &join.record.user_id).collect();
        let served = room.passes.values().filter(|pass| matches!(pass.record, Pass::Issued(_))).count() as u64;
        let passed = room.passes.len() as u64;
        let entries: BTreeSet<u64> = room.used.values().map(|used| used.record.entry).collect();
        let buckets = axis(room, begins_at);
        let join_times = room.joins.values().map(|join| join.record.joined_at).collect();
        let pass_times = |issued: bool| {
            let wanted = |pass: &Pass| matches!(pass, Pass::Issued(_)) == issued;
            room.passes.values().filter(|pass| wanted(&pass.record)).map(|pass| pass.emitted_at).collect()
        };
        Self {
            joined_pre_queue,
            joined_after_start: joined - joined_pre_queue,
            users: users.len() as u64,
            rejoined: room.joins.values().filter(|join| join.record.attempt > 1).count() as u64,
            served,
            expired: passed - served,
            entries_used: entries.len() as u64,
            waiting: joined.saturating_sub(passed),
            begins_at,
            wait: wait(room, begins_at),
            buckets,
            joined_steps: cumulative(buckets.origin, join_times),
            served_steps: cumulative(buckets.origin, pass_times(true)),
            expired_steps: cumulative(buckets.origin, pass_times(false)),
        }
    }
}

/// The waits of the served places whose join is in the log.
fn wait(room: &QueueLog, begins_at: Option<DateTime<Utc>>) -> Option<Wait> {
    let mut waits: Vec<TimeDelta> = room
        .passes
        .values()
        .filter(|pass| matches!(pass.record, Pass::Issued(_)))
        .filter_map(|pass| {
            let joined_at = room.join_of(&pass.record)?.record.joined_at;
            let from = begins_at.map_or(joined_at, |begins_at| joined_at.max(begins_at));
            Some(pass.emitted_at - from)
        })
        .collect();
    waits.sort_unstable();
    Some(Wait {
        p50_ms: millis(nearest_rank(&waits, 50)?),
        p90_ms: millis(nearest_rank(&waits, 90)?),
        p99_ms: millis(nearest_rank(&waits, 99)?),
        max_ms: millis(*waits.last()?),
        places: waits.len() as u64,
    })
}

/// From the room's first record to its last (or the sale's start alone).
fn axis(room: &QueueLog, begins_at: Option<DateTime<Utc>>) -> Buckets {
    let times = room
        .joins
        .values()
        .map(|join| join.record.joined_at)
        .chain(room.passes.values().map(|pass| pass.emitted_at))
        .chain(room.reveals.values().map(|reveal| reveal.emitted_at))
        .chain(begins_at);
    let first = times.clone().min();
    let last = times.max();
    let fallback = Utc::now();
    Buckets::covering(first.unwrap_or(fallback), last.unwrap_or(fallback))
}

/// A count rising by one at each time, from 0 at `origin`.
fn cumulative(origin: DateTime<Utc>, mut times: Vec<DateTime<Utc>>) -> Vec<Step> {
    times.sort_unstable();
    let mut steps = vec![Step { at: origin, value: 0 }];
    for (count, at) in times.into_iter().enumerate() {
        let value = count as i64 + 1;
        match steps.last_mut() {
            Some(last) if last.at >= at => last.value = value,
            _ => steps.push(Step { at, value }),
        }
    }
    steps
}
