//! Rebuilding a voucher's admission state from the log (`restore.lua`, one
//! atomic step per bucket), while the platform runs.
//!
//! A voucher not split into buckets is one call, as it always was. A split
//! voucher is restored bucket by bucket, each with the orders of its own
//! users; what is not in the log is how the stock is spread between the
//! buckets (transfers move it), so:
//!
//! 1. new transfers are stopped for a while and those under way completed
//!    (writing only; [`Gate::freeze_transfers`]), so no unit moves between
//!    buckets while they are rewritten one by one;
//! 2. each bucket's allotment as of the log is what Redis has, less the
//!    units of updates the log does not have yet (`restore.lua` adds those
//!    back, with whatever lands after this read);
//! 3. if every bucket is there, the allotments add up to the log's stock and
//!    each covers what its users hold, they are kept; otherwise the healthy
//!    buckets keep theirs if the rest can be covered, and the others get what
//!    their users hold plus an even share of what is left; failing that,
//!    every bucket gets what its users hold plus an even share;
//! 4. transfers go on again.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use redis::RedisResult;
use seckill_core::event::OrderAccepted;
use seckill_core::OrderId;
use uuid::Uuid;

use crate::gate::unexpected;
use crate::layout::{share, Layout};
use crate::{Gate, RestoreAction, RestoreMode, RestoreOutcome, VoucherAdmission};

/// How long a restore may stop a split voucher's transfers: far longer
/// than restoring takes, short enough that a reconcile that died does not
/// keep dry buckets from borrowing for long.
const FREEZE: Duration = Duration::from_secs(30);

/// What Redis has of one bucket: its allotment (`stock`), units in
/// transit, and the updates it applied with the units each added.
#[derive(Debug, Default)]
struct BucketBooks {
    stock: Option<u64>,
    in_transit: u64,
    updates: HashSet<String>,
    added: HashMap<String, String>,
}

impl Gate {
    /// Rebuilds `state.voucher_id`'s admission state from what the log
    /// says, counting what landed in Redis since the log was read: orders
    /// given back, orders admitted, updates applied. [`RestoreMode::Check`]
    /// only compares. Idempotency keys and transfer journals are not in the
    /// log and are left as they are.
    pub async fn restore(&self, state: &VoucherAdmission, mode: RestoreMode) -> RedisResult<RestoreOutcome> {
        let layout = self.layouts.learn(state.voucher_id, state.shards);
        if layout.shards() == 1 {
            let orders: Vec<&OrderAccepted> = state.orders.iter().collect();
            let mut outcome = self.restore_bucket(&layout, 0, state, mode, state.stock, &orders).await?;
            // A queue-mode voucher admits only with entries: it needs its
            // room (a Redis that lost the voucher lost the room too: it comes
            // back from the log where the log can tell it, else it is opened
            // new, empty, and its seed committed by the ingresses;
            // `crate::room_restore`).
            // A draw-mode voucher's draw comes back from the log.
            if mode == RestoreMode::Write && outcome.action != RestoreAction::Expired {
                if let Some(queue) = &state.queue {
                    outcome.room = Some(self.restore_room(state.voucher_id, queue, &state.room_history).await?);
                }
                if let Some(draw) = &state.draw {
                    outcome.draw = Some(self.restore_draw(state.voucher_id, draw, &state.draw_history).await?);
                }
            }
            return Ok(outcome);
        }
        if mode == RestoreMode::Write {
            self.freeze_transfers(&layout, FREEZE).await?;
        }
        let restored = self.restore_split(&layout, state, mode).await;
        if mode == RestoreMode::Write {
            self.thaw_transfers(&layout).await?;
        }
        restored
    }

