//! Voucher reads from memory: what a page storm hits.
//!
//! Each voucher (and each page of the voucher list) is kept as a finished
//! representation (the JSON body, its strong `ETag` and the `Cache-Control`
//! its phase calls for), rebuilt from Redis (what admission decides by:
//! stock left, window, pause) and the view (the order counters) once it is
//! older than `live.voucher_refresh_ms`. One request rebuilds it while the
//! others wait for that one, so a storm costs one Redis and one view read
//! per voucher per refresh, and an answer is never staler than the bound: a
//! sold-out voucher stops looking available within it. Unknown vouchers
//! are not remembered, so a voucher is readable the moment it is created.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use chrono::{DateTime, SecondsFormat, Utc};
use seckill_core::phase::Phase;
use seckill_core::VoucherId;
use seckill_gate::{Gate, SaleState};
use seckill_store::{StoreError, ViewReader, VoucherView};
use serde::Serialize;

use super::clock::ServerClock;

/// A finished answer, shared by every request until it is rebuilt.
#[derive(Debug)]
pub(crate) struct Representation {
    pub(crate) body: Bytes,
    /// Strong: a hash of the exact body.
    pub(crate) etag: String,
    pub(crate) cache_control: &'static str,
    /// A hash of the sale's state without the clock: what a voucher stream
    /// compares to decide whether anything changed.
    pub(crate) state: u64,
    built: Instant,
}

/// A representation and whether this request had to rebuild it.
#[derive(Clone, Debug)]
pub(crate) struct Served {
    pub(crate) representation: Arc<Representation>,
    pub(crate) rebuilt: bool,
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
    /// Held by the one request rebuilding the representation.
    rebuilding: tokio::sync::Mutex<()>,
}

