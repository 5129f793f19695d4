//! Moving units between the buckets of a voucher split across shards.
//!
//! A bucket that runs dry borrows from the others. The buckets are on
//! different slots (and usually different masters), so no script can move a
//! unit from one to another atomically; a transfer is three scripts, each
//! atomic on its own bucket, tied by a transfer id recorded in a journal in
//! both buckets (`<prefix>:{t}:transfers`):
//!
//! 1. [`Transfer::debit`] (`transfer_debit.lua`, giving bucket): takes up to
//!    the units wanted from `remaining` and `stock`, adds them to
//!    `in_transit` and journals `out|<to>|<n>|pending`. Retried with the same
//!    id, it repeats its first answer.
//! 2. [`Transfer::settle`] (`transfer_settle.lua`, receiving bucket): decides
//!    the transfer's fate once and journals it: credited (the units join its
//!    `remaining` and `stock`) or, if that bucket is not in Redis, fenced (no
//!    later call can credit it). Called again, it answers the same.
//! 3. [`Transfer::finish`] (`transfer_finish.lua`, giving bucket): closes the
//!    pending record as decided: `done`, or `returned` with the units back
//!    in the giving bucket. Once only.
//!
//! A transfer stopped after any step (its process died, a call timed out)
//! stays `pending` in the giving bucket's journal, its units counted in
//! `in_transit`: whoever finds `in_transit > 0` runs steps 2 and 3 again
//! ([`Gate::recover_transfers`]): a borrower before it concludes that a
//! voucher is dry, and `seckill reconcile` before it restores one. Each
//! step is idempotent and the decision is made once, at the receiver, so
//! the units end up in exactly one bucket: none is created or lost by a
//! transfer interrupted at any point. (A failover that loses one bucket's
//! last writes but not the other's can: that is the replication loss of
//! every Redis write, which the processor's re-checks absorb and
//! `reconcile` repairs; see docs/CLUSTER.md.)
//!
//! Reconcile stops new transfers of a voucher for a bounded time while it
//! restores the buckets ([`Gate::freeze_transfers`]): a dry bucket does not
//! borrow meanwhile.

use std::time::Duration;

use redis::RedisResult;
use seckill_core::metrics::TransferOutcome;
use uuid::Uuid;

use crate::borrowers::Borrowed;
use crate::gate::unexpected;
use crate::layout::Layout;
use crate::Gate;

/// One bucket's figures a borrower looks at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BucketLevel {
    pub(crate) remaining: u64,
    pub(crate) in_transit: u64,
}

/// The receiving bucket's decision on a transfer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransferDecision {
    /// The units are the receiving bucket's.
    Credited,
    /// The receiving bucket was not in Redis: the units go back.
    Fenced,
}

impl TransferDecision {
    fn as_str(self) -> &'static str {
        match self {
            Self::Credited => "credited",
            Self::Fenced => "fenced",
        }
    }
}

/// One transfer of units from bucket `from` to bucket `to` of a voucher,
/// step by step; `Gate::borrow` runs all three, tests stop it between
/// them.
#[derive(Clone, Debug)]
pub struct Transfer<'gate> {
    gate: &'gate Gate,
    layout: &'gate Layout,
    /// Identifies the transfer in both journals.
    pub id: Uuid,
    pub from: u32,
    pub to: u32,
}

impl<'gate> Transfer<'gate> {
    /// A new transfer (a fresh id) from bucket `from` to bucket `to`.
    pub fn new(gate: &'gate Gate, layout: &'gate Layout, from: u32, to: u32) -> Self {
        Self { gate, layout, id: Uuid::now_v7(), from, to }
    }

    /// Step 1: takes up to `wanted` units from the giving bucket. Returns
    /// how many (0: it had none, or transfers are frozen).
    pub async fn debit(&self, wanted: u64) -> RedisResult<u64> {
        let keys = self.layout.keys(&self.gate.prefix, self.from);
        let (code, units): (String, String) = self
            .gate
            .timed(
                "transfer_debit",
                self.gate
                    .scripts
                    .transfer_debit
                    .key(&keys.voucher)
                    .key(&keys.transfers)
                    .arg(self.id.to_string())
                    .arg(self.to)
                    .arg(wanted.max(1))
                    .arg(self.gate.ended_sale_ttl_ms)
                    .invoke_async(&mut self.gate.redis.clone()),
            )
            .await?;
        match code.as_str() {
            "debited" | "repeated" => Ok(units.parse().unwrap_or_default()),
            // A paused or unopened bucket lends nothing (see the script).
            "dry" | "frozen" | "paused" | "not_open" | "unknown_voucher" => Ok(0),
            other => Err(unexpected("transfer_debit.lua returned an unknown code", other.to_owned())),
        }
    }

