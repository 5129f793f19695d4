//! Server-Sent Events: `GET /api/v1/users/{user_id}/orders/stream` pushes a
//! user's order changes as they happen; `GET /api/v1/vouchers/{id}/stream`
//! pushes a sale's phase and stock, coalesced.
//!
//! A user's stream sends each change as an `order` event whose data is the
//! order as it stood right after the change, and whose `id:` is a cursor
//! (see [`crate::live::changes`]): a client reconnecting with
//! `Last-Event-ID`, to this ingress or another, gets what it missed, once.
//! A new stream (no `Last-Event-ID`) starts with the changes of the last few
//! seconds, so an order placed just before connecting is not missed.
//! Heartbeats (`:` comment lines) keep idle connections open through
//! proxies. Streams are bounded in all, per user and per address; the
//! ingress shutting down ends them (clients reconnect elsewhere).

use std::collections::VecDeque;
use std::convert::Infallible;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use seckill_core::{UserId, VoucherId};
use seckill_store::MAX_PAGE;
use seckill_web::ApiError;
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::mpsc;
use warp::sse::Event;
use warp::{Filter, Rejection, Reply};

use super::orders::sees;
use super::vouchers::read_failed;
use super::Reading;
use crate::access::{auth, reading_client_address, Caller};
use crate::live::changes::{changes, Change, Cursor};
use crate::live::feeds::Subscription;
use crate::live::places::{Place, Refused};
use crate::live::{Live, VoucherFeeds};

/// Events written ahead of a slow client.
const EVENTS_IN_FLIGHT: usize = 16;

/// How far back a new stream starts: an order placed just before the
/// stream opened still reaches it.
const NEW_STREAM_LOOKBACK_MS: i64 = 5_000;

pub(super) fn user(reading: Arc<Reading>) -> impl Filter<Extract = (impl Reply,), Error = Rejection> + Clone {
    warp::path!("api" / "v1" / "users" / String / "orders" / "stream")
        .and(warp::get())
        .and(auth::caller(Arc::clone(&reading.access)))
        .and(reading_client_address(Arc::clone(&reading.access)))
        .and(warp::header::optional::<String>("last-event-id"))
        .and(warp::any().map(move || Arc::clone(&reading)))
        .and_then(user_stream)
}

pub(super) fn voucher(reading: Arc<Reading>) -> impl Filter<Extract = (impl Reply,), Error = Rejection> + Clone {
    warp::path!("api" / "v1" / "vouchers" / String / "stream")
        .and(warp::get())
        .and(reading_client_address(Arc::clone(&reading.access)))
        .and(warp::any().map(move || Arc::clone(&reading)))
        .and_then(voucher_stream)
}

/// A place for one more stream, or the answer saying why not.
pub(super) fn permit(live: &Live, user: Option<&UserId>, address: Option<IpAddr>) -> Result<Place, ApiError> {
    live.streams.take(user, address).map_err(|refused| {
        let (reason, error) = match refused {
            Refused::Full if user.is_none() => {
                ("voucher_streams_full", ApiError::unavailable("too many open voucher streams; retry later"))
            }
            Refused::Full => ("streams_full", ApiError::unavailable("too many open streams; retry later")),
            Refused::UserFull => (
                "user_streams_full",
                ApiError::rate_limited(Duration::from_secs(5), "this user has too many open streams"),
            ),
            Refused::AddressFull => (
                "address_streams_full",
                ApiError::rate_limited(Duration::from_secs(5), "this address has too many open streams"),
            ),
        };
        live.metrics.refused.with_label_values(&[reason]).inc();
        error
    })
}

/// Counts an open stream in the gauge while it lives.
pub(super) struct Open {
    pub(super) live: Arc<Live>,
    kind: &'static str,
    _permit: Place,
}

impl Open {
    pub(super) fn new(live: Arc<Live>, kind: &'static str, permit: Place) -> Self {
        live.metrics.streams.with_label_values(&[kind]).inc();
        Self { live, kind, _permit: permit }
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        self.live.metrics.streams.with_label_values(&[self.kind]).dec();
    }
}

/// Answers with the events `produce` sends. It runs as a task of its own,
/// writing into a small bounded channel: a slow client holds up only its
/// own task, and a client that went away ends it.
pub(super) fn sse_reply<F>(live: &Live, produce: impl FnOnce(mpsc::Sender<Event>) -> F) -> warp::reply::Response
where
    F: std::future::Future<Output = ()> + Send + 'static,
{
    let (sender, mut receiver) = mpsc::channel(EVENTS_IN_FLIGHT);
    tokio::spawn(produce(sender));
    let events = futures::stream::poll_fn(move |cx| receiver.poll_recv(cx).map(|event| event.map(Ok::<_, Infallible>)));
    let heartbeat = Duration::from_secs(live.config.heartbeat_seconds);
    let mut response = warp::sse::reply(warp::sse::keep_alive().interval(heartbeat).stream(events)).into_response();
    // Proxies must pass events through as they come.
    response.headers_mut().insert("x-accel-buffering", warp::http::HeaderValue::from_static("no"));
    response
}