    async fn restore_split(
        &self,
        layout: &Layout,
        state: &VoucherAdmission,
        mode: RestoreMode,
    ) -> RedisResult<RestoreOutcome> {
        let mut orders: Vec<Vec<&OrderAccepted>> = vec![Vec::new(); layout.shards() as usize];
        for order in &state.orders {
            orders[layout.home(&order.user_id) as usize].push(order);
        }
        let released: HashSet<OrderId> = state.released.iter().copied().collect();
        let held: Vec<u64> = orders
            .iter()
            .map(|bucket| {
                bucket.iter().filter(|o| !released.contains(&o.order_id)).map(|o| u64::from(o.quantity)).sum()
            })
            .collect();
        let books = self.bucket_books(layout).await?;
        let log_updates: HashSet<String> = state.updates.iter().map(Uuid::to_string).collect();
        let as_of_log: Vec<Option<u64>> = books
            .iter()
            .map(|bucket| {
                let since: u64 = bucket
                    .updates
                    .difference(&log_updates)
                    .filter_map(|update| bucket.added.get(update)?.parse::<u64>().ok())
                    .sum();
                // Units a transfer took from a bucket are still its own until
                // the receiver takes them (a check does not complete transfers).
                Some(bucket.stock?.saturating_add(bucket.in_transit).saturating_sub(since))
            })
            .collect();
        let allotments = allot(state.stock, &as_of_log, &held);
        let mut outcomes = Vec::with_capacity(layout.shards() as usize);
        // Bucket 0 last: admissions learn from it that the voucher is there.
        for bucket in (1..layout.shards()).chain([0]) {
            let outcome = self
                .restore_bucket(layout, bucket, state, mode, allotments[bucket as usize], &orders[bucket as usize])
                .await?;
            outcomes.push(outcome);
        }
        Ok(combine(&outcomes))
    }

    /// What Redis has of each bucket's books, bucket 0 first.
    async fn bucket_books(&self, layout: &Layout) -> RedisResult<Vec<BucketBooks>> {
        let all = layout.all_keys(&self.prefix);
        let command = |name: &str, key: &str, fields: &[&str]| {
            let mut command = redis::cmd(name);
            command.arg(key);
            for field in fields {
                command.arg(*field);
            }
            command
        };
        let levels: Vec<(Option<u64>, Option<i64>)> = self
            .redis
            .query_each(all.iter().map(|keys| command("HMGET", &keys.voucher, &["stock", "in_transit"])).collect())
            .await?;
        let updates: Vec<HashSet<String>> =
            self.redis.query_each(all.iter().map(|keys| command("SMEMBERS", &keys.updates, &[])).collect()).await?;
        let added: Vec<HashMap<String, String>> =
            self.redis.query_each(all.iter().map(|keys| command("HGETALL", &keys.added, &[])).collect()).await?;
        Ok(levels
            .into_iter()
            .zip(updates)
            .zip(added)
            .map(|(((stock, in_transit), updates), added)| BucketBooks {
                stock,
                in_transit: u64::try_from(in_transit.unwrap_or(0)).unwrap_or(0),
                updates,
                added,
            })
            .collect())
    }

