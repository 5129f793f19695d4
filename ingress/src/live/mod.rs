//! The read side of a sale: what most of its traffic asks.
//!
//! Before a sale crowds refresh its page and watch a countdown; afterwards
//! buyers refresh their order's result and the ones who missed out keep
//! refreshing for returned units. This module answers them from memory and
//! pushes changes instead of making clients poll:
//!
//! * [`vouchers`]: voucher pages with a staleness bound, `ETag` and `304`;
//! * [`orders`]: order rows, updated from the log as it is written;
//! * [`waiters`] and [`feeds`]: long-polls and streams woken by events;
//! * [`follow`]: every ingress follows the sales and orders topics itself
//!   (assign-and-seek, no consumer group), so each replica wakes its own
//!   waiters and streams whichever one the deciding events reached first;
//! * [`http`]: the routes, the sale page among them;
//! * the admission clock (`seckill_web::ServerClock`, Redis `TIME`), for
//!   countdowns.
//!
//! An order is readable by its owner from the `202` on, through any
//! ingress: the admitting ingress writes it to Redis before answering (see
//! [`Gate::remember_pending`]) and keeps it in memory; a read that finds it
//! neither in memory nor in the view finds it there.

mod changes;
mod feeds;
mod follow;
pub(crate) mod http;
mod orders;
pub(crate) mod places;
mod voucher_feeds;
mod vouchers;
mod waiters;

use std::sync::Arc;
use std::time::Duration;

use seckill_core::event::OrderAccepted;
use seckill_core::metrics::LiveMetrics;
use seckill_core::{OrderId, VoucherId};
use seckill_gate::Gate;
use seckill_kafka::FollowerHealth;
use seckill_store::{OrderStatus, OrderView, StoreError, ViewReader};
use tokio_util::sync::CancellationToken;

use self::feeds::UserFeeds;
pub(crate) use self::follow::{fetch_wait, follow};
use self::orders::OrderCache;
use self::places::{Bounds, Places};
pub(crate) use self::voucher_feeds::VoucherFeeds;
pub(crate) use self::vouchers::VoucherCache;
use self::waiters::Waiters;
use crate::config::LiveConfig;
pub(crate) use seckill_web::ServerClock;

/// How recently the follower must have reported being caught up for
/// memory to answer orders that may still change.
const FOLLOWER_FRESH: Duration = Duration::from_secs(3);
/// Records the follower may be behind and still count as caught up.
const FOLLOWER_MAX_LAG: i64 = 10_000;

/// Everything the read side shares.
#[derive(Debug)]
pub(crate) struct Live {
    pub(crate) config: LiveConfig,
    pub(crate) clock: Arc<ServerClock>,
    pub(crate) vouchers: VoucherCache,
    orders: OrderCache,
    pub(crate) waiters: Arc<Waiters>,
    pub(crate) feeds: Arc<UserFeeds>,
    pub(crate) streams: Arc<Places>,
    /// Places of long-poll waiters (per user and address; the total is
    /// also bounded by [`Waiters`]).
    pub(crate) waiter_places: Arc<Places>,
    /// One refresher per voucher someone streams.
    pub(crate) voucher_feeds: VoucherFeeds,
    pub(crate) metrics: LiveMetrics,
    /// Cancelled when the ingress begins to shut down: every waiter is
    /// answered and every stream ends, so connections can drain.
    pub(crate) closing: CancellationToken,
    /// Whether the follower keeps up; None until it started.
    follower: std::sync::OnceLock<Arc<FollowerHealth>>,
    gate: Gate,
    view: Arc<dyn ViewReader>,
}

/// Where an order read was answered from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Source {
    Memory,
    View,
    Pending,
}

impl Live {
    pub(crate) fn new(config: LiveConfig, gate: Gate, view: Arc<dyn ViewReader>, metrics: LiveMetrics) -> Self {
        let clock = Arc::new(ServerClock);
        let vouchers = VoucherCache::new(
            config.voucher_cache_capacity,
            Duration::from_millis(config.voucher_refresh_ms),
            gate.clone(),
            Arc::clone(&view),
            Arc::clone(&clock),
        );
        Self {
            orders: OrderCache::new(config.order_cache_capacity),
            waiters: Arc::new(Waiters::new(config.max_waiters)),
            feeds: Arc::default(),
            streams: Arc::new(Places::new(Bounds {
                with_user: config.max_streams,
                anonymous: config.max_voucher_streams,
                per_user: config.max_streams_per_user,
                per_address: config.max_streams_per_address,
            })),
            waiter_places: Arc::new(Places::new(Bounds {
                with_user: config.max_waiters,
                anonymous: config.max_waiters,
                per_user: config.max_waiters_per_user,
                per_address: config.max_waiters_per_address,
            })),
            voucher_feeds: VoucherFeeds::default(),
            follower: std::sync::OnceLock::new(),
            closing: CancellationToken::new(),
            config,
            clock,
            vouchers,
            metrics,
            gate,
            view,
        }
    }

    /// Hands over the follower's health once it runs.
    pub(crate) fn following(&self, health: Arc<FollowerHealth>) {
        let _ = self.follower.set(health);
    }

    fn follower_current(&self) -> bool {
        self.follower.get().is_some_and(|health| health.is_current(FOLLOWER_FRESH, FOLLOWER_MAX_LAG))
    }