async fn user_stream(
    raw: String,
    caller: Caller,
    address: Option<IpAddr>,
    last_event_id: Option<String>,
    reading: Arc<Reading>,
) -> Result<warp::reply::Response, Rejection> {
    let user = UserId::parse(&raw).map_err(|e| ApiError::invalid(format!("user_id: {e}")))?;
    if !sees(&caller, &user) {
        return Err(ApiError::not_found(format!("no orders of user {user} are visible to you")).into());
    }
    let cursor = match last_event_id.as_deref() {
        Some(raw) => {
            Cursor::parse(raw).ok_or_else(|| ApiError::invalid("Last-Event-ID is not an id of this stream"))?
        }
        None => Cursor::starting_at(reading.live.clock.now().timestamp_millis() - NEW_STREAM_LOOKBACK_MS),
    };
    let live = Arc::clone(&reading.live);
    let permit = permit(&live, Some(&user), address)?;
    // Subscribed before the history is read: a change in between is in one
    // or the other, and the cursor sends it once.
    let subscription = live.feeds.subscribe(&user);
    let mut stream = UserStream {
        open: Open::new(Arc::clone(&live), "user", permit),
        live,
        user,
        cursor,
        subscription,
        queued: VecDeque::new(),
    };
    stream.catch_up().await;
    Ok(sse_reply(&reading.live, |sender| async move {
        loop {
            let event = tokio::select! {
                () = sender.closed() => return,
                event = stream.next() => event,
            };
            let Some(event) = event else { return };
            if sender.send(event).await.is_err() {
                return;
            }
        }
    }))
}

/// One user's stream.
struct UserStream {
    open: Open,
    live: Arc<Live>,
    user: UserId,
    cursor: Cursor,
    subscription: Subscription,
    /// Changes read from the view, not sent yet.
    queued: VecDeque<Change>,
}

impl UserStream {
    /// Queues every change of the user's recent orders the cursor misses,
    /// in time order: from the view and memory, or memory alone while the
    /// view cannot be read.
    async fn catch_up(&mut self) {
        let rows = self.live.user_orders_or_memory(&self.user, MAX_PAGE).await;
        let mut missed: Vec<Change> =
            rows.iter().flat_map(changes).filter(|change| self.cursor.misses(change)).collect();
        missed.sort_by_key(|change| (change.at_ms, change.order, change.rank));
        self.queued.extend(missed);
    }

    fn event(&mut self, change: &Change) -> Event {
        self.cursor.record(change);
        Event::default()
            .id(self.cursor.encode())
            .event("order")
            .json_data(&change.row)
            .unwrap_or_else(|_| Event::default().comment("unserializable change"))
    }

    /// The next event; None when the stream ends (shutdown).
    async fn next(&mut self) -> Option<Event> {
        loop {
            if let Some(change) = self.queued.pop_front() {
                if self.cursor.has_sent(&change) {
                    continue;
                }
                return Some(self.event(&change));
            }
            let received = tokio::select! {
                () = self.open.live.closing.cancelled() => return None,
                received = self.subscription.receiver.recv() => received,
            };
            match received {
                Ok(change) => {
                    if !self.cursor.has_sent(&change) {
                        return Some(self.event(&change));
                    }
                }
                // Too far behind the live changes: catch up from the view.
                Err(RecvError::Lagged(_)) => self.catch_up().await,
                Err(RecvError::Closed) => return None,
            }
        }
    }
}

async fn voucher_stream(
    raw: String,
    address: Option<IpAddr>,
    reading: Arc<Reading>,
) -> Result<warp::reply::Response, Rejection> {
    let voucher: VoucherId = raw.parse().map_err(|e| ApiError::invalid(format!("voucher_id: {e}")))?;
    let live = Arc::clone(&reading.live);
    let first = live.vouchers.voucher(voucher).await.map_err(|e| read_failed(&e))?;
    let first = first.ok_or_else(|| ApiError::unknown_voucher(voucher))?;
    let open = Open::new(Arc::clone(&live), "voucher", permit(&live, None, address)?);
    let mut feed = VoucherFeeds::watch(&live, voucher, first.representation);
    Ok(sse_reply(&reading.live, move |sender| async move {
        let mut last = None;
        loop {
            let shown = Arc::clone(&feed.borrow_and_update());
            if last != Some(shown.state) {
                last = Some(shown.state);
                let body = String::from_utf8_lossy(&shown.body(open.live.clock.now(), false)).into_owned();
                if sender.send(Event::default().event("voucher").data(body)).await.is_err() {
                    return;
                }
            }
            tokio::select! {
                () = sender.closed() => return,
                () = open.live.closing.cancelled() => return,
                changed = feed.changed() => if changed.is_err() { return },
            }
        }
    }))
}
