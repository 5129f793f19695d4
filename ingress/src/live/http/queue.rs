//! A waiting user's place: `GET /api/v1/vouchers/{id}/queue/me` (with
//! `?wait=10s`, a long-poll answered when the place changes) and
//! `GET /api/v1/vouchers/{id}/queue/me/stream` (Server-Sent Events, a
//! `queue` event each time it changes; the stream ends after the place is
//! settled: an order placed with its entry, or expired). A new state (the
//! turn, sold out, expired) is told at once; a place moving forward at most
//! once a second.
//!
//! Reading a place marks it watched, and so does an open stream or a
//! long-poll waiting (the room driver marks their holders every few
//! seconds), so a place expires only when its holder is gone: a holder
//! polling with `?wait=` is as present as one streaming. Waiters are woken from the room's summary in memory; the place
//! itself is read from Redis again only when the serving number reaches it,
//! the room's state changes, or every few seconds (an entry's time running
//! out), so a crowd waiting costs Redis little.
//!
//! Every answer and every event is told as of when it is sent: its
//! `server_time` is the admission clock then (not when the request arrived
//! or the place was read), and an entry whose time ran out meanwhile reads
//! as expired.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use seckill_core::{UserId, VoucherId};
use seckill_gate::{Place, PlaceState, RoomState};
use seckill_web::ApiError;
use serde::Deserialize;
use warp::sse::Event;
use warp::{Filter, Rejection, Reply};

use super::orders::{parse_wait, WAIT_HEADER};
use super::streams::{permit, sse_reply, Open};
use super::Reading;
use crate::access::{auth, reading_client_address};
use crate::live::places::{self, Refused};
use crate::live::Live;
use crate::room::{QueueStatus, RoomHandle, RoomView, Rooms};

/// How long a waiter trusts its place read without reading it again.
const REREAD_EVERY: Duration = Duration::from_secs(5);
/// Shortest time between two answers that only move a place forward (a
/// stream's events, a long-poll's answer): a fast-moving room is told once
/// a second. A new state (the turn, sold out, expired) is told at once.
const MOVE_EVERY: Duration = Duration::from_secs(1);

/// What a room's change did to a user's status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Change {
    None,
    /// The place moved forward (position, serving number).
    Moved,
    /// Its state changed, or its token or order appeared.
    State,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct QueueQuery {
    /// How long to wait for a change: `250ms`, `10s`.
    wait: Option<String>,
}

pub(super) fn me(reading: Arc<Reading>) -> impl Filter<Extract = (impl Reply,), Error = Rejection> + Clone {
    warp::path!("api" / "v1" / "vouchers" / String / "queue" / "me")
        .and(warp::get())
        .and(reading_client_address(Arc::clone(&reading.access)))
        .and(auth::user(Arc::clone(&reading.access)))
        .and(warp::query::<QueueQuery>())
        .and(warp::any().map(move || Arc::clone(&reading)))
        .and_then(get_me)
}

pub(super) fn stream(reading: Arc<Reading>) -> impl Filter<Extract = (impl Reply,), Error = Rejection> + Clone {
    warp::path!("api" / "v1" / "vouchers" / String / "queue" / "me" / "stream")
        .and(warp::get())
        .and(reading_client_address(Arc::clone(&reading.access)))
        .and(auth::user(Arc::clone(&reading.access)))
        .and(warp::any().map(move || Arc::clone(&reading)))
        .and_then(stream_me)
}

/// Follows one user's place: the last status told, re-read when needed.
struct Follow {
    rooms: Arc<Rooms>,
    handle: Arc<RoomHandle>,
    user: UserId,
    place: Place,
    status: QueueStatus,
    read_at: tokio::time::Instant,
}

impl Follow {
    async fn start(reading: &Reading, voucher: VoucherId, user: UserId) -> Result<Self, ApiError> {
        let handle = reading.rooms.room_of(voucher).await?;
        let (place, status) = read(&reading.rooms, &handle, &user).await?;
        Ok(Self {
            rooms: Arc::clone(&reading.rooms),
            handle,
            user,
            place,
            status,
            read_at: tokio::time::Instant::now(),
        })
    }

    /// The status after the room moved to `view`, and how it differs from
    /// the one before. The place is read again only when the
    /// serving number passed it, when the seed's reveal gives a pre-queue
    /// place its number, or while an entry's time may run out.
    async fn update(&mut self, view: &RoomView) -> Result<Change, ApiError> {
        let started = !matches!(view.state, RoomState::Before | RoomState::Uncommitted);
        let must_read = match &self.place.state {
            PlaceState::Waiting => match self.place.number {
                Some(number) => view.serving >= number,
                None => started,
            },
            PlaceState::Served { .. } => self.read_at.elapsed() >= REREAD_EVERY || self.place.lapsed(),
            PlaceState::Used { .. } | PlaceState::Expired => false,
        };
        let next = if must_read {
            let (place, status) = read(&self.rooms, &self.handle, &self.user).await?;
            self.place = place;
            self.read_at = tokio::time::Instant::now();
            status
        } else {
            self.handle.status(&self.user, &self.place, view)
        };
        let change = compare(&self.status, &next);
        self.status = next;
        Ok(change)
    }

    /// The status as of `now` (the admission clock as the answer is sent):
    /// the place as last read, the room as it stands, and the clock read
    /// now, not when the place was.
    fn at(&mut self, now: DateTime<Utc>) -> &QueueStatus {
        self.place.now = self.place.now.max(now);
        self.status = self.handle.status(&self.user, &self.place, &self.handle.view());
        &self.status
    }
}

