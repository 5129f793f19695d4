//! Loading a voucher into the gate, applying admin updates, and reading a
//! voucher back: every bucket of a voucher split across shards.
//!
//! A split voucher is loaded bucket by bucket, bucket 0 last: a voucher
//! whose bucket 0 is in Redis has all of them (admissions, which learn the
//! number of buckets from bucket 0, refuse it as unknown until then). An
//! update is applied to every bucket, each once per update id; the units it
//! adds are split between them like the stock. The buckets are different
//! slots, so a pause reaches them one after the other, a few milliseconds
//! apart; the processor applies every update again as it follows the log,
//! so an update stopped half-way is completed.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use futures::future::try_join_all;
use seckill_core::event::{VoucherCreated, VoucherUpdated};
use seckill_core::VoucherId;
use uuid::Uuid;

use crate::gate::{millis, unexpected};
use crate::layout::{share, Layout};
use crate::{Gate, GateVoucher, Holders, UpdateResult};

impl Gate {
    /// Makes a voucher admissible as `definition` defines it; false if it
    /// was loaded before (loading again never resets a sale) or its sale
    /// ended longer ago than the keys outlive it (a definition delivered
    /// again never brings an old sale back).
    pub async fn load_voucher(&self, definition: &VoucherCreated) -> redis::RedisResult<bool> {
        let layout = self.layouts.learn(definition.voucher_id, definition.shards);
        self.timed("load_voucher", async {
            let others = try_join_all((1..layout.shards()).map(|bucket| self.load_bucket(&layout, bucket, definition)));
            let loaded = others.await?.into_iter().any(|loaded| loaded);
            let loaded = self.load_bucket(&layout, 0, definition).await? || loaded;
            // Whoever loads a queue-mode voucher (the ingress creating it,
            // the processor following the log) opens its room: a voucher
            // that admits only with entries always has a room to get them.
            self.open_room(definition).await?;
            Ok(loaded)
        })
        .await
    }

    async fn load_bucket(&self, layout: &Layout, bucket: u32, definition: &VoucherCreated) -> redis::RedisResult<bool> {
        let keys = layout.keys(&self.prefix, bucket);
        let mut invocation = self.scripts.load_voucher.prepare_invoke();
        invocation
            .key(keys.all().as_slice())
            .key(&keys.newest_end)
            .arg(share(definition.stock, layout.shards(), bucket))
            .arg(definition.begins_at.timestamp_millis())
            .arg(definition.ends_at.timestamp_millis())
            .arg(definition.per_user_limit)
            .arg(definition.hold_seconds)
            .arg(self.ended_sale_ttl_ms)
            .arg(layout.shards())
            .arg(definition.stock)
            .arg(definition.price)
            .arg(definition.currency.as_ref().map(|c| c.as_str()).unwrap_or_default())
            .arg(definition.mode())
            .arg(definition.challenge_bits);
        // As an update (below): the follower stores its offset, the admin
        // is answered, only once a replica has the voucher when the wait is on.
        let loaded: i64 = self
            .invoke_durable("load_voucher", (layout.slot(bucket), &keys.voucher), &invocation, || {
                format!("load_voucher.lua for voucher {} bucket {bucket}", definition.voucher_id)
            })
            .await?;
        Ok(loaded == 1)
    }

    /// Applies an admin update, once per `update_id` (the record's event
    /// id), to every bucket of the voucher.
    pub async fn update_voucher(&self, update_id: Uuid, update: &VoucherUpdated) -> redis::RedisResult<UpdateResult> {
        let Some(layout) = self.layout(update.voucher_id).await? else {
            return Ok(UpdateResult::UnknownVoucher);
        };
        let buckets = (0..layout.shards()).map(|bucket| self.update_bucket(&layout, bucket, update_id, update));
        // Each bucket's call is timed on its own (`invoke_durable`).
        let replies = try_join_all(buckets).await?;
        let Some(first) = replies.first().filter(|reply| reply.0 != "unknown_voucher") else {
            return Ok(UpdateResult::UnknownVoucher);
        };
        let number = |text: &str| text.parse::<u64>().unwrap_or_default();
        let (_, stock, _, paused, begins_ms, ends_ms, voucher_stock, _) = first;
        let voucher = GateVoucher {
            stock: if layout.shards() > 1 { number(voucher_stock) } else { number(stock) },
            remaining: replies.iter().map(|reply| number(&reply.2)).sum(),
            paused: paused == "1",
            begins_at: millis(begins_ms.parse().unwrap_or_default()),
            ends_at: millis(ends_ms.parse().unwrap_or_default()),
        };
        for (code, ..) in &replies {
            if !matches!(code.as_str(), "applied" | "repeated" | "unknown_voucher") {
                return Err(unexpected("update_voucher.lua returned an unknown code", code.clone()));
            }
        }
        Ok(if replies.iter().any(|reply| reply.0 == "applied") {
            UpdateResult::Applied(voucher)
        } else {
            UpdateResult::Repeated(voucher)
        })
    }

