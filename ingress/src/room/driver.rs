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

use seckill_gate::{RoomState, MOST_PLACES_PER_ADVANCE};
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
            }
            if discovered.is_none_or(|at| at.elapsed() >= DISCOVER_EVERY) {
                discovered = Some(Instant::now());
                self.discover().await;
            }
            for handle in self.known() {
                self.advance(&handle).await;
            }
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

    async fn advance(&self, handle: &RoomHandle) {
        for _ in 0..MOST_CALLS_PER_TICK {
            let summary = match self.gate.advance_room(handle.voucher).await {
                Ok(summary) => summary,
                Err(error) => {
                    tracing::warn!(%error, voucher = %handle.voucher, "Could not move a waiting room on; retrying.");
                    return;
                }
            };
            match summary.state {
                RoomState::Unknown => {
                    self.forget(handle.voucher);
                    return;
                }
                RoomState::Uncommitted => {
                    // The commitment was lost between the ingress that
                    // opened the room and the log: log it from here.
                    self.forget(handle.voucher);
                    return;
                }
                _ => {}
            }
            handle.update(&summary);
            if summary.served_now + summary.skipped_now < MOST_PLACES_PER_ADVANCE {
                return;
            }
        }
    }
}