/// How `after` differs from `before` (the clock aside).
fn compare(before: &QueueStatus, after: &QueueStatus) -> Change {
    if (before.state, &before.entry_token, before.order_id, before.attempt)
        != (after.state, &after.entry_token, after.order_id, after.attempt)
    {
        Change::State
    } else if (before.place, before.position, before.serving) != (after.place, after.position, after.serving) {
        Change::Moved
    } else {
        Change::None
    }
}

async fn read(rooms: &Rooms, handle: &RoomHandle, user: &UserId) -> Result<(Place, QueueStatus), ApiError> {
    let answer = rooms.status(handle, user).await.map_err(|error| {
        tracing::warn!(%error, voucher = %handle.voucher, "A place could not be read.");
        ApiError::unavailable("the waiting room could not be reached; retry")
    })?;
    answer.ok_or_else(|| {
        ApiError::new(
            warp::http::StatusCode::NOT_FOUND,
            "not_in_queue",
            "no place in this waiting room: join it first (POST /api/v1/vouchers/{id}/queue)",
        )
    })
}

async fn get_me(
    raw: String,
    address: Option<IpAddr>,
    user: UserId,
    query: QueueQuery,
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
    // Watched while it waits, as a stream is: a poll may wait longer than
    // the room's idle time, and the page polls when streams are refused.
    let _watching = follow.handle.watching(&user);
    let mut views = follow.handle.subscribe();
    let started = tokio::time::Instant::now();
    let deadline = started + wait;
    // A move is answered once the poll has waited MOVE_EVERY (or at its
    // deadline), so a client polling a fast room asks about once a second.
    let mut moved = false;
    loop {
        let moved_due = if moved { (started + MOVE_EVERY).min(deadline) } else { deadline };
        tokio::select! {
            changed = views.changed() => {
                if changed.is_err() {
                    return Ok(reply(follow.at(live.clock.now()), Some("timeout")));
                }
            }
            () = tokio::time::sleep(REREAD_EVERY) => {}
            () = tokio::time::sleep_until(moved_due), if moved => {
                return Ok(reply(follow.at(live.clock.now()), Some("changed")));
            }
            () = tokio::time::sleep_until(deadline) => return Ok(reply(follow.at(live.clock.now()), Some("timeout"))),
            () = live.closing.cancelled() => return Ok(reply(follow.at(live.clock.now()), Some("timeout"))),
        }
        let view = views.borrow_and_update().clone();
        match follow.update(&view).await? {
            Change::State => return Ok(reply(follow.at(live.clock.now()), Some("changed"))),
            Change::Moved if started.elapsed() >= MOVE_EVERY => {
                return Ok(reply(follow.at(live.clock.now()), Some("changed")));
            }
            Change::Moved => moved = true,
            Change::None => {}
        }
    }
}

/// A place among the bounded waiters for `user`'s long-poll of a room or a
/// draw.
pub(super) fn waiter_place(
    live: &Arc<Live>,
    user: &UserId,
    address: Option<IpAddr>,
) -> Result<places::Place, ApiError> {
    live.waiter_places.take(Some(user), address).map_err(|refused| {
        live.metrics.refused.with_label_values(&["waiters_full"]).inc();
        match refused {
            Refused::Full => ApiError::unavailable("too many requests are waiting; poll without wait or retry later"),
            _ => ApiError::rate_limited(Duration::from_secs(1), "too many requests of this user or address waiting"),
        }
    })
}

/// A room's or a draw's status for its user (as of when it is sent), never
/// cached; `wait` says how a long-poll ended.
pub(super) fn reply(status: &impl serde::Serialize, wait: Option<&'static str>) -> warp::reply::Response {
    let mut response = warp::reply::json(status).into_response();
    let headers = response.headers_mut();
    headers.insert(warp::http::header::CACHE_CONTROL, warp::http::HeaderValue::from_static("no-store"));
    if let Some(how) = wait {
        headers.insert(WAIT_HEADER, warp::http::HeaderValue::from_static(how));
    }
    response
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
    let open = Open::new(Arc::clone(&live), "queue", permit(&live, Some(&user), address)?);
    let watching = follow.handle.watching(&user);
    let mut views = follow.handle.subscribe();
    Ok(sse_reply(&live, move |sender| async move {
        let _watching = watching;
        loop {
            let body = serde_json::to_string(follow.at(open.live.clock.now())).expect("statuses serialize");
            if sender.send(Event::default().event("queue").data(body)).await.is_err() || follow.status.settled() {
                return;
            }
            let pushed = tokio::time::Instant::now();
            let mut moved = false;
            loop {
                tokio::select! {
                    () = sender.closed() => return,
                    () = open.live.closing.cancelled() => return,
                    changed = views.changed() => if changed.is_err() { return },
                    () = tokio::time::sleep(REREAD_EVERY) => {}
                    () = tokio::time::sleep_until(pushed + MOVE_EVERY), if moved => break,
                }
                let view = views.borrow_and_update().clone();
                match follow.update(&view).await {
                    Ok(Change::State) => break,
                    Ok(Change::Moved) if pushed.elapsed() >= MOVE_EVERY => break,
                    Ok(Change::Moved) => moved = true,
                    // Nothing new, or Redis unreachable for a moment: keep
                    // the stream, try again at the next change.
                    Ok(Change::None) | Err(_) => {}
                }
            }
        }
    }))
}
