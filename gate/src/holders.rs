//! A snapshot of who holds a sold-out voucher's units, answering as the
//! gate would while nothing is left (the ingress's sold-out fast path).

use std::collections::HashMap;

use seckill_core::{OrderId, UserId};

use crate::Rejection;

/// Who held units of a sold-out voucher, and its per-user limit.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Holders {
    /// The voucher's per-user limit.
    pub limit: u32,
    /// user id → units held.
    pub bought: HashMap<String, u32>,
    /// user id → their latest order.
    pub orders: HashMap<String, OrderId>,
}

impl Holders {
    /// The gate's answer for `user` asking `quantity` while nothing is left,
    /// by the same rule as `admit.lua`.
    pub fn refusal(&self, user: &UserId, quantity: u32) -> Rejection {
        let bought = self.bought.get(user.as_str()).copied().unwrap_or(0);
        if bought.saturating_add(quantity) > self.limit {
            if bought >= self.limit {
                return Rejection::DuplicateOrder { existing: self.orders.get(user.as_str()).copied() };
            }
            return Rejection::LimitExceeded { limit: self.limit };
        }
        Rejection::SoldOut { remaining: 0 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_like_the_gate() {
        let order = OrderId::generate();
        let h = Holders {
            limit: 2,
            bought: HashMap::from([("full".to_owned(), 2), ("half".to_owned(), 1)]),
            orders: HashMap::from([("full".to_owned(), order), ("half".to_owned(), order)]),
        };
        let user = |name: &str| UserId::parse(name).expect("valid");
        assert_eq!(h.refusal(&user("full"), 1), Rejection::DuplicateOrder { existing: Some(order) });
        assert_eq!(h.refusal(&user("half"), 2), Rejection::LimitExceeded { limit: 2 });
        assert_eq!(h.refusal(&user("half"), 1), Rejection::SoldOut { remaining: 0 });
        assert_eq!(h.refusal(&user("new"), 1), Rejection::SoldOut { remaining: 0 });
    }
}
