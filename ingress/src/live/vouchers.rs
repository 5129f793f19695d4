//! Voucher reads from memory: what a page storm hits.
//!
//! Each voucher (and each page of the voucher list) is kept as a finished
//! representation (the JSON body but its clock fields, a weak `ETag` of the
//! sale's state and the `Cache-Control` its phase calls for), rebuilt from
//! Redis (what admission decides by: stock left, window, pause) and the view
//! (the order counters) once it is older than `live.voucher_refresh_ms`.
//! The clock fields (`server_time`, `opens_in_ms`, `closes_in_ms`) are
//! written per response, so the tag changes when the sale does, not with
//! every refresh, and a revalidating client or CDN gets `304` while nothing
//! happened. One request rebuilds while the others wait for that one, so a
//! storm costs one Redis and one view read per voucher per refresh, and an
//! answer is never staler than the bound: a sold-out voucher stops looking
//! available within it. Unknown vouchers are not remembered, so a voucher is
//! readable the moment it is created.
//!
//! A rebuild that fails (Redis or the view unreadable) is remembered for the
//! refresh interval, so the requests waiting behind it, and those arriving
//! meanwhile, do not each try again: they get the last good representation,
//! marked `"stale": true`, or, when there is none, the error. An unreadable
//! Redis is never shown as "no stock left".

use std::collections::HashMap;
use std::fmt::Write as _;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use chrono::{DateTime, SecondsFormat, Utc};
use seckill_core::money::Currency;
use seckill_core::phase::Phase;
use seckill_core::VoucherId;
use seckill_gate::{Gate, SaleState, Timeline};
use seckill_store::{StoreError, ViewReader, VoucherView};
use serde::Serialize;

use super::ServerClock;

/// A finished answer, shared by every request until it is rebuilt.
#[derive(Debug)]
pub(crate) struct Representation {
    body: Body,
    /// Weak (two responses differ in their clock fields): the sale's state.
    pub(crate) etag: String,
    pub(crate) cache_control: &'static str,
    /// A hash of the sale's state without the clock: what a voucher stream
    /// compares to decide whether anything changed.
    pub(crate) state: u64,
    /// The view's row it was built with: its counters stand in while the
    /// view cannot be read (Redis, which decides the rest, still can).
    view: Option<VoucherView>,
    built: Instant,
}

#[derive(Debug)]
enum Body {
    One(VoucherJson),
    Page { vouchers: Vec<VoucherJson>, next: Option<VoucherId> },
}

/// One voucher's JSON object without its clock fields and closing brace,
/// and what the clock fields are computed from.
#[derive(Debug)]
struct VoucherJson {
    members: String,
    begins_at: DateTime<Utc>,
    ends_at: DateTime<Utc>,
}

impl VoucherJson {
    fn new(voucher: &LiveVoucher) -> Self {
        let mut members = serde_json::to_string(voucher).expect("voucher bodies serialize");
        members.pop();
        Self { members, begins_at: voucher.begins_at, ends_at: voucher.ends_at }
    }

