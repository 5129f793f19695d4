//! Moves every waiting room on, from every ingress.
//!
//! Each tick the advance script runs once per room known here (more often
//! while a call passes as many places as one call may). The script keeps
//! the rate bound and the share of the stock by the Redis clock, so any
//! number of ingresses ticking adds availability, not entries. Rooms are
//! found in the gate's list of rooms, so a room opened through another
//! ingress, or by the processor following the log, is moved on here too;
//! one whose keys expired is dropped. The places of users streaming from
//! this ingress are marked watched often enough that none expires while
//! its holder is there (the shortest idle time a room may have is 5 s).

use std::sync::Arc;
use std::time::{Duration, Instant};

use seckill_core::draw::RANK_CHUNK;
use seckill_gate::{RoomState, RoomSummary, MOST_PLACES_PER_ADVANCE};
use tokio_util::sync::CancellationToken;

use super::{RoomHandle, Rooms};

/// How often every room is moved on: the bound on how late a freed unit
/// or a sell-out reaches the waiters.
const TICK: Duration = Duration::from_millis(100);
/// How often the gate's list of rooms is read.
const DISCOVER_EVERY: Duration = Duration::from_secs(1);
/// How often streamed places are marked watched.
const MARK_WATCHED_EVERY: Duration = Duration::from_secs(2);
/// Most advance calls per room per tick.
const MOST_CALLS_PER_TICK: u32 = 10;
/// Most advance calls per draw per tick: a draw of many entries is ranked
/// and logged a chunk a call, all at `draw_at`, and its winners wait for it.
const MOST_DRAW_CALLS_PER_TICK: u32 = 1_000;
/// How often a room whose sale is over is looked at (its keys outlive the
/// sale by `redis.ended_sale_ttl_seconds`, a week by default; an admin may
/// still move the end later).
const ENDED_EVERY: Duration = Duration::from_secs(5);

impl Rooms {
    /// Runs until `closing`.
    pub(crate) async fn drive(self: Arc<Self>, closing: CancellationToken) {
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        let mut discovered: Option<Instant> = None;
        let mut marked = Instant::now();
        loop {
            tokio::select! {
                () = closing.cancelled() => break,
                _ = tick.tick() => {}
                () = self.nudge.notified() => {}
            }
            if discovered.is_none_or(|at| at.elapsed() >= DISCOVER_EVERY) {
                discovered = Some(Instant::now());
                self.discover().await;
            }
            let (mut waiting, mut open) = (0, 0);
            let rooms = self.known();
            for handle in &rooms {
                if handle.ended_and_seen_within(ENDED_EVERY) {
                    continue;
                }
                if let Some(summary) = self.advance(handle).await {
                    if !handle.draw && !matches!(summary.state, RoomState::Ended | RoomState::Before) {
                        waiting += summary.places.saturating_sub(summary.cursor);
                    }
                    open += summary.open;
                }
            }
            self.metrics.rooms.set(i64::try_from(rooms.len()).unwrap_or(i64::MAX));
            self.metrics.waiting.set(i64::try_from(waiting).unwrap_or(i64::MAX));
            self.metrics.entries_open.set(i64::try_from(open).unwrap_or(i64::MAX));
            if marked.elapsed() >= MARK_WATCHED_EVERY {
                marked = Instant::now();
                for handle in self.known() {
                    let users = handle.watchers();
                    if users.is_empty() {
                        continue;
                    }
                    if let Err(error) = self.gate.mark_seen(handle.voucher, &users).await {
                        tracing::warn!(%error, voucher = %handle.voucher, "Could not mark streamed places watched.");
                    }
                }
            }
        }
        tracing::info!("Waiting rooms no longer moved on by this ingress.");
    }

    async fn discover(&self) {
        let vouchers = match self.gate.rooms().await {
            Ok(vouchers) => vouchers,
            Err(error) => {
                tracing::warn!(%error, "Could not read the list of waiting rooms; retrying.");
                return;
            }
        };
        for voucher in vouchers {
            match self.handle(voucher).await {
                Ok(Some(_)) => {}
                Ok(None) => {
                    // The sale's keys expired: nothing to move on.
                    if let Err(error) = self.gate.forget_room(voucher).await {
                        tracing::debug!(%error, %voucher, "Could not take an expired room off the list.");
                    }
                }
                Err(error) => tracing::warn!(%error, %voucher, "Could not open a waiting room here; retrying."),
            }
        }
    }

    /// Moves `handle`'s room on; its last summary, unless it is gone.
    async fn advance(&self, handle: &RoomHandle) -> Option<RoomSummary> {
        let mut last = None;
        let (calls, full_call) = if handle.draw {
            (MOST_DRAW_CALLS_PER_TICK, RANK_CHUNK as u64)
        } else {
            (MOST_CALLS_PER_TICK, MOST_PLACES_PER_ADVANCE)
        };
        for _ in 0..calls {
            let advanced = if handle.draw {
                self.gate.advance_draw(handle.voucher).await
            } else {
                self.gate.advance_room(handle.voucher).await
            };
            let summary = match advanced {
                Ok(summary) => summary,
                Err(error) => {
                    tracing::warn!(%error, voucher = %handle.voucher, "Could not move a waiting room on; retrying.");
                    return last;
                }
            };
            match summary.state {
                RoomState::Unknown => {
                    self.forget(handle.voucher);
                    return None;
                }
                RoomState::Uncommitted => {
                    // The commitment was lost between the ingress that
                    // opened the room and the log: the next discovery
                    // logs it from here.
                    self.forget(handle.voucher);
                    return None;
                }
                _ => {}
            }
            if summary.state == RoomState::AwaitingBeacon {
                self.fetch_beacon(handle.voucher);
            }
            if handle.draw {
                // Wins this call gave: each counted once, by the ingress
                // whose call gave it.
                self.metrics.wins.inc_by(summary.skipped_now);
            } else if summary.state == RoomState::Ranking {
                // A beacon's pre-queue being keyed: places, not entries.
            } else {
                self.metrics.entries_issued.inc_by(summary.served_now);
                self.metrics.places_expired.inc_by(summary.skipped_now);
            }
            handle.update(&summary);
            let worked = if handle.draw || summary.state == RoomState::Ranking {
                summary.served_now
            } else {
                summary.served_now + summary.skipped_now
            };
            let more = worked >= full_call;
            last = Some(summary);
            if !more {
                break;
            }
        }
        last
    }
}