    /// An order this ingress just admitted: in Redis for the other
    /// ingresses and in memory here, before the client hears `202`. A
    /// `replayed` order (an `Idempotency-Key` retry) was admitted earlier,
    /// maybe elsewhere: its record is written only if missing, and its
    /// acceptance time is not known here, so memory learns it from the log.
    pub(crate) async fn admitted(&self, order: &OrderAccepted, replayed: bool) -> redis::RedisResult<()> {
        // This process's memory first: its owner reading through this
        // ingress finds the order even if Redis fails right after admitting
        // it (a restart between the two calls); the pending record serves
        // the other ingresses.
        if !replayed {
            if let Some(row) = OrderView::from_event(&seckill_core::Event::OrderAccepted(order.clone())) {
                self.order_changed(row);
            }
        }
        // A new order's record is the admission's own on a single Redis.
        if !replayed && self.gate.admission_writes_pending() {
            return Ok(());
        }
        let ttl = Duration::from_secs(self.config.pending_order_ttl_seconds);
        self.gate.remember_pending(order, ttl, replayed).await
    }

    /// Takes an order's row into account and, if it moved the order
    /// forward, tells its owner's streams and wakes its waiters.
    pub(crate) fn order_changed(&self, row: OrderView) {
        let Some(moved) = self.orders.merge(row) else { return };
        let user = &moved.after.user_id;
        if self.feeds.watched(user) {
            for change in changes::changes_between(moved.before.as_ref(), &moved.after) {
                self.feeds.publish(user, change);
            }
        }
        let woken = self.waiters.wake(moved.after.order_id);
        self.metrics.wakeups.inc_by(woken as u64);
    }

    /// The order as it stands, and where that was read: memory when the
    /// follower keeps it current (or it is final), else the view, else an
    /// admitted order's pending record in Redis.
    pub(crate) async fn order(&self, order: OrderId) -> Result<Option<(OrderView, Source)>, StoreError> {
        let cached = self.orders.get(order);
        if let Some(row) = &cached {
            if is_final(row.status) || self.follower_current() {
                return Ok(Some((row.clone(), Source::Memory)));
            }
        }
        match self.view.order(order).await {
            Ok(Some(row)) => {
                let merged = match self.orders.merge(row.clone()) {
                    Some(moved) => moved.after,
                    None => self.orders.get(order).unwrap_or(row),
                };
                return Ok(Some((merged, Source::View)));
            }
            Ok(None) => {}
            Err(error) => match cached {
                Some(row) => return Ok(Some((row, Source::Memory))),
                None => return Err(error),
            },
        }
        if let Some(row) = cached {
            return Ok(Some((row, Source::Memory)));
        }
        let pending = self.gate.pending(order).await.map_err(|e| StoreError::Backend(e.to_string()))?;
        let Some(accepted) = pending else { return Ok(None) };
        let Some(row) = OrderView::from_event(&seckill_core::Event::OrderAccepted(accepted)) else { return Ok(None) };
        self.orders.merge(row.clone());
        Ok(Some((self.orders.get(order).unwrap_or(row), Source::Pending)))
    }

    /// A user's recent orders, newest first, each as far as this ingress
    /// knows: the view's rows joined with memory's, which may be ahead of
    /// the view (an order admitted or decided before the projector wrote
    /// it, learned from the log).
    pub(crate) async fn user_orders(
        &self,
        user: &seckill_core::UserId,
        limit: usize,
    ) -> Result<Vec<OrderView>, StoreError> {
        let rows = self.view.user_orders(user, limit).await?;
        Ok(self.joined_with_memory(user, rows, limit))
    }

    /// Like [`Live::user_orders`], but with the view unreadable (the
    /// projector down), memory's rows alone: what a stream catching up can
    /// still send.
    pub(crate) async fn user_orders_or_memory(&self, user: &seckill_core::UserId, limit: usize) -> Vec<OrderView> {
        let rows = self.view.user_orders(user, limit).await.unwrap_or_else(|error| {
            tracing::warn!(%error, "The view is unreadable; a stream catches up from memory only.");
            Vec::new()
        });
        self.joined_with_memory(user, rows, limit)
    }

    fn joined_with_memory(&self, user: &seckill_core::UserId, rows: Vec<OrderView>, limit: usize) -> Vec<OrderView> {
        let mut joined: std::collections::BTreeMap<OrderId, OrderView> =
            rows.into_iter().map(|row| (row.order_id, row)).collect();
        for cached in self.orders.of_user(user, limit) {
            let row = match joined.get(&cached.order_id) {
                Some(row) => seckill_store::merge_order(Some(row), &cached).map_or_else(|| row.clone(), |(_, m)| m),
                None => cached,
            };
            joined.insert(row.order_id, row);
        }
        joined.into_values().rev().take(limit).collect()
    }

    /// A voucher changed (created, updated) or was seen sold out here.
    pub(crate) fn voucher_changed(&self, voucher: VoucherId) {
        self.vouchers.invalidate(voucher);
    }
}

/// Statuses no event can change any more.
pub(crate) fn is_final(status: OrderStatus) -> bool {
    matches!(status, OrderStatus::Failed | OrderStatus::Cancelled)
}