/// Why a representation could not be built.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReadError {
    #[error("the view cannot be read: {0}")]
    View(#[from] StoreError),
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
    phase: Phase,
    /// The admission clock when this representation was made.
    server_time: String,
    /// Until `begins_at`, from `server_time` (0 once open).
    opens_in_ms: i64,
    /// Until `ends_at`, from `server_time` (0 once ended).
    closes_in_ms: i64,
    stock: u64,
    /// Units admission still has: what a new order can get.
    available: u64,
    /// Units not held by created orders, as the view has it.
    remaining: u64,
    per_user_limit: u32,
    begins_at: DateTime<Utc>,
    ends_at: DateTime<Utc>,
    hold_seconds: u32,
    paused: bool,
    admitted: u64,
    created: u64,
    confirmed: u64,
    failed: u64,
    cancelled: u64,
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
        Some(Self {
            voucher_id,
            phase,
            server_time: now.to_rfc3339_opts(SecondsFormat::Millis, true),
            opens_in_ms: (begins_at - now).num_milliseconds().max(0),
            closes_in_ms: (ends_at - now).num_milliseconds().max(0),
            stock,
            available,
            remaining: view.map_or(stock, |v| v.remaining),
            per_user_limit,
            begins_at,
            ends_at,
            hold_seconds: view.map(|v| v.hold_seconds).or(sale.and_then(|s| s.hold_seconds)).unwrap_or(0),
            paused,
            admitted: view.map_or(0, |v| v.admitted),
            created: view.map_or(0, |v| v.created),
            confirmed: view.map_or(0, |v| v.confirmed),
            failed: view.map_or(0, |v| v.failed),
            cancelled: view.map_or(0, |v| v.cancelled),
        })
    }

    /// Everything but the clock.
    fn state(&self, hasher: &mut impl Hasher) {
        (self.voucher_id.as_uuid(), self.phase.as_str(), self.stock, self.available, self.remaining).hash(hasher);
        (self.per_user_limit, self.begins_at, self.ends_at, self.hold_seconds, self.paused).hash(hasher);
        (self.admitted, self.created, self.confirmed, self.failed, self.cancelled).hash(hasher);
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

fn representation(body: &impl Serialize, state: u64, cache_control: &'static str) -> Representation {
    let body = Bytes::from(serde_json::to_vec(body).expect("voucher bodies serialize"));
    let mut hasher = DefaultHasher::new();
    body.hash(&mut hasher);
    Representation { etag: format!("\"{:016x}\"", hasher.finish()), body, cache_control, state, built: Instant::now() }
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
        self.cached(Key::Voucher(voucher), || self.build_voucher(voucher)).await
    }

    /// A page of the voucher list, newest first.
    pub(crate) async fn page(&self, limit: usize, before: Option<VoucherId>) -> Result<Served, ReadError> {
        let page =
            self.cached(Key::Page { limit, before }, || async { self.build_page(limit, before).await.map(Some) });
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

    async fn cached<F, Fut>(&self, key: Key, build: F) -> Result<Option<Served>, ReadError>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = Result<Option<Representation>, ReadError>>,
    {
        let served = |representation, rebuilt| Some(Served { representation, rebuilt });
        let existing = self.slots().get(&key).cloned();
        if let Some(slot) = &existing {
            if let Some(fresh) = self.fresh(slot) {
                return Ok(served(fresh, false));
            }
            let _rebuilding = slot.rebuilding.lock().await;
            if let Some(fresh) = self.fresh(slot) {
                return Ok(served(fresh, false));
            }
            let built = build().await?.map(Arc::new);
            *slot.current.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = built.clone();
            return Ok(built.and_then(|built| served(built, true)));
        }
        // Not cached: build first, keep it only if the voucher exists.
        let Some(built) = build().await?.map(Arc::new) else { return Ok(None) };
        let slot = Arc::new(Slot { current: Mutex::new(Some(Arc::clone(&built))), ..Slot::default() });
        let mut slots = self.slots();
        if slots.len() >= self.capacity {
            let stale: Vec<Key> =
                slots.iter().filter(|(_, slot)| self.fresh(slot).is_none()).map(|(key, _)| key.clone()).collect();
            for key in stale {
                slots.remove(&key);
            }
            if slots.len() >= self.capacity {
                if let Some(any) = slots.keys().next().cloned() {
                    slots.remove(&any);
                }
            }
        }
        slots.insert(key, slot);
        Ok(served(built, true))
    }

    async fn build_voucher(&self, voucher: VoucherId) -> Result<Option<Representation>, ReadError> {
        let ids = [voucher];
        let (sale, view) = tokio::join!(self.gate.sales(&ids), self.view.voucher(voucher));
        let sale = match sale {
            Ok(mut sales) => sales.pop().flatten(),
            Err(error) => {
                tracing::warn!(%error, %voucher, "Redis unreadable; the voucher is answered from the view.");
                None
            }
        };
        let view = match view {
            Ok(view) => view,
            Err(error) if sale.is_some() => {
                tracing::warn!(%error, %voucher, "View unreadable; the voucher is answered without its counters.");
                None
            }
            Err(error) => return Err(error.into()),
        };
        let Some(live) = LiveVoucher::new(self.clock.now(), voucher, sale.as_ref(), view.as_ref()) else {
            return Ok(None);
        };
        let mut hasher = DefaultHasher::new();
        live.state(&mut hasher);
        Ok(Some(representation(&live, hasher.finish(), cache_control([live.phase]))))
    }

    async fn build_page(&self, limit: usize, before: Option<VoucherId>) -> Result<Representation, ReadError> {
        let views = self.view.vouchers(before, limit).await?;
        let ids: Vec<VoucherId> = views.iter().map(|v| v.voucher_id).collect();
        let sales = self.gate.sales(&ids).await.unwrap_or_else(|error| {
            tracing::warn!(%error, "Redis unreadable; the voucher list is answered from the view.");
            vec![None; ids.len()]
        });
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
        let body = serde_json::json!({ "vouchers": vouchers, "next": next });
        Ok(representation(&body, hasher.finish(), cache_control(vouchers.iter().map(|v| v.phase))))
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
        }
    }

    #[test]
    fn redis_decides_the_phase_and_the_clock_fields_are_relative_to_server_time() {
        let now = Utc::now();
        let id = VoucherId::generate();
        let open = LiveVoucher::new(now, id, Some(&sale(now, 3)), None).expect("known");
        assert_eq!((open.phase, open.available, open.remaining, open.hold_seconds), (Phase::Open, 3, 10, 30));
        assert_eq!((open.opens_in_ms, open.closes_in_ms), (0, 60_000));
        let sold_out = LiveVoucher::new(now, id, Some(&sale(now, 0)), None).expect("known");
        assert_eq!(sold_out.phase, Phase::SoldOut);
        assert!(LiveVoucher::new(now, id, None, None).is_none());
        let json = serde_json::to_value(&open).expect("json");
        assert!(json["server_time"].as_str().expect("a time").ends_with('Z'));
    }

    #[test]
    fn the_etag_is_the_bodys_and_ended_sales_are_kept_longer() {
        let a = representation(&serde_json::json!({"a": 1}), 0, "x");
        let b = representation(&serde_json::json!({"a": 1}), 0, "x");
        let c = representation(&serde_json::json!({"a": 2}), 0, "x");
        assert_eq!(a.etag, b.etag);
        assert_ne!(a.etag, c.etag);
        assert!(a.etag.starts_with('"') && a.etag.ends_with('"'), "a strong validator");
        assert_eq!(cache_control([Phase::Ended, Phase::Ended]), "public, max-age=60");
        assert_eq!(cache_control([Phase::Ended, Phase::Open]), "public, max-age=1");
    }
}