    fn write(&self, out: &mut String, now: DateTime<Utc>, server_time: &str, stale: bool) {
        out.push_str(&self.members);
        let opens_in_ms = (self.begins_at - now).num_milliseconds().max(0);
        let closes_in_ms = (self.ends_at - now).num_milliseconds().max(0);
        let _ =
            write!(out, r#","server_time":"{server_time}","opens_in_ms":{opens_in_ms},"closes_in_ms":{closes_in_ms}"#);
        if stale {
            out.push_str(r#","stale":true"#);
        }
        out.push('}');
    }
}

impl Representation {
    /// The body as of `now` on the admission clock; `stale` marks a
    /// representation served because a rebuild failed.
    pub(crate) fn body(&self, now: DateTime<Utc>, stale: bool) -> Bytes {
        let server_time = now.to_rfc3339_opts(SecondsFormat::Millis, true);
        let mut out = String::with_capacity(512);
        match &self.body {
            Body::One(voucher) => voucher.write(&mut out, now, &server_time, stale),
            Body::Page { vouchers, next } => {
                out.push_str(r#"{"vouchers":["#);
                for (i, voucher) in vouchers.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    voucher.write(&mut out, now, &server_time, stale);
                }
                out.push_str(r#"],"next":"#);
                out.push_str(&serde_json::to_string(next).expect("ids serialize"));
                out.push('}');
            }
        }
        Bytes::from(out)
    }
}

/// A representation, whether this request had to rebuild it, and whether
/// it is the last good one served because a rebuild failed.
#[derive(Clone, Debug)]
pub(crate) struct Served {
    pub(crate) representation: Arc<Representation>,
    pub(crate) rebuilt: bool,
    pub(crate) stale: bool,
}

/// What is cached.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Key {
    Voucher(VoucherId),
    Page { limit: usize, before: Option<VoucherId> },
}

#[derive(Debug, Default)]
struct Slot {
    current: Mutex<Option<Arc<Representation>>>,
    /// The last rebuild's failure, while it is recent: nobody tries again
    /// before the refresh interval has passed.
    failed: Mutex<Option<(Instant, String)>>,
    /// Held by the one request rebuilding the representation.
    rebuilding: tokio::sync::Mutex<()>,
}

/// Why a representation could not be built.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReadError {
    #[error("the view cannot be read: {0}")]
    View(#[from] StoreError),
    #[error("the admission gate (Redis) cannot be read: {0}")]
    Gate(#[from] redis::RedisError),
    /// A rebuild failed within the refresh interval; not tried again yet.
    #[error("{0}")]
    Recent(String),
}

/// The voucher representations of this ingress.
#[derive(Debug)]
pub(crate) struct VoucherCache {
    slots: Mutex<HashMap<Key, Arc<Slot>>>,
    capacity: usize,
    refresh: Duration,
    gate: Gate,
    view: Arc<dyn ViewReader>,
    clock: Arc<ServerClock>,
}

/// One voucher as every reader sees it.
#[derive(Debug, Serialize)]
struct LiveVoucher {
    voucher_id: VoucherId,
    /// As of the rebuild (the clock fields are written per response).
    phase: Phase,
    /// `fcfs`; `queue`: orders go through the waiting room; `draw`: only
    /// the draw's winners order.
    mode: &'static str,
    /// Leading zero bits of the proof of work each order, join or entry
    /// needs (`GET …/challenge`); 0: none.
    challenge_bits: u32,
    stock: u64,
    /// Units admission still has: what a new order can get.
    available: u64,
    /// Units not held by created orders, as the view has it.
    remaining: u64,
    per_user_limit: u32,
    begins_at: DateTime<Utc>,
    ends_at: DateTime<Utc>,
    /// Seconds a created order has to be paid.
    payment_seconds: u32,
    /// `payment_seconds` under its old name, kept for one release.
    hold_seconds: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    title: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<String>,
    /// Price of one unit in minor units; 0 when free.
    price: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    currency: Option<Currency>,
    paused: bool,
    admitted: u64,
    created: u64,
    paid: u64,
    failed: u64,
    cancelled: u64,
    refunded: u64,
    /// A draw's timeline and progress (draw-mode vouchers, single reads).
    #[serde(skip_serializing_if = "Option::is_none")]
    draw: Option<DrawJson>,
    /// A waiting room's (queue-mode vouchers, single reads).
    #[serde(skip_serializing_if = "Option::is_none")]
    queue: Option<QueueJson>,
}

/// `draw` in a voucher read: what the sale page shows of the draw itself.
#[derive(Debug, Serialize, Hash)]
struct DrawJson {
    entries_open_at: DateTime<Utc>,
    /// Entries are taken until then (`draw_at`).
    entries_open_until: DateTime<Utc>,
    entries: u64,
    /// The beacon round the ranking waits for; absent: the operator's seed.
    #[serde(skip_serializing_if = "Option::is_none")]
    beacon_round: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    beacon_round_at: Option<DateTime<Utc>>,
    /// Entries closed and the round is not published (or not fetched) yet.
    awaiting_beacon: bool,
    /// When the winners were selected; absent before the draw.
    #[serde(skip_serializing_if = "Option::is_none")]
    drawn_at: Option<DateTime<Utc>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    winners: Option<u64>,
    promoted: u64,
}

/// `queue` in a voucher read.
#[derive(Debug, Serialize, Hash)]
struct QueueJson {
    opens_at: DateTime<Utc>,
    /// Places whose turn has not come yet.
    waiting: u64,
    /// The beacon round the pre-queue's shuffle waits for; absent: the
    /// operator's seed.
    #[serde(skip_serializing_if = "Option::is_none")]
    beacon_round: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    beacon_round_at: Option<DateTime<Utc>>,
    /// The pre-queue closed and the round is not in yet: nobody is served.
    awaiting_beacon: bool,
}

/// The `draw` or `queue` member of a timeline.
fn timeline_json(timeline: Timeline) -> (Option<DrawJson>, Option<QueueJson>) {
    match timeline {
        Timeline::Draw(draw) => (
            Some(DrawJson {
                entries_open_at: draw.entries_open_at,
                entries_open_until: draw.draw_at,
                entries: draw.entries,
                beacon_round: draw.beacon_round.map(|(round, _)| round),
                beacon_round_at: draw.beacon_round.map(|(_, at)| at),
                awaiting_beacon: draw.awaiting_beacon,
                drawn_at: draw.drawn_at,
                winners: draw.winners,
                promoted: draw.promoted,
            }),
            None,
        ),
        Timeline::Queue(queue) => (
            None,
            Some(QueueJson {
                opens_at: queue.opens_at,
                waiting: queue.waiting,
                beacon_round: queue.beacon_round.map(|(round, _)| round),
                beacon_round_at: queue.beacon_round.map(|(_, at)| at),
                awaiting_beacon: queue.awaiting_beacon,
            }),
        ),
    }
}

impl LiveVoucher {
    /// Combines what Redis and the view hold; Redis decides admission, so
    /// it wins where both know a field.
    fn new(
        now: DateTime<Utc>,
        voucher_id: VoucherId,
        sale: Option<&SaleState>,
        view: Option<&VoucherView>,
    ) -> Option<Self> {
        let (stock, available, begins_at, ends_at, per_user_limit, paused) = match (sale, view) {
            (Some(s), _) => (s.stock, s.available, s.begins_at, s.ends_at, s.per_user_limit, s.paused),
            // Not in Redis (it lost the voucher, or the sale ended long ago
            // and its keys were cleaned): nothing is admitted.
            (None, Some(v)) => (v.stock, 0, v.begins_at, v.ends_at, v.per_user_limit, v.paused),
            (None, None) => return None,
        };
        let phase = Phase::at(now, begins_at, ends_at, paused, available);
        let hold_seconds = view.map(|v| v.hold_seconds).or(sale.and_then(|s| s.hold_seconds)).unwrap_or(0);
        Some(Self {
            voucher_id,
            phase,
            mode: sale.map_or("fcfs", |s| s.mode),
            challenge_bits: sale.map_or(0, |s| s.challenge_bits),
            stock,
            available,
            remaining: view.map_or(stock, |v| v.remaining),
            per_user_limit,
            begins_at,
            ends_at,
            payment_seconds: hold_seconds,
            hold_seconds,
            title: view.and_then(|v| v.title.clone()),
            description: view.and_then(|v| v.description.clone()),
            price: view.map_or(0, |v| v.price),
            currency: view.and_then(|v| v.currency),
            paused,
            admitted: view.map_or(0, |v| v.admitted),
            created: view.map_or(0, |v| v.created),
            paid: view.map_or(0, |v| v.paid),
            failed: view.map_or(0, |v| v.failed),
            cancelled: view.map_or(0, |v| v.cancelled),
            refunded: view.map_or(0, |v| v.refunded),
            draw: None,
            queue: None,
        })
    }

    /// Everything but the clock.
    fn state(&self, hasher: &mut impl Hasher) {
        (self.voucher_id.as_uuid(), self.phase.as_str(), self.mode, self.stock, self.available, self.remaining)
            .hash(hasher);
        (self.per_user_limit, self.begins_at, self.ends_at, self.hold_seconds, self.paused).hash(hasher);
        (self.admitted, self.created, self.paid, self.failed, self.cancelled, self.refunded).hash(hasher);
        (&self.title, &self.description, self.price, self.currency).hash(hasher);
        (&self.draw, &self.queue).hash(hasher);
    }
}

/// How long browsers and shared caches may keep an answer: a second while
/// anything can still change, longer once the sale is over.
fn cache_control(phases: impl IntoIterator<Item = Phase>) -> &'static str {
    if phases.into_iter().all(|phase| phase == Phase::Ended) {
        "public, max-age=60"
    } else {
        "public, max-age=1"
    }
}

fn representation(body: Body, state: u64, cache_control: &'static str) -> Representation {
    let etag = format!("W/\"{state:016x}\"");
    Representation { etag, body, cache_control, state, view: None, built: Instant::now() }
}

impl VoucherCache {
    pub(crate) fn new(
        capacity: usize,
        refresh: Duration,
        gate: Gate,
        view: Arc<dyn ViewReader>,
        clock: Arc<ServerClock>,
    ) -> Self {
        Self { slots: Mutex::default(), capacity, refresh, gate, view, clock }
    }

    fn slots(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Arc<Slot>>> {
        self.slots.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The voucher's representation; None when neither Redis nor the view
    /// knows it.
    pub(crate) async fn voucher(&self, voucher: VoucherId) -> Result<Option<Served>, ReadError> {
        self.cached(Key::Voucher(voucher), |previous| self.build_voucher(voucher, previous)).await
    }

    /// A page of the voucher list, newest first.
    pub(crate) async fn page(&self, limit: usize, before: Option<VoucherId>) -> Result<Served, ReadError> {
        let page =
            self.cached(Key::Page { limit, before }, |_| async { self.build_page(limit, before).await.map(Some) });
        Ok(page.await?.expect("a page always exists"))
    }

    /// Forgets what is cached about `voucher` (and the list pages), so the
    /// next read rebuilds: after an admin change, or a sell-out seen here.
    pub(crate) fn invalidate(&self, voucher: VoucherId) {
        self.slots().retain(|key, _| !matches!(key, Key::Page { .. }) && *key != Key::Voucher(voucher));
    }

    fn fresh(&self, slot: &Slot) -> Option<Arc<Representation>> {
        let current = slot.current.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        current.as_ref().filter(|r| r.built.elapsed() < self.refresh).cloned()
    }

    /// The answer while the slot's last rebuild failed recently: the last
    /// good representation, marked stale, else the failure.
    fn after_recent_failure(&self, slot: &Slot) -> Option<Result<Option<Served>, ReadError>> {
        let failed = slot.failed.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let (_, error) = failed.as_ref().filter(|(at, _)| at.elapsed() < self.refresh)?;
        let current = slot.current.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
        Some(match current {
            Some(representation) => Ok(Some(Served { representation, rebuilt: false, stale: true })),
            None => Err(ReadError::Recent(error.clone())),
        })
    }

    /// The slot of `key`, made if missing; at capacity, stale slots go
    /// first, then any.
    fn slot(&self, key: &Key) -> Arc<Slot> {
        let mut slots = self.slots();
        if let Some(slot) = slots.get(key) {
            return Arc::clone(slot);
        }
        if slots.len() >= self.capacity {
            slots.retain(|_, slot| self.fresh(slot).is_some());
            if slots.len() >= self.capacity {
                if let Some(any) = slots.keys().next().cloned() {
                    slots.remove(&any);
                }
            }
        }
        Arc::clone(slots.entry(key.clone()).or_default())
    }

    async fn cached<F, Fut>(&self, key: Key, build: F) -> Result<Option<Served>, ReadError>
    where
        F: FnOnce(Option<Arc<Representation>>) -> Fut,
        Fut: std::future::Future<Output = Result<Option<Representation>, ReadError>>,
    {
        let served = |representation, rebuilt| Some(Served { representation, rebuilt, stale: false });
        let slot = self.slot(&key);
        if let Some(fresh) = self.fresh(&slot) {
            return Ok(served(fresh, false));
        }
        if let Some(answer) = self.after_recent_failure(&slot) {
            return answer;
        }
        let _rebuilding = slot.rebuilding.lock().await;
        if let Some(fresh) = self.fresh(&slot) {
            return Ok(served(fresh, false));
        }
        if let Some(answer) = self.after_recent_failure(&slot) {
            return answer;
        }
        let previous = slot.current.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
        match build(previous).await {
            Ok(Some(built)) => {
                let built = Arc::new(built);
                *slot.current.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Arc::clone(&built));
                *slot.failed.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = None;
                Ok(served(built, true))
            }
            Ok(None) => {
                // Unknown: not remembered, so it is readable once created.
                self.slots().remove(&key);
                Ok(None)
            }
            Err(error) => {
                *slot.failed.lock().unwrap_or_else(std::sync::PoisonError::into_inner) =
                    Some((Instant::now(), error.to_string()));
                match self.after_recent_failure(&slot) {
                    Some(Ok(stale)) => {
                        tracing::warn!(%error, "A voucher representation could not be rebuilt; serving the last one.");
                        Ok(stale)
                    }
                    _ => Err(error),
                }
            }
        }
    }

    async fn build_voucher(
        &self,
        voucher: VoucherId,
        previous: Option<Arc<Representation>>,
    ) -> Result<Option<Representation>, ReadError> {
        let ids = [voucher];
        let (sale, view) = tokio::join!(self.gate.sales(&ids), self.view.voucher(voucher));
        // Redis decides what can be bought: without it there is no honest
        // `available`, so the rebuild fails (the last good answer is kept).
        let sale = sale?.pop().flatten();
        let view = match view {
            Ok(view) => view,
            Err(error) if sale.is_some() => {
                tracing::warn!(%error, %voucher, "View unreadable; the voucher's counters are its last known.");
                previous.and_then(|previous| previous.view.clone())
            }
            Err(error) => return Err(error.into()),
        };
        let Some(mut live) = LiveVoucher::new(self.clock.now(), voucher, sale.as_ref(), view.as_ref()) else {
            return Ok(None);
        };
        if matches!(live.mode, "draw" | "queue") {
            (live.draw, live.queue) = self.gate.timeline(voucher).await?.map(timeline_json).unwrap_or((None, None));
        }
        let mut hasher = DefaultHasher::new();
        live.state(&mut hasher);
        let mut built =
            representation(Body::One(VoucherJson::new(&live)), hasher.finish(), cache_control([live.phase]));
        built.view = view;
        Ok(Some(built))
    }

    async fn build_page(&self, limit: usize, before: Option<VoucherId>) -> Result<Representation, ReadError> {
        let views = self.view.vouchers(before, limit).await?;
        let ids: Vec<VoucherId> = views.iter().map(|v| v.voucher_id).collect();
        let sales = self.gate.sales(&ids).await?;
        let now = self.clock.now();
        let vouchers: Vec<LiveVoucher> = views
            .iter()
            .zip(&sales)
            .filter_map(|(view, sale)| LiveVoucher::new(now, view.voucher_id, sale.as_ref(), Some(view)))
            .collect();
        let mut hasher = DefaultHasher::new();
        for voucher in &vouchers {
            voucher.state(&mut hasher);
        }
        let next = if views.len() == limit { views.last().map(|v| v.voucher_id) } else { None };
        next.hash(&mut hasher);
        let cache_control = cache_control(vouchers.iter().map(|v| v.phase));
        let body = Body::Page { vouchers: vouchers.iter().map(VoucherJson::new).collect(), next };
        Ok(representation(body, hasher.finish(), cache_control))
    }
}

#[cfg(test)]
mod tests {
    use chrono::Duration;

    use super::*;

    fn sale(now: DateTime<Utc>, available: u64) -> SaleState {
        SaleState {
            stock: 10,
            available,
            begins_at: now - Duration::minutes(1),
            ends_at: now + Duration::minutes(1),
            per_user_limit: 2,
            paused: false,
            hold_seconds: Some(30),
            mode: "fcfs",
            challenge_bits: 0,
        }
    }

    #[test]
    fn redis_decides_the_phase_and_the_clock_fields_are_written_per_response() {
        let now = Utc::now();
        let id = VoucherId::generate();
        let open = LiveVoucher::new(now, id, Some(&sale(now, 3)), None).expect("known");
        assert_eq!((open.phase, open.available, open.remaining, open.hold_seconds), (Phase::Open, 3, 10, 30));
        let sold_out = LiveVoucher::new(now, id, Some(&sale(now, 0)), None).expect("known");
        assert_eq!(sold_out.phase, Phase::SoldOut);
        assert!(LiveVoucher::new(now, id, None, None).is_none());

        let shown = representation(Body::One(VoucherJson::new(&open)), 7, "x");
        let at = |later: i64, stale| -> serde_json::Value {
            serde_json::from_slice(&shown.body(now + Duration::milliseconds(later), stale)).expect("JSON")
        };
        let (first, second) = (at(0, false), at(1_500, false));
        assert!(first["server_time"].as_str().expect("a time").ends_with('Z'));
        assert_eq!((first["opens_in_ms"].as_i64(), first["closes_in_ms"].as_i64()), (Some(0), Some(60_000)));
        assert_eq!(second["closes_in_ms"].as_i64(), Some(58_500), "counted from this response's clock");
        assert_eq!(first["available"], 3);
        assert_eq!(first.get("stale"), None);
        assert_eq!(at(0, true)["stale"], true);
    }

    #[test]
    fn the_etag_is_the_sales_state_and_ended_sales_are_kept_longer() {
        let now = Utc::now();
        let id = VoucherId::generate();
        let open = LiveVoucher::new(now, id, Some(&sale(now, 3)), None).expect("known");
        let a = representation(Body::One(VoucherJson::new(&open)), 1, "x");
        let b = representation(Body::One(VoucherJson::new(&open)), 1, "x");
        let c = representation(Body::One(VoucherJson::new(&open)), 2, "x");
        assert_eq!(a.etag, b.etag);
        assert_ne!(a.etag, c.etag);
        assert!(a.etag.starts_with("W/\"") && a.etag.ends_with('"'), "a weak validator: {}", a.etag);
        let page = representation(Body::Page { vouchers: vec![VoucherJson::new(&open)], next: Some(id) }, 3, "x");
        let page: serde_json::Value = serde_json::from_slice(&page.body(now, false)).expect("JSON");
        assert_eq!(page["vouchers"][0]["voucher_id"], id.to_string());
        assert_eq!(page["next"], id.to_string());
        assert_eq!(cache_control([Phase::Ended, Phase::Ended]), "public, max-age=60");
        assert_eq!(cache_control([Phase::Ended, Phase::Open]), "public, max-age=1");
    }
}