    async fn update_bucket(
        &self,
        layout: &Layout,
        bucket: u32,
        update_id: Uuid,
        update: &VoucherUpdated,
    ) -> redis::RedisResult<UpdateReply> {
        let keys = layout.keys(&self.prefix, bucket);
        let paused = update.paused.map(|paused| if paused { "1" } else { "0" }).unwrap_or_default();
        let ends_ms = update.ends_at.map(|at| at.timestamp_millis().to_string()).unwrap_or_default();
        let mut invocation = self.scripts.update_voucher.prepare_invoke();
        invocation
            .key(&keys.voucher)
            .key(&keys.updates)
            .key(&keys.bought)
            .key(&keys.orders)
            .key(&keys.released)
            .key(&keys.retries)
            .key(&keys.admitted)
            .key(&keys.added)
            .key(&keys.transfers)
            .key(&keys.newest_end)
            .key(&keys.room)
            .key(&keys.line)
            .key(&keys.places)
            .key(&keys.seen)
            .key(&keys.holds)
            .key(&keys.ranks)
            .key(&keys.solved)
            .key(&keys.pace)
            .arg(update_id.to_string())
            .arg(paused)
            .arg(ends_ms)
            .arg(share(update.add_stock, layout.shards(), bucket))
            .arg(self.ended_sale_ttl_ms)
            .arg(update.add_stock)
            .arg(bucket);
        // An update is a promise (the admin's answer, the follower's
        // offset): when the replica wait is on, one the master's replicas
        // did not acknowledge is an error and is asked again (the script
        // applies it once).
        self.invoke_durable("update_voucher", (layout.slot(bucket), &keys.voucher), &invocation, || {
            format!("update_voucher.lua for update {update_id}")
        })
        .await
    }

    /// The voucher as the gate holds it, every bucket together (None: not
    /// loaded).
    pub async fn voucher(&self, voucher: VoucherId) -> redis::RedisResult<Option<GateVoucher>> {
        let Some(layout) = self.layout(voucher).await? else { return Ok(None) };
        let commands = layout
            .all_keys(&self.prefix)
            .iter()
            .map(|keys| {
                let mut command = redis::cmd("HMGET");
                command.arg(&keys.voucher).arg(&[
                    "stock",
                    "remaining",
                    "paused",
                    "begins_ms",
                    "ends_ms",
                    "voucher_stock",
                    "in_transit",
                ]);
                command
            })
            .collect();
        let buckets: Vec<BucketFields> = self.redis.query_each(commands).await?;
        let Some((Some(stock), _, paused, Some(begins_ms), Some(ends_ms), voucher_stock, _)) = buckets.first().cloned()
        else {
            return Ok(None);
        };
        Ok(Some(GateVoucher {
            stock: voucher_stock.unwrap_or(stock),
            remaining: buckets.iter().map(|bucket| available(bucket.1, bucket.6)).sum(),
            paused: paused.as_deref() == Some("1"),
            begins_at: millis(begins_ms),
            ends_at: millis(ends_ms),
        }))
    }

    /// When `voucher`'s draw is made (None: no draw loaded): an update may
    /// not end the sale before it.
    pub async fn draw_at(&self, voucher: VoucherId) -> redis::RedisResult<Option<DateTime<Utc>>> {
        let draw_ms: Option<i64> =
            redis::cmd("HGET").arg(self.keys(voucher).room).arg("draw_ms").query_async(&mut self.redis.clone()).await?;
        Ok(draw_ms.map(millis))
    }

    /// Units the gate still admits for `voucher`, every bucket together and
    /// what is in transit between two (None: not loaded).
    pub async fn remaining(&self, voucher: VoucherId) -> redis::RedisResult<Option<u64>> {
        let Some(layout) = self.layout(voucher).await? else { return Ok(None) };
        let levels = self.bucket_levels(&layout).await?;
        Ok(Some(levels.iter().map(|level| level.remaining.saturating_add(level.in_transit)).sum()))
    }

    /// Who holds units of `voucher` (in every bucket), for the sold-out
    /// memo; None when there are more than `max_holders` (not worth
    /// remembering) or the voucher is gone.
    pub async fn holders(&self, voucher: VoucherId, max_holders: usize) -> redis::RedisResult<Option<Holders>> {
        let Some(layout) = self.layout(voucher).await? else { return Ok(None) };
        let all = layout.all_keys(&self.prefix);
        let per_key = |name: &str, key: fn(&crate::VoucherKeys) -> &String| {
            all.iter()
                .map(|keys| {
                    let mut command = redis::cmd(name);
                    command.arg(key(keys));
                    command
                })
                .collect::<Vec<_>>()
        };
        let counts: Vec<usize> = self.redis.query_each(per_key("HLEN", |keys| &keys.bought)).await?;
        if counts.iter().sum::<usize>() > max_holders {
            return Ok(None);
        }
        let limit: Option<u32> =
            redis::cmd("HGET").arg(&all[0].voucher).arg("limit").query_async(&mut self.redis.clone()).await?;
        let bought: Vec<HashMap<String, u32>> = self.redis.query_each(per_key("HGETALL", |keys| &keys.bought)).await?;
        let orders: Vec<HashMap<String, String>> =
            self.redis.query_each(per_key("HGETALL", |keys| &keys.orders)).await?;
        // A user's units are all in one bucket: the maps do not overlap.
        let bought = bought.into_iter().flatten().collect();
        let orders =
            orders.into_iter().flatten().filter_map(|(user, order)| Some((user, order.parse().ok()?))).collect();
        Ok(limit.map(|limit| Holders { limit, bought, orders }))
    }
}

/// `update_voucher.lua`'s reply: code, stock, remaining, paused, begins_ms,
/// ends_ms, voucher_stock, added.
type UpdateReply = (String, String, String, String, String, String, String, String);

/// A bucket's stock, remaining, paused, begins_ms, ends_ms, voucher_stock
/// and in_transit.
type BucketFields = (Option<u64>, Option<u64>, Option<String>, Option<i64>, Option<i64>, Option<u64>, Option<i64>);

/// What a bucket still has to admit or is passing to another.
pub(crate) fn available(remaining: Option<u64>, in_transit: Option<i64>) -> u64 {
    remaining.unwrap_or(0).saturating_add(u64::try_from(in_transit.unwrap_or(0)).unwrap_or(0))
}
