//! Long-poll waiters: requests parked until their order changes.
//!
//! A waiter registers before it reads the order, so a change that lands
//! between the read and the wait still wakes it. Waking is driven by the
//! events this ingress sees (its own admissions and the live follower),
//! never by re-reading a store in a loop. Each waiter costs one slot here
//! and its request; the number of waiters is bounded.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use seckill_core::OrderId;
use tokio::sync::Notify;

/// Every order someone waits on, with its wake-up signal.
#[derive(Debug)]
pub(crate) struct Waiters {
    slots: Mutex<HashMap<OrderId, Slot>>,
    waiting: AtomicUsize,
    max: usize,
}

#[derive(Debug)]
struct Slot {
    notify: Arc<Notify>,
    waiters: usize,
}

/// One waiter's registration; leaves when dropped.
#[derive(Debug)]
pub(crate) struct Registration {
    waiters: Arc<Waiters>,
    order: OrderId,
    notify: Arc<Notify>,
}

impl Waiters {
    pub(crate) fn new(max: usize) -> Self {
        Self { slots: Mutex::default(), waiting: AtomicUsize::new(0), max }
    }

    fn slots(&self) -> std::sync::MutexGuard<'_, HashMap<OrderId, Slot>> {
        self.slots.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Registers a waiter on `order`; None when as many wait as allowed.
    pub(crate) fn register(self: &Arc<Self>, order: OrderId) -> Option<Registration> {
        if self.waiting.fetch_add(1, Ordering::AcqRel) >= self.max {
            self.waiting.fetch_sub(1, Ordering::AcqRel);
            return None;
        }
        let mut slots = self.slots();
        let slot = slots.entry(order).or_insert_with(|| Slot { notify: Arc::new(Notify::new()), waiters: 0 });
        slot.waiters += 1;
        let notify = Arc::clone(&slot.notify);
        Some(Registration { waiters: Arc::clone(self), order, notify })
    }

    /// Wakes everyone waiting on `order`; returns how many.
    pub(crate) fn wake(&self, order: OrderId) -> usize {
        let slots = self.slots();
        let Some(slot) = slots.get(&order) else { return 0 };
        slot.notify.notify_waiters();
        slot.waiters
    }

    /// Waiters registered now.
    #[cfg(test)]
    pub(crate) fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Acquire)
    }
}

impl Registration {
    /// The signal; create the `notified()` future, enable it, then read the
    /// order, so no wake-up between the two is lost.
    pub(crate) fn notify(&self) -> &Notify {
        &self.notify
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut slots = self.waiters.slots();
        if let Some(slot) = slots.get_mut(&self.order) {
            slot.waiters -= 1;
            if slot.waiters == 0 {
                slots.remove(&self.order);
            }
        }
        drop(slots);
        self.waiters.waiting.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_wake_reaches_every_waiter_of_the_order_and_slots_are_bounded() {
        let waiters = Arc::new(Waiters::new(2));
        let order = OrderId::generate();
        let (a, b) = (waiters.register(order).expect("room"), waiters.register(order).expect("room"));
        assert!(waiters.register(OrderId::generate()).is_none(), "full");
        {
            let (woken_a, woken_b) = (a.notify().notified(), b.notify().notified());
            tokio::pin!(woken_a, woken_b);
            woken_a.as_mut().enable();
            woken_b.as_mut().enable();
            assert_eq!(waiters.wake(OrderId::generate()), 0, "another order wakes nobody");
            assert_eq!(waiters.wake(order), 2);
            woken_a.await;
            woken_b.await;
        }
        drop((a, b));
        assert_eq!(waiters.waiting(), 0);
        assert!(waiters.slots().is_empty(), "no slot outlives its waiters");
        assert!(waiters.register(order).is_some());
    }
}