    /// One `restore.lua` call: bucket `bucket` of `layout`, whose users'
    /// orders are `orders`, with `allotment` units as of the log.
    async fn restore_bucket(
        &self,
        layout: &Layout,
        bucket: u32,
        state: &VoucherAdmission,
        mode: RestoreMode,
        allotment: u64,
        orders: &[&OrderAccepted],
    ) -> RedisResult<RestoreOutcome> {
        let keys = layout.keys(&self.prefix, bucket);
        let ids: HashSet<OrderId> = orders.iter().map(|order| order.order_id).collect();
        let released: Vec<&OrderId> = state.released.iter().filter(|order| ids.contains(order)).collect();
        let mut call = self.scripts.restore.key(keys.all().as_slice());
        call.arg(match mode {
            RestoreMode::Check => "check",
            RestoreMode::Write => "write",
        })
        .arg(allotment)
        .arg(state.begins_ms)
        .arg(state.ends_ms)
        .arg(state.limit)
        .arg(state.hold_seconds)
        .arg(if state.paused { "1" } else { "0" })
        .arg(state.settings_version.map(|v| v.to_string()).unwrap_or_default())
        .arg(self.ended_sale_ttl_ms)
        .arg(released.len())
        .arg(state.updates.len())
        .arg(layout.shards())
        .arg(state.stock)
        .arg(state.price)
        .arg(state.currency.as_ref().map(|c| c.as_str()).unwrap_or_default())
        .arg(state.mode())
        .arg(state.challenge_bits);
        for order in released {
            call.arg(order.to_string());
        }
        for update in &state.updates {
            call.arg(update.to_string());
        }
        for order in orders {
            call.arg(order.order_id.to_string()).arg(order.user_id.as_str()).arg(order.quantity);
        }
        let (action, before, after, users_fixed, differences): (String, String, String, String, Vec<String>) =
            self.timed("restore", call.invoke_async(&mut self.redis.clone())).await?;
        let action = match action.as_str() {
            "unchanged" => RestoreAction::Unchanged,
            "corrected" => RestoreAction::Corrected,
            "restored" => RestoreAction::Restored,
            "expired" => RestoreAction::Expired,
            other => return Err(unexpected("restore.lua returned an unknown action", other.to_owned())),
        };
        Ok(RestoreOutcome {
            action,
            remaining_before: before.parse().ok(),
            remaining_after: after.parse().ok(),
            users_fixed: users_fixed.parse().unwrap_or_default(),
            differences,
            draw: None,
            room: None,
        })
    }
}

/// Each bucket's allotment: `found` (what Redis has, as of the log; None
/// for a bucket that is not there) when it is whole and consistent, else
/// repaired as the module header says. `held[b]` is what bucket b's users
/// hold by the log.
fn allot(stock: u64, found: &[Option<u64>], held: &[u64]) -> Vec<u64> {
    let shards = u32::try_from(found.len()).unwrap_or(1);
    let healthy = |b: usize| found[b].filter(|allotment| *allotment >= held[b]);
    let kept: u64 = (0..found.len()).filter_map(healthy).sum();
    if (0..found.len()).all(|b| healthy(b).is_some()) && kept == stock {
        return found.iter().map(|allotment| allotment.unwrap_or(0)).collect();
    }
    let repaired: Vec<usize> = (0..found.len()).filter(|b| healthy(*b).is_none()).collect();
    let needed: u64 = repaired.iter().map(|b| held[*b]).sum();
    if kept.saturating_add(needed) <= stock && !repaired.is_empty() {
        let spare = stock - kept - needed;
        let count = u32::try_from(repaired.len()).unwrap_or(1);
        let mut allotments: Vec<u64> = (0..found.len()).map(|b| healthy(b).unwrap_or(0)).collect();
        for (i, b) in (0u32..).zip(&repaired) {
            allotments[*b] = held[*b] + share(spare, count, i);
        }
        return allotments;
    }
    let spare = stock.saturating_sub(held.iter().sum());
    (0..found.len()).map(|b| held[b] + share(spare, shards, u32::try_from(b).unwrap_or(0))).collect()
}

