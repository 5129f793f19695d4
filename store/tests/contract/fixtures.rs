//! Vouchers and orders the contracts are written with.

use chrono::{Duration, Utc};
use seckill_core::event::{OrderAccepted, VoucherCreated};
use seckill_core::{OrderId, UserId, VoucherId};

/// A voucher of `stock` units, one per user, open for the next hour.
pub fn voucher(stock: u64) -> VoucherCreated {
    let now = Utc::now();
    VoucherCreated {
        voucher_id: VoucherId::generate(),
        stock,
        per_user_limit: 1,
        begins_at: now,
        ends_at: now + Duration::hours(1),
        hold_seconds: 0,
        shards: 1,
        title: None,
        description: None,
        price: 0,
        currency: None,
        queue: None,
        draw: None,
        challenge_bits: 0,
    }
}

/// One unit of `voucher` admitted for `user` now.
pub fn order(voucher: VoucherId, user: &str) -> OrderAccepted {
    OrderAccepted {
        order_id: OrderId::generate(),
        voucher_id: voucher,
        user_id: UserId::parse(user).expect("valid"),
        quantity: 1,
        accepted_at: Utc::now(),
        amount: 0,
        currency: None,
        idempotency_key: None,
    }
}
