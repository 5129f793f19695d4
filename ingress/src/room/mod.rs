//! The waiting rooms of queue-mode sales, as this ingress serves them.
//!
//! The rooms live in Redis (`seckill_gate`'s room scripts); every ingress
//! moves every room on ([`driver`]): it commits a new room's seed to the log
//! before the room takes joins, calls the advance script every tick (the
//! script keeps the rate and the share, so more callers never serve more),
//! and keeps the places of users streaming from it marked as watched. Each
//! room's latest summary is held here in a `watch` channel, so a waiting
//! user's long-poll or stream is woken from memory, as the rest of the read
//! side is, and asks Redis only for its own place when the serving number
//! reaches it. Entry tokens are signed with the room's key ([`token`]).

mod beacon;
pub(crate) mod draw;
pub(crate) mod driver;
pub(crate) mod token;

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, SecondsFormat, Utc};
use seckill_core::config::DrawConfig;
use seckill_core::event::{DrawSeedCommitted, Event, QueueSeedCommitted};
use seckill_core::metrics::QueueMetrics;
use seckill_core::topics::Topics;
use seckill_core::{queue, sealed_seed, Envelope, OrderId, UserId, VoucherId};
use seckill_gate::{Gate, Place, PlaceState, Room, RoomState, RoomSummary};
use seckill_kafka::EventProducer;
use seckill_web::ApiError;
use serde::Serialize;
use tokio::sync::watch;
use warp::http::StatusCode;

/// How far back the entry rate is measured.
const RATE_WINDOW: Duration = Duration::from_secs(10);
/// Shortest time between two wake-ups of a room's waiters for its serving
/// number alone.
const PUBLISH_MOVES_EVERY: Duration = Duration::from_millis(250);

/// Why a room could not be opened here.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RoomError {
    #[error("Redis: {0}")]
    Redis(#[from] redis::RedisError),
    #[error("the log did not take the seed's commitment: {0}")]
    Log(String),
}

/// Every room this ingress knows.
#[derive(Debug)]
pub(crate) struct Rooms {
    pub(crate) metrics: QueueMetrics,
    /// Wakes the driver before its next tick (the last unit was just sold:
    /// waiters hear it now rather than a tick later).
    nudge: tokio::sync::Notify,
    gate: Gate,
    producer: EventProducer,
    topics: Topics,
    /// Seals each draw's and waiting room's seed into its logged commitment.
    draw: DrawConfig,
    rooms: Mutex<HashMap<VoucherId, Arc<RoomHandle>>>,
    /// Where draws' beacon rounds are fetched (None: no beacon configured).
    beacon: Option<seckill_beacon::Relays>,
    /// Draws whose round a task here is fetching.
    fetching: Arc<Mutex<std::collections::HashSet<VoucherId>>>,
}

/// One room: its signing key, its latest summary, who streams from here.
#[derive(Debug)]
pub(crate) struct RoomHandle {
    pub(crate) voucher: VoucherId,
    /// A draw's, not a waiting room's.
    pub(crate) draw: bool,
    token_key: String,
    view: watch::Sender<RoomView>,
    /// Users with a stream open on this ingress, and how many each.
    watchers: Mutex<HashMap<UserId, u32>>,
    /// (when, serving number) over the last [`RATE_WINDOW`].
    samples: Mutex<VecDeque<(Instant, u64)>>,
    /// When waiters were last woken.
    published: Mutex<Instant>,
    /// When the room was last moved on.
    advanced: Mutex<Instant>,
}

/// A room as last read: what every waiter of it is told.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct RoomView {
    pub(crate) state: RoomState,
    /// Places passed (served or skipped).
    pub(crate) serving: u64,
    pub(crate) places: u64,
    pub(crate) remaining: u64,
    /// Places passed per second, measured; None until measured.
    pub(crate) rate: Option<f64>,
    /// A draw's winners at the draw (None before it).
    pub(crate) selected: Option<u64>,
}

impl RoomView {
    fn unknown() -> Self {
        Self { state: RoomState::Before, serving: 0, places: 0, remaining: 0, rate: None, selected: None }
    }

