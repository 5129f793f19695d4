//! Fan-out of order changes to the open streams of their users, and the
//! bounds on how many streams may be open.
//!
//! A user's streams share one broadcast channel, which exists only while
//! one is open. The channel is bounded: a stream that falls that far behind
//! is told it lagged and catches up from the view (see the stream route),
//! so a slow reader costs memory for a bounded number of changes only.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use seckill_core::UserId;
use tokio::sync::broadcast;

use super::changes::Change;

/// Changes one user's streams may fall behind by before they catch up.
const CHANNEL_CAPACITY: usize = 64;

/// The broadcast channel of every user with an open stream.
#[derive(Debug, Default)]
pub(crate) struct UserFeeds {
    channels: Mutex<HashMap<UserId, broadcast::Sender<Arc<Change>>>>,
}

impl UserFeeds {
    fn channels(&self) -> std::sync::MutexGuard<'_, HashMap<UserId, broadcast::Sender<Arc<Change>>>> {
        self.channels.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Sends `change` to the streams of `user`, if any is open.
    pub(crate) fn publish(&self, user: &UserId, change: Change) {
        if let Some(sender) = self.channels().get(user) {
            // No receiver left: the last stream is closing.
            let _ = sender.send(Arc::new(change));
        }
    }

    /// A receiver of `user`'s changes from now on.
    pub(crate) fn subscribe(self: &Arc<Self>, user: &UserId) -> Subscription {
        let receiver =
            self.channels().entry(user.clone()).or_insert_with(|| broadcast::channel(CHANNEL_CAPACITY).0).subscribe();
        Subscription { feeds: Arc::clone(self), user: user.clone(), receiver }
    }
}

/// One stream's receiver; the user's channel goes when its last one does.
#[derive(Debug)]
pub(crate) struct Subscription {
    feeds: Arc<UserFeeds>,
    user: UserId,
    pub(crate) receiver: broadcast::Receiver<Arc<Change>>,
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let mut channels = self.feeds.channels();
        // This receiver still counts until it is dropped, after this.
        if channels.get(&self.user).is_some_and(|sender| sender.receiver_count() <= 1) {
            channels.remove(&self.user);
        }
    }
}

/// Who a stream counts against.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Holder {
    User(UserId),
    Address(IpAddr),
}

/// How many streams are open, in all, per user and per address.
#[derive(Debug)]
pub(crate) struct StreamPermits {
    open: Mutex<Counts>,
    max_total: usize,
    max_per_user: usize,
    max_per_address: usize,
}

#[derive(Debug, Default)]
struct Counts {
    total: usize,
    per_holder: HashMap<Holder, usize>,
}

/// Why a stream was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refused {
    Full,
    UserFull,
    AddressFull,
}

/// One open stream's place; given back when dropped.
#[derive(Debug)]
pub(crate) struct StreamPermit {
    permits: Arc<StreamPermits>,
    holders: Vec<Holder>,
}

impl StreamPermits {
    pub(crate) fn new(max_total: usize, max_per_user: usize, max_per_address: usize) -> Self {
        Self { open: Mutex::default(), max_total, max_per_user, max_per_address }
    }

    fn counts(&self) -> std::sync::MutexGuard<'_, Counts> {
        self.open.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A place for a stream of `user` (None: a voucher's stream) from
    /// `address` (None: unknown).
    pub(crate) fn acquire(
        self: &Arc<Self>,
        user: Option<&UserId>,
        address: Option<IpAddr>,
    ) -> Result<StreamPermit, Refused> {
        let holders: Vec<Holder> =
            user.cloned().map(Holder::User).into_iter().chain(address.map(Holder::Address)).collect();
        let mut counts = self.counts();
        if counts.total >= self.max_total {
            return Err(Refused::Full);
        }
        for holder in &holders {
            let (limit, refused) = match holder {
                Holder::User(_) => (self.max_per_user, Refused::UserFull),
                Holder::Address(_) => (self.max_per_address, Refused::AddressFull),
            };
            if counts.per_holder.get(holder).copied().unwrap_or(0) >= limit {
                return Err(refused);
            }
        }
        counts.total += 1;
        for holder in &holders {
            *counts.per_holder.entry(holder.clone()).or_default() += 1;
        }
        Ok(StreamPermit { permits: Arc::clone(self), holders })
    }

    /// Streams open now.
    #[cfg(test)]
    pub(crate) fn open(&self) -> usize {
        self.counts().total
    }
}

impl Drop for StreamPermit {
    fn drop(&mut self) {
        let mut counts = self.permits.counts();
        counts.total -= 1;
        for holder in &self.holders {
            if let Some(count) = counts.per_holder.get_mut(holder) {
                *count -= 1;
                if *count == 0 {
                    counts.per_holder.remove(holder);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_bounded_in_all_per_user_and_per_address() {
        let permits = Arc::new(StreamPermits::new(3, 1, 2));
        let (alice, bob) = (UserId::parse("alice").expect("valid"), UserId::parse("bob").expect("valid"));
        let here = Some(IpAddr::from([10, 0, 0, 1]));
        let first = permits.acquire(Some(&alice), here).expect("room");
        assert_eq!(permits.acquire(Some(&alice), None).err(), Some(Refused::UserFull));
        let second = permits.acquire(Some(&bob), here).expect("room");
        assert_eq!(permits.acquire(None, here).err(), Some(Refused::AddressFull));
        let third = permits.acquire(None, None).expect("room");
        assert_eq!(permits.acquire(None, None).err(), Some(Refused::Full));
        drop((first, second, third));
        assert_eq!(permits.open(), 0);
        assert!(permits.counts().per_holder.is_empty());
    }

    #[tokio::test]
    async fn a_users_channel_lives_while_a_stream_is_open() {
        let feeds = Arc::new(UserFeeds::default());
        let alice = UserId::parse("alice").expect("valid");
        let mut subscription = feeds.subscribe(&alice);
        let row = seckill_store::OrderView {
            order_id: seckill_core::OrderId::generate(),
            voucher_id: seckill_core::VoucherId::generate(),
            user_id: alice.clone(),
            quantity: 1,
            status: seckill_store::OrderStatus::Pending,
            reason: None,
            accepted_at: chrono::Utc::now(),
            decided_at: None,
            confirmed_at: None,
            cancelled_at: None,
        };
        let change = super::super::changes::changes(&row).remove(0);
        feeds.publish(&alice, change.clone());
        assert_eq!(*subscription.receiver.recv().await.expect("received"), change);
        drop(subscription);
        assert!(feeds.channels().is_empty());
    }
}
