//! An entrant's draw: `GET /api/v1/vouchers/{id}/entries/me` (with
//! `?wait=10s`, a long-poll answered when the entry changes) and
//! `GET /api/v1/vouchers/{id}/entries/me/stream` (Server-Sent Events, a
//! `draw` event each time it changes; the stream ends once the entry is
//! settled: its win spent on an order, or lapsed).
//!
//! Waiters are woken from the draw's summary in memory; the entry itself is
//! read from Redis again only when the draw's state or its winners moved
//! (the draw was made, a rank was promoted), or every few seconds (a
//! window running out), so a crowd waiting for returned units costs Redis
//! little.
//!
//! Every answer and every event is told as of when it is sent: its
//! `server_time` is the admission clock then (clients count down to
//! `draw_at` and `purchase_until` from it), and a win whose window closed
//! meanwhile reads as lapsed.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use seckill_core::{UserId, VoucherId};
use seckill_gate::{Entry, EntryState, RoomState};
use seckill_web::ApiError;
use serde::Deserialize;
use warp::sse::Event;
use warp::{Filter, Rejection, Reply};

use super::orders::parse_wait;
use super::queue::{reply, waiter_place};
use super::streams::{permit, sse_reply, Open};
use super::Reading;
use crate::access::{auth, reading_client_address};
use crate::room::draw::DrawStatus;
use crate::room::{RoomHandle, RoomView, Rooms};

/// How long a waiter trusts its entry read without reading it again.
const REREAD_EVERY: Duration = Duration::from_secs(5);

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct EntryQuery {
    /// How long to wait for a change: `250ms`, `10s`.
    wait: Option<String>,
}

pub(super) fn me(reading: Arc<Reading>) -> impl Filter<Extract = (impl Reply,), Error = Rejection> + Clone {
    warp::path!("api" / "v1" / "vouchers" / String / "entries" / "me")
        .and(warp::get())
        .and(reading_client_address(Arc::clone(&reading.access)))
        .and(auth::user(Arc::clone(&reading.access)))
        .and(warp::query::<EntryQuery>())
        .and(warp::any().map(move || Arc::clone(&reading)))
        .and_then(get_me)
}

pub(super) fn stream(reading: Arc<Reading>) -> impl Filter<Extract = (impl Reply,), Error = Rejection> + Clone {
    warp::path!("api" / "v1" / "vouchers" / String / "entries" / "me" / "stream")
        .and(warp::get())
        .and(reading_client_address(Arc::clone(&reading.access)))
        .and(auth::user(Arc::clone(&reading.access)))
        .and(warp::any().map(move || Arc::clone(&reading)))
        .and_then(stream_me)
}

/// Follows one user's entry: the last status told, re-read when needed.
struct Follow {
    rooms: Arc<Rooms>,
    handle: Arc<RoomHandle>,
    user: UserId,
    entry: Entry,
    status: DrawStatus,
    read_at: tokio::time::Instant,
}

impl Follow {
    async fn start(reading: &Reading, voucher: VoucherId, user: UserId) -> Result<Self, ApiError> {
        let handle = reading.rooms.draw_of(voucher).await?;
        let (entry, status) = read(&reading.rooms, &handle, &user).await?;
        Ok(Self {
            rooms: Arc::clone(&reading.rooms),
            handle,
            user,
            entry,
            status,
            read_at: tokio::time::Instant::now(),
        })
    }

    /// Whether the status changed after the draw moved to `view`.
    async fn update(&mut self, view: &RoomView) -> Result<bool, ApiError> {
        let must_read = match &self.entry.state {
            // Entered from another tab.
            None => self.read_at.elapsed() >= REREAD_EVERY,
            // The draw is being made.
            Some(EntryState::Entered { .. }) => {
                !matches!(view.state, RoomState::Entering | RoomState::Before | RoomState::Uncommitted)
                    || self.read_at.elapsed() >= REREAD_EVERY
            }
            Some(EntryState::Ranked { rank }) => view.serving >= *rank || self.status.winners != view.selected,
            Some(EntryState::Won { .. }) => self.read_at.elapsed() >= REREAD_EVERY || self.entry.lapsed(),
            Some(EntryState::Used { .. }) => false,
        };
        let next = if must_read {
            let (entry, status) = read(&self.rooms, &self.handle, &self.user).await?;
            self.entry = entry;
            self.read_at = tokio::time::Instant::now();
            status
        } else {
            self.handle.draw_status(&self.entry, view)
        };
        let changed = (self.status.state, self.status.rank, &self.status.purchase_until, self.status.order_id)
            != (next.state, next.rank, &next.purchase_until, next.order_id);
        self.status = next;
        Ok(changed)
    }

