//! Fan-out of order changes to the open streams of their users (how many
//! may be open is bounded by [`super::places`]).
//!
//! A user's streams share one broadcast channel, which exists only while
//! one is open. The channel is bounded: a stream that falls that far behind
//! is told it lagged and catches up from the view (see the stream route),
//! so a slow reader costs memory for a bounded number of changes only.

use std::collections::HashMap;
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

    /// Whether `user` has a stream open: the changes of an order nobody
    /// streams are not worth making (nearly every order of a sale).
    pub(crate) fn watched(&self, user: &UserId) -> bool {
        self.channels().contains_key(user)
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

#[cfg(test)]
mod tests {
    use super::*;

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
            paid_at: None,
            cancelled_at: None,
            amount: 0,
            currency: None,
            pay_by: None,
            payment_id: None,
            checkout_id: None,
            checkout_expires_at: None,
        };
        let change = super::super::changes::changes(&row).remove(0);
        feeds.publish(&alice, change.clone());
        assert_eq!(*subscription.receiver.recv().await.expect("received"), change);
        drop(subscription);
        assert!(feeds.channels().is_empty());
    }
}
