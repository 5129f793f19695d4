//! What the read side asks of Redis: the server clock admission judges the
//! sale window by, and admitted orders the log does not have yet.

use std::collections::HashMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use seckill_core::event::OrderAccepted;
use seckill_core::{OrderId, VoucherId};

use crate::keys::pending_order_key;
use crate::Gate;

/// A sale as the gate holds it: what admission decides by.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SaleState {
    /// Units for sale in all.
    pub stock: u64,
    /// Units admission still has: what a new order can get.
    pub available: u64,
    pub begins_at: DateTime<Utc>,
    pub ends_at: DateTime<Utc>,
    pub per_user_limit: u32,
    pub paused: bool,
    /// None for vouchers loaded before the gate kept it.
    pub hold_seconds: Option<u32>,
}

/// A voucher's admission state as Redis holds it: what an audit compares
/// with the log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AdmissionSnapshot {
    pub stock: u64,
    pub remaining: u64,
    /// Units per user id.
    pub bought: HashMap<String, u64>,
}

/// The voucher hash's fields, in the order [`SaleState`] reads them.
const SALE_FIELDS: [&str; 7] = ["stock", "remaining", "begins_ms", "ends_ms", "limit", "paused", "hold_seconds"];

type SaleFields = (Option<u64>, Option<u64>, Option<i64>, Option<i64>, Option<u32>, Option<String>, Option<u32>);

fn sale(fields: SaleFields) -> Option<SaleState> {
    let (stock, available, begins_ms, ends_ms, limit, paused, hold_seconds) = fields;
    Some(SaleState {
        stock: stock?,
        available: available?,
        begins_at: DateTime::from_timestamp_millis(begins_ms?)?,
        ends_at: DateTime::from_timestamp_millis(ends_ms?)?,
        per_user_limit: limit?,
        paused: paused.as_deref() == Some("1"),
        hold_seconds,
    })
}

impl Gate {
    /// The sales of `vouchers` (None: not in Redis), in one round trip.
    pub async fn sales(&self, vouchers: &[VoucherId]) -> redis::RedisResult<Vec<Option<SaleState>>> {
        if vouchers.is_empty() {
            return Ok(Vec::new());
        }
        let mut pipe = redis::pipe();
        for voucher in vouchers {
            pipe.cmd("HMGET").arg(self.keys(*voucher).voucher).arg(&SALE_FIELDS);
        }
        let replies: Vec<SaleFields> = pipe.query_async(&mut self.redis.clone()).await?;
        Ok(replies.into_iter().map(sale).collect())
    }

    /// The Redis server's clock (`TIME`): `admit.lua` judges every sale
    /// window by it, so a countdown read from it ends when admission opens.
    pub async fn server_time(&self) -> redis::RedisResult<DateTime<Utc>> {
        let (seconds, micros): (i64, i64) = redis::cmd("TIME").query_async(&mut self.redis.clone()).await?;
        DateTime::from_timestamp(seconds, u32::try_from(micros.clamp(0, 999_999)).unwrap_or(0) * 1_000)
            .ok_or_else(|| redis::RedisError::from((redis::ErrorKind::Parse, "TIME answered an impossible time")))
    }

    /// What Redis holds for `voucher` now: stock, remaining and units per
    /// user (None: not loaded), read in one round trip.
    pub async fn admission_snapshot(&self, voucher: VoucherId) -> redis::RedisResult<Option<AdmissionSnapshot>> {
        let keys = self.keys(voucher);
        let ((stock, remaining), bought): ((Option<u64>, Option<u64>), HashMap<String, u64>) = redis::pipe()
            .cmd("HMGET")
            .arg(&keys.voucher)
            .arg(&["stock", "remaining"])
            .cmd("HGETALL")
            .arg(&keys.bought)
            .query_async(&mut self.redis.clone())
            .await?;
        Ok(match (stock, remaining) {
            (Some(stock), Some(remaining)) => Some(AdmissionSnapshot { stock, remaining, bought }),
            _ => None,
        })
    }

    /// Keeps an admitted order readable by its id for `ttl`, until the log
    /// and the view have it: the ingress writes it before answering `202`,
    /// so the owner can read, cancel and confirm the order at once, through
    /// any ingress. `only_if_missing` never overwrites a record (a replayed
    /// request restores one its first ingress did not get to write).
    pub async fn remember_pending(
        &self,
        order: &OrderAccepted,
        ttl: Duration,
        only_if_missing: bool,
    ) -> redis::RedisResult<()> {
        let record = serde_json::to_vec(order).expect("orders serialize: every field is plain data");
        let mut command = redis::cmd("SET");
        command.arg(pending_order_key(&self.prefix, order.order_id)).arg(record).arg("PX").arg(ttl.as_millis() as u64);
        if only_if_missing {
            command.arg("NX");
        }
        let _: Option<String> = command.query_async(&mut self.redis.clone()).await?;
        Ok(())
    }

    /// The admitted order `order`, while its pending record lasts.
    pub async fn pending(&self, order: OrderId) -> redis::RedisResult<Option<OrderAccepted>> {
        let raw: Option<Vec<u8>> =
            redis::cmd("GET").arg(pending_order_key(&self.prefix, order)).query_async(&mut self.redis.clone()).await?;
        Ok(raw.and_then(|raw| serde_json::from_slice::<OrderAccepted>(&raw).ok()).filter(|o| o.order_id == order))
    }
}