    /// Step 2: the receiving bucket takes the `units` in transit, or fences
    /// the transfer if it is not in Redis; the decision is recorded once.
    pub async fn settle(&self, units: u64) -> RedisResult<TransferDecision> {
        let keys = self.layout.keys(&self.gate.prefix, self.to);
        let decision: String = self
            .gate
            .timed(
                "transfer_settle",
                self.gate
                    .scripts
                    .transfer_settle
                    .key(&keys.voucher)
                    .key(&keys.transfers)
                    .arg(self.id.to_string())
                    .arg(self.from)
                    .arg(units)
                    .arg(self.gate.ended_sale_ttl_ms)
                    .invoke_async(&mut self.gate.redis.clone()),
            )
            .await?;
        match decision.as_str() {
            "credited" => Ok(TransferDecision::Credited),
            "fenced" => Ok(TransferDecision::Fenced),
            other => Err(unexpected("transfer_settle.lua returned an unknown decision", other.to_owned())),
        }
    }

    /// Step 3: closes the giving bucket's record as `decision` says; false
    /// if it was closed before.
    pub async fn finish(&self, decision: TransferDecision) -> RedisResult<bool> {
        let keys = self.layout.keys(&self.gate.prefix, self.from);
        let finished: String = self
            .gate
            .timed(
                "transfer_finish",
                self.gate
                    .scripts
                    .transfer_finish
                    .key(&keys.voucher)
                    .key(&keys.transfers)
                    .arg(self.id.to_string())
                    .arg(decision.as_str())
                    .invoke_async(&mut self.gate.redis.clone()),
            )
            .await?;
        match finished.as_str() {
            "done" | "returned" => Ok(true),
            "repeated" | "unknown" => Ok(false),
            other => Err(unexpected("transfer_finish.lua returned an unknown answer", other.to_owned())),
        }
    }
}

impl Gate {
    /// Borrows units for bucket `to` of `layout` after it was found without
    /// `quantity`, once this process's other borrowers of that bucket are
    /// done (see `crate::borrowers`). `seen` is the bucket's epoch read
    /// before it was tried: if a borrow for it finished since, its units may
    /// be there now (answer: try again), or it found the voucher dry
    /// (answer: dry, when it had fewer than `quantity`).
    pub(crate) async fn borrow_once(
        &self,
        layout: &Layout,
        to: u32,
        quantity: u64,
        seen: u64,
    ) -> RedisResult<Borrowed> {
        let turn = self.borrowers.turn(layout.voucher(), to).await;
        if let Some(found) = turn.found_since(seen) {
            return Ok(match found {
                Borrowed::Dry { available } if available < quantity => Borrowed::Dry { available },
                Borrowed::Dry { available } | Borrowed::Moved { available } => Borrowed::Moved { available },
            });
        }
        let borrowed = self.borrow(layout, to, quantity).await;
        turn.finish(borrowed.as_ref().ok().copied());
        borrowed
    }

    /// Moves units into bucket `to` of `layout` from the other buckets until
    /// it has `quantity` (when the voucher has them), richest first, each
    /// giving at least half of what it has, so a bucket that keeps running
    /// dry borrows rarely. Completes interrupted transfers first.
    pub(crate) async fn borrow(&self, layout: &Layout, to: u32, quantity: u64) -> RedisResult<Borrowed> {
        let mut levels = self.bucket_levels(layout).await?;
        let free = |levels: &[BucketLevel]| levels.iter().map(|level| level.remaining).sum::<u64>();
        // Units in transit are someone's transfer under way, or one stopped
        // half-way: completed here only when the voucher looks dry without
        // them, so that borrowers do not all finish each other's transfers.
        if free(&levels) < quantity && levels.iter().any(|level| level.in_transit > 0) {
            self.recover_transfers(layout).await?;
            levels = self.bucket_levels(layout).await?;
        }
        let available: u64 = levels.iter().map(|level| level.remaining.saturating_add(level.in_transit)).sum();
        if available < quantity && levels.iter().all(|level| level.in_transit == 0) {
            return Ok(Borrowed::Dry { available });
        }
        let own = levels.get(to as usize).map_or(0, |level| level.remaining);
        let needed = quantity.saturating_sub(own);
        let mut donors: Vec<(u32, u64)> = (0..layout.shards())
            .filter(|bucket| *bucket != to)
            .map(|bucket| (bucket, levels[bucket as usize].remaining))
            .filter(|(_, remaining)| *remaining > 0)
            .collect();
        donors.sort_by_key(|(_, remaining)| std::cmp::Reverse(*remaining));
        let mut moved = 0;
        for (from, remaining) in donors {
            if moved >= needed {
                break;
            }
            let wanted = (needed - moved).max(remaining.div_ceil(2));
            let transfer = Transfer::new(self, layout, from, to);
            let units = transfer.debit(wanted).await?;
            if units == 0 {
                continue;
            }
            let decision = transfer.settle(units).await?;
            transfer.finish(decision).await?;
            self.count_transfer(match decision {
                TransferDecision::Credited => TransferOutcome::Moved,
                TransferDecision::Fenced => TransferOutcome::Returned,
            });
            moved += units;
        }
        Ok(Borrowed::Moved { available })
    }

