//! The draws of draw-mode sales, as this ingress serves them: an entrant's
//! status from their entry and the draw's latest summary.
//!
//! A draw is driven like a waiting room ([`super::driver`]): every ingress
//! moves it on each tick, the scripts keep its state, and its summary is
//! held in the same `watch` channel, so entrants waiting for the draw (or
//! for a returned unit) are woken from memory.

use std::sync::Arc;

use chrono::{DateTime, SecondsFormat, Utc};
use seckill_core::{OrderId, UserId, VoucherId};
use seckill_gate::{Entry, EntryState, RoomState};
use seckill_web::ApiError;
use serde::Serialize;
use warp::http::StatusCode;

use super::{RoomError, RoomHandle, RoomView, Rooms};

/// What an entrant is told: `GET …/entries/me`, its long-poll and its
/// stream.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct DrawStatus {
    pub(crate) voucher_id: VoucherId,
    /// `not_entered`, `entered` (the draw is not made yet), `not_selected` (drawn past
    /// the winners: a returned unit may still promote the entry), `won`,
    /// `promoted` (won later, as a unit came free), or `lapsed` (the
    /// window closed unused).
    pub(crate) state: &'static str,
    /// The entry's number in the order entries were taken.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) seq: Option<u64>,
    /// The rank the draw gave (1 is drawn first); null before the draw.
    pub(crate) rank: Option<u64>,
    /// Entries in the draw.
    pub(crate) entries: u64,
    /// Ranks that won at the draw; null before it.
    pub(crate) winners: Option<u64>,
    /// Ranks that have won so far (at the draw and promoted).
    pub(crate) won_through: u64,
    /// Ranks between this entry and the next win, while not selected.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) ranks_ahead: Option<u64>,
    /// While won: until when the entrant may order (`POST …/orders`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) purchase_until: Option<String>,
    /// The win admitted this order.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) order_id: Option<OrderId>,
    /// Units left to admit.
    pub(crate) remaining: u64,
    pub(crate) entries_open_at: String,
    pub(crate) draw_at: String,
    /// How long a winner may order once they win.
    pub(crate) purchase_seconds: u64,
    pub(crate) server_time: String,
}

impl DrawStatus {
    /// Whether the entry will not change any more (a waiter stops).
    pub(crate) fn settled(&self) -> bool {
        self.state == "lapsed" || self.order_id.is_some()
    }
}

impl Rooms {
    /// `voucher`'s draw, or the answer saying why there is none.
    pub(crate) async fn draw_of(&self, voucher: VoucherId) -> Result<Arc<RoomHandle>, ApiError> {
        let unreachable = |error: RoomError| {
            tracing::warn!(%error, %voucher, "The draw could not be read.");
            ApiError::unavailable("the draw could not be reached; retry")
        };
        if let Some(handle) = self.handle(voucher).await.map_err(unreachable)? {
            if handle.draw {
                return Ok(handle);
            }
        }
        match self.gate.layout(voucher).await.map_err(|e| unreachable(e.into()))? {
            Some(_) => Err(ApiError::new(
                StatusCode::CONFLICT,
                "not_draw_mode",
                "this sale is not a draw: order directly, or through its waiting room",
            )),
            None => Err(ApiError::unknown_voucher(voucher)),
        }
    }

    /// `user`'s entry in `handle`'s draw, read from Redis, and what they
    /// are told of it (None: the draw's keys are gone).
    pub(crate) async fn entry_status(
        &self,
        handle: &RoomHandle,
        user: &UserId,
    ) -> redis::RedisResult<Option<(Entry, DrawStatus)>> {
        let Some(entry) = self.gate.draw_entry(handle.voucher, user).await? else { return Ok(None) };
        let status = handle.draw_status(&entry, &handle.view.borrow());
        Ok(Some((entry, status)))
    }
}

impl RoomHandle {
    /// An entrant's status from their `entry` and the draw's `view`.
    pub(crate) fn draw_status(&self, entry: &Entry, view: &RoomView) -> DrawStatus {
        let won_through = view.serving.max(entry.cursor);
        let winners = entry.selected.or(view.selected);
        let mut status = DrawStatus {
            voucher_id: self.voucher,
            state: "entered",
            seq: None,
            rank: None,
            entries: entry.entries.max(view.places),
            winners,
            won_through,
            ranks_ahead: None,
            purchase_until: None,
            order_id: None,
            remaining: view.remaining,
            entries_open_at: stamp(entry.entries_open_at),
            draw_at: stamp(entry.draw_at),
            purchase_seconds: entry.purchase_seconds,
            server_time: stamp(entry.now),
        };
        let won = |rank: u64| if winners.is_some_and(|w| rank <= w) { "won" } else { "promoted" };
        match &entry.state {
            None => status.state = "not_entered",
            Some(EntryState::Entered { seq }) => status.seq = Some(*seq),
            Some(EntryState::Ranked { rank }) => {
                status.rank = Some(*rank);
                // Before the winners are fixed the entry is only ranked.
                if winners.is_some() && view.state != RoomState::Ranking {
                    status.state = "not_selected";
                    status.ranks_ahead = Some(rank.saturating_sub(won_through + 1));
                }
            }
            Some(EntryState::Won { rank, until }) => {
                status.rank = Some(*rank);
                status.state = if entry.lapsed() { "lapsed" } else { won(*rank) };
                status.purchase_until = Some(stamp(*until));
            }
            Some(EntryState::Used { rank, order }) => {
                status.rank = Some(*rank);
                status.state = won(*rank);
                status.order_id = *order;
            }
        }
        status
    }
}

fn stamp(time: DateTime<Utc>) -> String {
    time.to_rfc3339_opts(SecondsFormat::Millis, true)
}
