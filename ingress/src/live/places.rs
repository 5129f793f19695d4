//! Places for the read side's held requests: open event streams and
//! long-poll waiters, each bounded in all, per user and per client address.
//!
//! Requests that name a user (a user's order stream, a long-poll) and
//! anonymous ones (a voucher's stream, which anyone may open) take places
//! from separate pools: a crowd watching a countdown, or someone opening
//! streams from many addresses, can fill the anonymous pool but never takes
//! a buyer's place to follow their own order.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use seckill_core::UserId;

/// Who a place counts against.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Holder {
    User(UserId),
    Address(IpAddr),
}

/// The bounds of one kind of place.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Bounds {
    /// Places for requests of a user, in all.
    pub(crate) with_user: usize,
    /// Places for anonymous requests, in all.
    pub(crate) anonymous: usize,
    pub(crate) per_user: usize,
    pub(crate) per_address: usize,
}

/// How many places are taken, in both pools, per user and per address.
#[derive(Debug)]
pub(crate) struct Places {
    taken: Mutex<Counts>,
    bounds: Bounds,
}

#[derive(Debug, Default)]
struct Counts {
    with_user: usize,
    anonymous: usize,
    per_holder: HashMap<Holder, usize>,
}

/// Why a place was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refused {
    /// The pool is full.
    Full,
    UserFull,
    AddressFull,
}

/// One taken place; given back when dropped.
#[derive(Debug)]
pub(crate) struct Place {
    places: Arc<Places>,
    anonymous: bool,
    holders: Vec<Holder>,
}

impl Places {
    pub(crate) fn new(bounds: Bounds) -> Self {
        Self { taken: Mutex::default(), bounds }
    }

    fn counts(&self) -> std::sync::MutexGuard<'_, Counts> {
        self.taken.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A place for a request of `user` (None: anonymous) from `address`
    /// (None: unknown).
    pub(crate) fn take(self: &Arc<Self>, user: Option<&UserId>, address: Option<IpAddr>) -> Result<Place, Refused> {
        let holders: Vec<Holder> =
            user.cloned().map(Holder::User).into_iter().chain(address.map(Holder::Address)).collect();
        let anonymous = user.is_none();
        let mut counts = self.counts();
        let (taken, bound) = if anonymous {
            (counts.anonymous, self.bounds.anonymous)
        } else {
            (counts.with_user, self.bounds.with_user)
        };
        if taken >= bound {
            return Err(Refused::Full);
        }
        for holder in &holders {
            let (limit, refused) = match holder {
                Holder::User(_) => (self.bounds.per_user, Refused::UserFull),
                Holder::Address(_) => (self.bounds.per_address, Refused::AddressFull),
            };
            if counts.per_holder.get(holder).copied().unwrap_or(0) >= limit {
                return Err(refused);
            }
        }
        if anonymous {
            counts.anonymous += 1;
        } else {
            counts.with_user += 1;
        }
        for holder in &holders {
            *counts.per_holder.entry(holder.clone()).or_default() += 1;
        }
        Ok(Place { places: Arc::clone(self), anonymous, holders })
    }

    /// Places taken now, in both pools.
    #[cfg(test)]
    pub(crate) fn taken(&self) -> usize {
        let counts = self.counts();
        counts.with_user + counts.anonymous
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        let mut counts = self.places.counts();
        if self.anonymous {
            counts.anonymous -= 1;
        } else {
            counts.with_user -= 1;
        }
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
    fn places_are_bounded_per_pool_per_user_and_per_address() {
        let bounds = Bounds { with_user: 3, anonymous: 1, per_user: 1, per_address: 2 };
        let places = Arc::new(Places::new(bounds));
        let (alice, bob, carol) = (
            UserId::parse("alice").expect("valid"),
            UserId::parse("bob").expect("valid"),
            UserId::parse("carol").expect("valid"),
        );
        let here = Some(IpAddr::from([10, 0, 0, 1]));
        let first = places.take(Some(&alice), here).expect("room");
        assert_eq!(places.take(Some(&alice), None).err(), Some(Refused::UserFull));
        let second = places.take(None, here).expect("room");
        assert_eq!(places.take(Some(&bob), here).err(), Some(Refused::AddressFull));
        // The anonymous pool is full: users still get places.
        assert_eq!(places.take(None, None).err(), Some(Refused::Full));
        let third = places.take(Some(&bob), None).expect("room");
        let fourth = places.take(Some(&carol), None).expect("room");
        assert_eq!(places.take(Some(&UserId::parse("dan").expect("valid")), None).err(), Some(Refused::Full));
        drop((first, second, third, fourth));
        assert_eq!(places.taken(), 0);
        assert!(places.counts().per_holder.is_empty());
    }
}
