//! Who bought: how many units users ended up with, and the users with the
//! most orders.

use std::collections::{BTreeMap, HashMap};

use seckill_core::ids::UserId;

use super::fold::{FinalStatus, VoucherLog};

/// Users shown in the top-users table.
pub const TOP_USERS: usize = 10;

/// One user's orders for a voucher.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserOrders {
    pub user_id: UserId,
    /// Orders the log mentions.
    pub orders: u64,
    /// Units held at the end (created minus cancelled).
    pub units: u64,
    pub created: u64,
    pub failed: u64,
    pub cancelled: u64,
}

/// How units were spread over users.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Buyers {
    /// Units held at the end → how many users hold that many (users holding
    /// nothing at the end are left out).
    pub units_per_user: BTreeMap<u64, u64>,
    /// Distinct users with any order.
    pub users: u64,
    /// The users with the most orders (then the most units, then by id).
    pub top: Vec<UserOrders>,
}

impl VoucherLog {
    /// Who bought how much.
    pub fn buyers(&self) -> Buyers {
        let mut per_user: HashMap<&UserId, UserOrders> = HashMap::new();
        for order in self.orders.values() {
            let entry = per_user.entry(&order.user_id).or_insert_with(|| UserOrders {
                user_id: order.user_id.clone(),
                orders: 0,
                units: 0,
                created: 0,
                failed: 0,
                cancelled: 0,
            });
            entry.orders += 1;
            let status = order.final_status();
            if order.creation().is_some() {
                entry.created += 1;
            }
            match status {
                FinalStatus::Created | FinalStatus::Paid => entry.units += u64::from(order.quantity),
                FinalStatus::Failed => entry.failed += 1,
                FinalStatus::Cancelled => entry.cancelled += 1,
                FinalStatus::Pending => {}
            }
        }
        let mut units_per_user = BTreeMap::new();
        for user in per_user.values().filter(|user| user.units > 0) {
            *units_per_user.entry(user.units).or_default() += 1;
        }
        let users = per_user.len() as u64;
        let mut top: Vec<UserOrders> = per_user.into_values().collect();
        top.sort_by(|a, b| b.orders.cmp(&a.orders).then(b.units.cmp(&a.units)).then(a.user_id.cmp(&b.user_id)));
        top.truncate(TOP_USERS);
        Buyers { units_per_user, users, top }
    }
}