    /// Whether a waiter would see anything new (the rate alone is not news).
    fn differs(&self, other: &Self) -> bool {
        (self.state, self.serving, self.places, self.remaining)
            != (other.state, other.serving, other.places, other.remaining)
    }
}

/// What a user is told about their place: `GET …/queue/me`, its long-poll
/// and its stream.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct QueueStatus {
    pub(crate) voucher_id: VoucherId,
    /// `waiting`, `your_turn`, `expired` or `sold_out`.
    pub(crate) state: &'static str,
    /// The user's how-many-th place in this room.
    pub(crate) attempt: u32,
    /// The place's number (1 is served first); null for the pre-queue until
    /// the sale begins and the shuffle is revealed.
    pub(crate) place: Option<u64>,
    /// 1 when next; null when not known yet or no longer waiting.
    pub(crate) position: Option<u64>,
    pub(crate) people_ahead: Option<u64>,
    /// The serving number: places passed so far.
    pub(crate) serving: u64,
    /// Places taken in the room.
    pub(crate) places: u64,
    pub(crate) estimated_wait_seconds: Option<f64>,
    /// While it is the user's turn: the token `POST …/orders` takes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) entry_token: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) entry_expires_at: Option<String>,
    /// The token admitted this order.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) order_id: Option<OrderId>,
    pub(crate) server_time: String,
}

impl QueueStatus {
    /// Whether the place still moves (a waiter keeps waiting).
    pub(crate) fn settled(&self) -> bool {
        self.state == "expired" || self.order_id.is_some()
    }
}

impl Rooms {
    pub(crate) fn new(
        gate: Gate,
        producer: EventProducer,
        topics: Topics,
        metrics: QueueMetrics,
        draw: DrawConfig,
    ) -> Self {
        Self {
            metrics,
            nudge: tokio::sync::Notify::new(),
            gate,
            producer,
            topics,
            draw,
            rooms: Mutex::default(),
            beacon: None,
            fetching: Arc::default(),
        }
    }

    /// Fetches draws' beacon rounds from `relays`.
    pub(crate) fn with_beacon(mut self, relays: Option<seckill_beacon::Relays>) -> Self {
        self.beacon = relays;
        self
    }

    /// Moves the rooms on now (the stock of some sale just changed).
    pub(crate) fn nudge(&self) {
        self.nudge.notify_one();
    }

    pub(crate) fn gate(&self) -> &Gate {
        &self.gate
    }

    /// `voucher`'s room (None: the voucher has none), known here from now
    /// on; a room whose seed is not committed yet is committed first.
    pub(crate) async fn handle(&self, voucher: VoucherId) -> Result<Option<Arc<RoomHandle>>, RoomError> {
        if let Some(handle) = self.rooms.lock().expect("rooms lock").get(&voucher) {
            return Ok(Some(Arc::clone(handle)));
        }
        let Some(room) = self.gate.room(voucher).await? else { return Ok(None) };
        if !room.committed {
            self.commit(voucher, &room).await?;
        }
        let handle = Arc::new(RoomHandle {
            voucher,
            draw: room.draw,
            token_key: room.token_key,
            view: watch::Sender::new(RoomView::unknown()),
            watchers: Mutex::default(),
            samples: Mutex::default(),
            published: Mutex::new(Instant::now()),
            advanced: Mutex::new(Instant::now()),
        });
        Ok(Some(Arc::clone(self.rooms.lock().expect("rooms lock").entry(voucher).or_insert(handle))))
    }

