//! The orders this ingress knows, in memory: what status reads, waiters and
//! streams are answered from.
//!
//! Rows come from the log (the live follower), from this ingress's own
//! admissions (the moment it answers `202`) and from reads that had to ask
//! the view. Like the view, a row only moves forward ([`merge_order`]), so
//! events arriving in any order, or twice, leave the furthest status. The
//! capacity is bounded; the rows that arrived first leave first. Each user's
//! orders held are indexed, so a stream catching up finds the orders the
//! view does not have yet.

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasher, RandomState};
use std::sync::Mutex;

use seckill_core::{OrderId, UserId};
use seckill_store::{merge_order, OrderView};

/// Lock shards: requests on the two cores rarely wait for each other.
const SHARDS: usize = 16;

/// A bounded map of order id → the furthest row seen, and which orders
/// each user has in it.
#[derive(Debug)]
pub(crate) struct OrderCache {
    shards: Vec<Mutex<Shard>>,
    per_shard: usize,
    /// User → ids of their orders held, oldest first; an id leaves with its
    /// row, so this holds no more ids than there are rows.
    users: Vec<Mutex<HashMap<UserId, Vec<OrderId>>>>,
    hasher: RandomState,
}

#[derive(Debug, Default)]
struct Shard {
    rows: HashMap<OrderId, OrderView>,
    /// Ids in the order they arrived, for eviction.
    arrival: VecDeque<OrderId>,
}

/// A row that moved forward: what it was and what it is now.
#[derive(Debug)]
pub(crate) struct Moved {
    pub(crate) before: Option<OrderView>,
    pub(crate) after: OrderView,
}

impl OrderCache {
    /// Holds at most about `capacity` orders.
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
            per_shard: capacity.div_ceil(SHARDS).max(1),
            users: (0..SHARDS).map(|_| Mutex::default()).collect(),
            hasher: RandomState::new(),
        }
    }

    fn user_shard(&self, user: &UserId) -> std::sync::MutexGuard<'_, HashMap<UserId, Vec<OrderId>>> {
        let index = (self.hasher.hash_one(user) % SHARDS as u64) as usize;
        self.users[index].lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The rows of `user`'s orders held, newest first, at most `limit`.
    pub(crate) fn of_user(&self, user: &UserId, limit: usize) -> Vec<OrderView> {
        let ids: Vec<OrderId> = self.user_shard(user).get(user).cloned().unwrap_or_default();
        let mut rows: Vec<OrderView> = ids.into_iter().filter_map(|order| self.get(order)).collect();
        rows.sort_by_key(|row| std::cmp::Reverse(row.order_id));
        rows.truncate(limit);
        rows
    }

    fn shard(&self, order: OrderId) -> std::sync::MutexGuard<'_, Shard> {
        // UUIDv7 ends in random bits: an even spread.
        let index = (order.as_uuid().as_u128() % SHARDS as u128) as usize;
        self.shards[index].lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The furthest row seen of `order`.
    pub(crate) fn get(&self, order: OrderId) -> Option<OrderView> {
        self.shard(order).rows.get(&order).cloned()
    }

    /// Takes `row` into account; returns the change when it moved the order
    /// forward (None: stale or a duplicate).
    pub(crate) fn merge(&self, row: OrderView) -> Option<Moved> {
        let order = row.order_id;
        let mut shard = self.shard(order);
        let before = shard.rows.get(&order);
        let (_, after) = merge_order(before, &row)?;
        let before = before.cloned();
        let mut evicted = Vec::new();
        if before.is_none() {
            shard.arrival.push_back(order);
            while shard.rows.len() >= self.per_shard {
                let Some(oldest) = shard.arrival.pop_front() else { break };
                evicted.extend(shard.rows.remove(&oldest));
            }
        }
        shard.rows.insert(order, after.clone());
        drop(shard);
        // The user index after the row lock is released: the two locks are
        // never held together.
        for gone in evicted {
            let mut users = self.user_shard(&gone.user_id);
            if let Some(ids) = users.get_mut(&gone.user_id) {
                ids.retain(|id| *id != gone.order_id);
                if ids.is_empty() {
                    users.remove(&gone.user_id);
                }
            }
        }
        if before.is_none() {
            self.user_shard(&after.user_id).entry(after.user_id.clone()).or_default().push(order);
        }
        Some(Moved { before, after })
    }

    /// Orders held now.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.shards.iter().map(|shard| shard.lock().map(|s| s.rows.len()).unwrap_or(0)).sum()
    }
}

#[cfg(test)]
mod tests {
    use chrono::Utc;
    use seckill_core::{UserId, VoucherId};
    use seckill_store::OrderStatus;

    use super::*;

    fn row(order: OrderId, status: OrderStatus) -> OrderView {
        OrderView {
            order_id: order,
            voucher_id: VoucherId::generate(),
            user_id: UserId::parse("u").expect("valid"),
            quantity: 1,
            status,
            reason: None,
            accepted_at: Utc::now(),
            decided_at: None,
            paid_at: None,
            cancelled_at: None,
            amount: 0,
            currency: None,
            pay_by: None,
            payment_id: None,
            checkout_id: None,
            checkout_expires_at: None,
        }
    }

    #[test]
    fn rows_only_move_forward() {
        let cache = OrderCache::new(1_000);
        let order = OrderId::generate();
        let moved = cache.merge(row(order, OrderStatus::Created)).expect("new");
        assert!(moved.before.is_none());
        assert!(cache.merge(row(order, OrderStatus::Pending)).is_none(), "a late acceptance changes nothing");
        let moved = cache.merge(row(order, OrderStatus::Cancelled)).expect("moves");
        assert_eq!(moved.before.map(|r| r.status), Some(OrderStatus::Created));
        assert_eq!(cache.get(order).map(|r| r.status), Some(OrderStatus::Cancelled));
    }

    #[test]
    fn the_capacity_is_kept_by_dropping_the_oldest() {
        let cache = OrderCache::new(SHARDS * 4);
        let orders: Vec<OrderId> = (0..SHARDS * 40).map(|_| OrderId::generate()).collect();
        for order in &orders {
            cache.merge(row(*order, OrderStatus::Pending));
        }
        assert!(cache.len() <= SHARDS * 4, "{} rows", cache.len());
        assert!(cache.get(*orders.last().expect("some")).is_some(), "the newest stays");
        let user = UserId::parse("u").expect("valid");
        let indexed: usize =
            cache.users.iter().map(|shard| shard.lock().map(|s| s.get(&user).map_or(0, Vec::len)).unwrap_or(0)).sum();
        assert_eq!(indexed, cache.len(), "the user index drops ids with their rows");
    }

    #[test]
    fn a_users_orders_are_found_newest_first() {
        let cache = OrderCache::new(1_000);
        let orders: Vec<OrderId> = (0..5).map(|_| OrderId::generate()).collect();
        for order in &orders {
            cache.merge(row(*order, OrderStatus::Pending));
        }
        cache.merge(row(orders[0], OrderStatus::Created));
        let user = UserId::parse("u").expect("valid");
        let found: Vec<OrderId> = cache.of_user(&user, 3).iter().map(|row| row.order_id).collect();
        assert_eq!(found, vec![orders[4], orders[3], orders[2]]);
        assert_eq!(cache.of_user(&user, 10).last().map(|row| row.status), Some(OrderStatus::Created));
        assert!(cache.of_user(&UserId::parse("other").expect("valid"), 10).is_empty());
    }
}