/// The outcome of a voucher from its buckets' (bucket 0's last).
fn combine(outcomes: &[RestoreOutcome]) -> RestoreOutcome {
    let all = |action| outcomes.iter().all(|outcome| outcome.action == action);
    let action = if outcomes.iter().any(|outcome| outcome.action == RestoreAction::Expired) {
        RestoreAction::Expired
    } else if all(RestoreAction::Unchanged) {
        RestoreAction::Unchanged
    } else if all(RestoreAction::Restored) {
        RestoreAction::Restored
    } else {
        RestoreAction::Corrected
    };
    let sum = |pick: fn(&RestoreOutcome) -> Option<u64>| -> Option<u64> {
        outcomes.iter().map(pick).try_fold(0u64, |total, units| Some(total.saturating_add(units?)))
    };
    let bucket_zero = outcomes.last();
    RestoreOutcome {
        action,
        // None when bucket 0 was missing: the voucher was not admissible.
        remaining_before: bucket_zero
            .and_then(|zero| zero.remaining_before)
            .map(|_| outcomes.iter().filter_map(|outcome| outcome.remaining_before).sum::<u64>()),
        remaining_after: sum(|outcome| outcome.remaining_after),
        users_fixed: outcomes.iter().map(|outcome| outcome.users_fixed).sum(),
        // The outcomes are of buckets 1, 2, … and 0, in that order.
        differences: match outcomes {
            [only] => only.differences.clone(),
            _ => (1..outcomes.len())
                .chain([0])
                .zip(outcomes)
                .flat_map(|(bucket, outcome)| {
                    outcome.differences.iter().map(move |difference| format!("bucket {bucket}: {difference}"))
                })
                .collect(),
        },
        draw: None,
        room: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consistent_allotments_are_kept() {
        assert_eq!(allot(100, &[Some(10), Some(60), Some(30)], &[5, 50, 0]), vec![10, 60, 30]);
    }

    #[test]
    fn a_lost_bucket_gets_what_its_users_hold_and_what_is_left() {
        // Bucket 1 is gone; the others keep theirs; 100 - 10 - 30 = 60 left,
        // of which bucket 1's users hold 50.
        assert_eq!(allot(100, &[Some(10), None, Some(30)], &[5, 50, 0]), vec![10, 60, 30]);
    }

    #[test]
    fn allotments_that_do_not_add_up_are_spread_again() {
        // A bucket below what its users hold, and a sum over the stock.
        let allotted = allot(100, &[Some(90), Some(20), Some(30)], &[5, 50, 0]);
        assert_eq!(allotted.iter().sum::<u64>(), 100);
        assert!(allotted.iter().zip([5, 50, 0]).all(|(allotment, held)| *allotment >= held), "{allotted:?}");
        // Everything lost: held plus an even share.
        assert_eq!(allot(9, &[None, None, None], &[0, 3, 0]), vec![2, 5, 2]);
    }

    #[test]
    fn a_voucher_is_as_changed_as_its_most_changed_bucket() {
        let outcome = |action, before: Option<u64>, after| RestoreOutcome {
            action,
            remaining_before: before,
            remaining_after: Some(after),
            users_fixed: 1,
            differences: Vec::new(),
            draw: None,
            room: None,
        };
        let mixed = combine(&[
            outcome(RestoreAction::Unchanged, Some(3), 3),
            outcome(RestoreAction::Restored, None, 2),
            outcome(RestoreAction::Unchanged, Some(4), 4),
        ]);
        assert_eq!(mixed.action, RestoreAction::Corrected);
        assert_eq!((mixed.remaining_before, mixed.remaining_after, mixed.users_fixed), (Some(7), Some(9), 3));
        assert_eq!(mixed.differences, Vec::<String>::new(), "no bucket was corrected, one restored");
        let missing = combine(&[outcome(RestoreAction::Restored, None, 1), outcome(RestoreAction::Restored, None, 1)]);
        assert_eq!((missing.action, missing.remaining_before), (RestoreAction::Restored, None));
    }

    #[test]
    fn what_differed_is_named_with_its_bucket() {
        let outcome = |differences: &[&str]| RestoreOutcome {
            action: if differences.is_empty() { RestoreAction::Unchanged } else { RestoreAction::Corrected },
            remaining_before: Some(1),
            remaining_after: Some(1),
            users_fixed: 0,
            differences: differences.iter().map(|d| (*d).to_owned()).collect(),
            draw: None,
            room: None,
        };
        // Buckets 1, 2 and then 0, as restore_split restores them.
        let split = combine(&[outcome(&["limit 2 → 1"]), outcome(&[]), outcome(&["the expiry of bought (none) → 9"])]);
        assert_eq!(split.action, RestoreAction::Corrected);
        assert_eq!(split.differences, ["bucket 1: limit 2 → 1", "bucket 0: the expiry of bought (none) → 9"]);
        let single = combine(&[outcome(&["ends_ms 1 → 2"])]);
        assert_eq!(single.differences, ["ends_ms 1 → 2"]);
    }
}