    /// Completes every transfer of `layout`'s voucher left pending (its
    /// starter stopped, or is still at it: completing twice changes
    /// nothing). Returns how many this call closed.
    pub async fn recover_transfers(&self, layout: &Layout) -> RedisResult<u64> {
        let journals: Vec<std::collections::HashMap<String, String>> = self
            .redis
            .query_each(
                layout
                    .all_keys(&self.prefix)
                    .iter()
                    .map(|keys| {
                        let mut command = redis::cmd("HGETALL");
                        command.arg(&keys.transfers);
                        command
                    })
                    .collect(),
            )
            .await?;
        let mut closed = 0;
        for (from, journal) in (0u32..).zip(journals) {
            for (id, record) in journal {
                let Some((to, units)) = pending_out(&record) else { continue };
                let Ok(id) = id.parse::<Uuid>() else { continue };
                let transfer = Transfer { gate: self, layout, id, from, to };
                let decision = transfer.settle(units).await?;
                if transfer.finish(decision).await? {
                    closed += 1;
                    self.count_transfer(TransferOutcome::Recovered);
                }
            }
        }
        Ok(closed)
    }

    /// Stops new transfers of `layout`'s voucher for `ttl` (a reconcile
    /// restoring it; the bound keeps a reconcile that died from stopping
    /// them for good), then completes those under way.
    pub async fn freeze_transfers(&self, layout: &Layout, ttl: Duration) -> RedisResult<()> {
        let (seconds, micros): (i64, i64) = redis::cmd("TIME").query_async(&mut self.redis.clone()).await?;
        let until = seconds * 1_000 + micros / 1_000 + i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX / 2);
        self.set_frozen(layout, until.to_string()).await?;
        self.recover_transfers(layout).await?;
        Ok(())
    }

    /// Lets `layout`'s voucher transfer again.
    pub async fn thaw_transfers(&self, layout: &Layout) -> RedisResult<()> {
        self.set_frozen(layout, String::new()).await
    }

    async fn set_frozen(&self, layout: &Layout, until: String) -> RedisResult<()> {
        for keys in layout.all_keys(&self.prefix) {
            let _: i64 = self
                .scripts
                .freeze_transfers
                .key(&keys.voucher)
                .arg(&until)
                .invoke_async(&mut self.redis.clone())
                .await?;
        }
        Ok(())
    }

    /// Every bucket's `remaining` and `in_transit`, bucket 0 first (a
    /// bucket not in Redis counts as empty).
    pub(crate) async fn bucket_levels(&self, layout: &Layout) -> RedisResult<Vec<BucketLevel>> {
        let commands = layout
            .all_keys(&self.prefix)
            .iter()
            .map(|keys| {
                let mut command = redis::cmd("HMGET");
                command.arg(&keys.voucher).arg(&["remaining", "in_transit"]);
                command
            })
            .collect();
        let levels: Vec<(Option<u64>, Option<i64>)> = self.redis.query_each(commands).await?;
        Ok(levels
            .into_iter()
            .map(|(remaining, in_transit)| BucketLevel {
                remaining: remaining.unwrap_or(0),
                in_transit: u64::try_from(in_transit.unwrap_or(0)).unwrap_or(0),
            })
            .collect())
    }

    fn count_transfer(&self, outcome: TransferOutcome) {
        if let Some(metrics) = &self.metrics {
            metrics.transfers.with_label_values(&[outcome.as_str()]).inc();
        }
    }
}

/// The receiving bucket and units of a journal record of a transfer out of
/// its bucket that is still pending.
fn pending_out(record: &str) -> Option<(u32, u64)> {
    let mut fields = record.split('|');
    let (kind, to, units, state) = (fields.next()?, fields.next()?, fields.next()?, fields.next()?);
    (kind == "out" && state == "pending").then_some(())?;
    Some((to.parse().ok()?, units.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_pending_transfers_out_are_recovered() {
        assert_eq!(pending_out("out|3|17|pending"), Some((3, 17)));
        assert_eq!(pending_out("out|3|17|done"), None);
        assert_eq!(pending_out("out|3|17|returned"), None);
        assert_eq!(pending_out("in|3|17"), None);
        assert_eq!(pending_out("fenced|3|17"), None);
        assert_eq!(pending_out("garbage"), None);
    }
}