    /// Logs the commitment to `room`'s seed, then lets the room take joins.
    /// Several ingresses may do so at once: they log the same hash. The
    /// seed goes into the log sealed too (a draw's and a waiting room's),
    /// when a key is set: `seckill reconcile` rebuilds a room lost before
    /// its reveal with it.
    async fn commit(&self, voucher: VoucherId, room: &Room) -> Result<(), RoomError> {
        let seed_hash = queue::seed_commitment(&room.seed);
        let sealed_seed = self.draw.seal_key().and_then(|key| sealed_seed::seal(key, voucher, &room.seed));
        let commitment = Envelope::new(if room.draw {
            Event::DrawSeedCommitted(DrawSeedCommitted { voucher_id: voucher, seed_hash, sealed_seed })
        } else {
            Event::QueueSeedCommitted(QueueSeedCommitted { voucher_id: voucher, seed_hash, sealed_seed })
        });
        self.producer.send(&self.topics.sales, &commitment).await.map_err(|e| RoomError::Log(e.to_string()))?;
        self.gate.seed_committed(voucher, &room.seed).await?;
        tracing::info!(%voucher, draw = room.draw, "Waiting room or draw open: its seed's hash is in the log.");
        Ok(())
    }

    /// `voucher`'s room, or the answer saying why there is none.
    pub(crate) async fn room_of(&self, voucher: VoucherId) -> Result<Arc<RoomHandle>, ApiError> {
        let unreachable = |error: RoomError| {
            tracing::warn!(%error, %voucher, "The waiting room could not be read.");
            ApiError::unavailable("the waiting room could not be reached; retry")
        };
        match self.handle(voucher).await.map_err(unreachable)? {
            Some(handle) if !handle.draw => return Ok(handle),
            Some(_) => {
                return Err(ApiError::new(
                    StatusCode::CONFLICT,
                    "not_queue_mode",
                    "this sale is a draw: enter it (POST /api/v1/vouchers/{id}/entries)",
                ))
            }
            None => {}
        }
        match self.gate.layout(voucher).await.map_err(|e| unreachable(e.into()))? {
            Some(_) => Err(ApiError::new(
                StatusCode::CONFLICT,
                "not_queue_mode",
                "this sale has no waiting room: order directly (POST /api/v1/vouchers/{id}/orders)",
            )),
            None => Err(ApiError::unknown_voucher(voucher)),
        }
    }

    /// Whether `voucher` is a draw this ingress knows.
    pub(crate) fn has_draw(&self, voucher: VoucherId) -> bool {
        self.rooms.lock().expect("rooms lock").get(&voucher).is_some_and(|handle| handle.draw)
    }

    pub(crate) fn known(&self) -> Vec<Arc<RoomHandle>> {
        self.rooms.lock().expect("rooms lock").values().cloned().collect()
    }

    fn forget(&self, voucher: VoucherId) {
        self.rooms.lock().expect("rooms lock").remove(&voucher);
    }

    /// `user`'s status in `handle`'s room, read from Redis (which marks a
    /// waiting place watched). None: the user has no place.
    pub(crate) async fn status(
        &self,
        handle: &RoomHandle,
        user: &UserId,
    ) -> redis::RedisResult<Option<(Place, QueueStatus)>> {
        let Some(place) = self.gate.place(handle.voucher, user).await? else { return Ok(None) };
        let status = handle.status(user, &place, &handle.view.borrow());
        Ok(Some((place, status)))
    }
}

impl RoomHandle {
    /// The room's latest summary, and a receiver woken when it changes.
    pub(crate) fn subscribe(&self) -> watch::Receiver<RoomView> {
        self.view.subscribe()
    }

    /// The room's latest summary.
    pub(crate) fn view(&self) -> RoomView {
        self.view.borrow().clone()
    }

    /// Whether the room's sale is over and it was looked at within `every`.
    fn ended_and_seen_within(&self, every: Duration) -> bool {
        self.view.borrow().state == RoomState::Ended && self.advanced.lock().expect("advanced lock").elapsed() < every
    }