    /// The status as of `now` (the admission clock as the answer is sent):
    /// the entry as last read, the draw as it stands, and the clock read
    /// now, not when the entry was.
    fn at(&mut self, now: DateTime<Utc>) -> &DrawStatus {
        self.entry.now = self.entry.now.max(now);
        self.status = self.handle.draw_status(&self.entry, &self.handle.view());
        &self.status
    }
}

async fn read(rooms: &Rooms, handle: &RoomHandle, user: &UserId) -> Result<(Entry, DrawStatus), ApiError> {
    let answer = rooms.entry_status(handle, user).await.map_err(|error| {
        tracing::warn!(%error, voucher = %handle.voucher, "An entry could not be read.");
        ApiError::unavailable("the draw could not be reached; retry")
    })?;
    answer.ok_or_else(|| ApiError::unknown_voucher(handle.voucher))
}

async fn get_me(
    raw: String,
    address: Option<IpAddr>,
    user: UserId,
    query: EntryQuery,
    reading: Arc<Reading>,
) -> Result<warp::reply::Response, Rejection> {
    let voucher: VoucherId = raw.parse().map_err(|e| ApiError::invalid(format!("voucher_id: {e}")))?;
    let wait = query.wait.as_deref().map(parse_wait).transpose()?;
    let mut follow = Follow::start(&reading, voucher, user.clone()).await?;
    let live = &reading.live;
    let Some(wait) = wait.filter(|wait| !wait.is_zero() && !follow.status.settled()) else {
        return Ok(reply(follow.at(live.clock.now()), None));
    };
    let _place = waiter_place(live, &user, address)?;
    let mut views = follow.handle.subscribe();
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        tokio::select! {
            changed = views.changed() => {
                if changed.is_err() {
                    return Ok(reply(follow.at(live.clock.now()), Some("timeout")));
                }
            }
            () = tokio::time::sleep(REREAD_EVERY) => {}
            () = tokio::time::sleep_until(deadline) => return Ok(reply(follow.at(live.clock.now()), Some("timeout"))),
            () = live.closing.cancelled() => return Ok(reply(follow.at(live.clock.now()), Some("timeout"))),
        }
        let view = views.borrow_and_update().clone();
        if follow.update(&view).await? {
            return Ok(reply(follow.at(live.clock.now()), Some("changed")));
        }
    }
}

async fn stream_me(
    raw: String,
    address: Option<IpAddr>,
    user: UserId,
    reading: Arc<Reading>,
) -> Result<warp::reply::Response, Rejection> {
    let voucher: VoucherId = raw.parse().map_err(|e| ApiError::invalid(format!("voucher_id: {e}")))?;
    let live = Arc::clone(&reading.live);
    let mut follow = Follow::start(&reading, voucher, user.clone()).await?;
    let open = Open::new(Arc::clone(&live), "draw", permit(&live, Some(&user), address)?);
    let mut views = follow.handle.subscribe();
    Ok(sse_reply(&live, move |sender| async move {
        loop {
            let body = serde_json::to_string(follow.at(open.live.clock.now())).expect("statuses serialize");
            if sender.send(Event::default().event("draw").data(body)).await.is_err() || follow.status.settled() {
                return;
            }
            loop {
                tokio::select! {
                    () = sender.closed() => return,
                    () = open.live.closing.cancelled() => return,
                    changed = views.changed() => if changed.is_err() { return },
                    () = tokio::time::sleep(REREAD_EVERY) => {}
                }
                let view = views.borrow_and_update().clone();
                // Nothing new, or Redis unreachable for a moment (an
                // error): keep the stream, try again at the next change.
                if follow.update(&view).await.unwrap_or(false) {
                    break;
                }
            }
        }
    }))
}
