//! Rebuilding a waiting room Redis lost, from the log (`seckill reconcile`,
//! after [`Gate::restore`] rebuilt the voucher itself).
//!
//! A beacon room lost before its reveal (waiting for its round, or hashing
//! and keying its pre-queue) comes back with every place the log holds: the
//! pre-queue unkeyed, the joins after the start by their seq. It waits for
//! its round again, and keys the whole pre-queue afresh once the round is
//! in, so its places are those the round determines however far keying had
//! gone (`lua/queue_restore.lua`). Nothing was served before the reveal,
//! so nobody can be served twice.
//!
//! Any other room (no beacon: its seed was Redis's secret; or revealed
//! already) is opened new and empty, as at the voucher's creation.

use redis::RedisResult;
use seckill_core::queue::{self, QueueSettings};
use seckill_core::VoucherId;

use crate::gate::unexpected;
use crate::room_history::RoomHistory;
use crate::Gate;

/// What became of a queue-mode voucher's waiting room.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RoomRestored {
    /// Redis still had it: untouched.
    Kept,
    /// Opened new and empty (see the module header for which rooms).
    Opened,
    /// A beacon room rebuilt from the log before its reveal, waiting for
    /// its round again: `pre_queue` places unkeyed, `after_start` by seq.
    Rebuilt { pre_queue: u64, after_start: u64 },
}

impl Gate {
    /// Brings `voucher`'s waiting room back after its voucher was restored.
    pub(crate) async fn restore_room(
        &self,
        voucher: VoucherId,
        settings: &QueueSettings,
        history: &RoomHistory,
    ) -> RedisResult<RoomRestored> {
        let places = history.pre_queue.len() + history.after_start.len();
        let plan = match &settings.beacon {
            Some(plan) if !history.revealed && places > 0 => plan,
            _ => {
                let existed = self.room(voucher).await?.is_some();
                self.open_room_with(voucher, settings).await?;
                return Ok(if existed { RoomRestored::Kept } else { RoomRestored::Opened });
            }
        };
        let keys = self.keys(voucher);
        let chain = serde_json::to_string(&plan.chain).map_err(|e| unexpected("a beacon chain", e.to_string()))?;
        let mut call = self.scripts.queue_restore.key(&keys.voucher);
        call.key(&keys.room)
            .key(&keys.line)
            .key(&keys.places)
            .key(&keys.seen)
            .arg(queue::new_seed())
            .arg(queue::new_seed())
            .arg(settings.opens_at.timestamp_millis())
            .arg(settings.factor_percent)
            .arg(settings.entry_rate)
            .arg(u64::from(settings.idle_seconds) * 1000)
            .arg(u64::from(settings.token_seconds) * 1000)
            .arg(self.ended_sale_ttl_ms)
            .arg(plan.round)
            .arg(chain)
            .arg(history.pre_queue.len());
        for user in &history.pre_queue {
            call.arg(user.as_str());
        }
        for (seq, user) in &history.after_start {
            call.arg(*seq).arg(user.as_str());
        }
        let outcome: String = self.timed("queue_restore", call.invoke_async(&mut self.redis.clone())).await?;
        match outcome.as_str() {
            "rebuilt" => {
                self.list_room(voucher).await?;
                Ok(RoomRestored::Rebuilt {
                    pre_queue: history.pre_queue.len() as u64,
                    after_start: history.after_start.len() as u64,
                })
            }
            "kept" => Ok(RoomRestored::Kept),
            other => Err(unexpected("queue_restore.lua answered", other.to_owned())),
        }
    }
}