    /// Takes a summary in; waiters are woken only when it says something new.
    fn update(&self, summary: &RoomSummary) {
        *self.advanced.lock().expect("advanced lock") = Instant::now();
        let rate = {
            let mut samples = self.samples.lock().expect("samples lock");
            let now = Instant::now();
            samples.push_back((now, summary.cursor));
            while samples.front().is_some_and(|(at, _)| now.duration_since(*at) > RATE_WINDOW) {
                samples.pop_front();
            }
            let (first_at, first_cursor) = *samples.front().expect("just pushed");
            let span = now.duration_since(first_at).as_secs_f64();
            (span >= 1.0 && summary.cursor > first_cursor).then(|| (summary.cursor - first_cursor) as f64 / span)
        };
        let view = RoomView {
            state: summary.state,
            serving: summary.cursor,
            places: summary.places,
            remaining: summary.remaining,
            rate,
            selected: summary.selected,
        };
        // A new state wakes the waiters at once; a serving number moving
        // on, at most every PUBLISH_MOVES_EVERY: a fast room would
        // otherwise wake every waiter every tick.
        let mut published = self.published.lock().expect("published lock");
        self.view.send_if_modified(|current| {
            let news =
                current.state != view.state || current.differs(&view) && published.elapsed() >= PUBLISH_MOVES_EVERY;
            if news {
                *current = view;
                *published = Instant::now();
            } else {
                // Kept current for readers that look without waiting.
                current.places = view.places;
                current.remaining = view.remaining;
                current.rate = view.rate;
                current.selected = view.selected;
            }
            news
        });
    }

    /// `user`'s status from their `place` and the room's `view`.
    pub(crate) fn status(&self, user: &UserId, place: &Place, view: &RoomView) -> QueueStatus {
        let serving = view.serving.max(place.cursor);
        let mut status = QueueStatus {
            voucher_id: self.voucher,
            state: "waiting",
            attempt: place.attempt,
            place: place.number,
            position: None,
            people_ahead: None,
            serving,
            // The room's count is a tick old; a place is never beyond it.
            places: view.places.max(place.number.unwrap_or(0)),
            estimated_wait_seconds: None,
            entry_token: None,
            entry_expires_at: None,
            order_id: None,
            server_time: stamp(place.now),
        };
        match &place.state {
            PlaceState::Waiting => {
                if view.state == RoomState::SoldOut {
                    status.state = "sold_out";
                }
                if let Some(number) = place.number {
                    let position = number.saturating_sub(serving).max(1);
                    status.position = Some(position);
                    status.people_ahead = Some(position - 1);
                    status.estimated_wait_seconds =
                        view.rate.map(|rate| ((position - 1) as f64 / rate * 10.0).round() / 10.0);
                }
            }
            PlaceState::Served { .. } if place.lapsed() => status.state = "expired",
            PlaceState::Served { entry, expires_at } => {
                status.state = "your_turn";
                status.entry_token =
                    Some(token::sign(&self.token_key, self.voucher, user, *entry, expires_at.timestamp_millis()));
                status.entry_expires_at = Some(stamp(*expires_at));
            }
            PlaceState::Used { order, .. } => {
                status.state = "your_turn";
                status.order_id = *order;
            }
            PlaceState::Expired => status.state = "expired",
        }
        status
    }

    /// The entry `entry_token` claims for `user`, if this room signed it.
    pub(crate) fn verify(&self, user: &UserId, entry_token: &str) -> Result<token::Entry, token::TokenError> {
        token::verify(&self.token_key, self.voucher, user, entry_token)
    }

    /// Counts `user` as streaming from this ingress until the guard drops.
    pub(crate) fn watching(self: &Arc<Self>, user: &UserId) -> Watching {
        *self.watchers.lock().expect("watchers lock").entry(user.clone()).or_default() += 1;
        Watching { handle: Arc::clone(self), user: user.clone() }
    }

    fn watchers(&self) -> Vec<UserId> {
        self.watchers.lock().expect("watchers lock").keys().cloned().collect()
    }
}

/// A user streaming their place from this ingress (their place is kept
/// from expiring while it lives).
#[derive(Debug)]
pub(crate) struct Watching {
    handle: Arc<RoomHandle>,
    user: UserId,
}

impl Drop for Watching {
    fn drop(&mut self) {
        let mut watchers = self.handle.watchers.lock().expect("watchers lock");
        if let Some(count) = watchers.get_mut(&self.user) {
            *count -= 1;
            if *count == 0 {
                watchers.remove(&self.user);
            }
        }
    }
}

fn stamp(time: DateTime<Utc>) -> String {
    time.to_rfc3339_opts(SecondsFormat::Millis, true)
}
