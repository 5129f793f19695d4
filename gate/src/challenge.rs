//! The key every ingress signs and checks challenges with
//! (`seckill_core::challenge`): drawn once by whichever process asks first
//! and kept in Redis, so there is nothing to distribute or configure, and a
//! challenge issued by one ingress is checked by any other. And the rate
//! of challenges every ingress issues for a voucher, which the difficulty
//! follows.

use seckill_core::{queue, VoucherId};

use crate::gate::unexpected;
use crate::Gate;

/// Proofs of work spent for one voucher through every ingress, per second
/// of the Redis clock (`lua/challenge_rate.lua`), and that clock.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ChallengeRate {
    /// The previous whole second.
    pub last_second: u64,
    /// The current second so far.
    pub this_second: u64,
    /// The Redis clock when counted (Unix ms): the one clock a challenge's
    /// expiry is dated and judged by.
    pub now_ms: i64,
}

impl Gate {
    /// The shared challenge key (created now if there is none yet).
    pub async fn challenge_key(&self) -> redis::RedisResult<Vec<u8>> {
        let key = format!("{}:challenge_key", self.prefix);
        redis::cmd("SET").arg(&key).arg(queue::new_seed()).arg("NX").query_async::<()>(&mut self.redis.clone()).await?;
        let current: Vec<u8> = redis::cmd("GET").arg(&key).query_async(&mut self.redis.clone()).await?;
        Ok(current)
    }

    /// Adds `spent` (the proofs this caller saw spent for `voucher` since
    /// its last call) to the count every ingress shares, and reads it back.
    pub async fn count_challenges(&self, voucher: VoucherId, spent: u64) -> redis::RedisResult<ChallengeRate> {
        let mut invocation = self.scripts.challenge_rate.prepare_invoke();
        invocation.key(self.keys(voucher).challenge_rate).arg(spent);
        let reply: Vec<String> = self.timed("challenge_rate", invocation.invoke_async(&mut self.redis.clone())).await?;
        let count =
            |text: &String| text.parse::<u64>().map_err(|_| unexpected("challenge_rate.lua answered", text.clone()));
        match reply.as_slice() {
            [last, this, now] => Ok(ChallengeRate {
                last_second: count(last)?,
                this_second: count(this)?,
                now_ms: now.parse().map_err(|_| unexpected("challenge_rate.lua answered", now.clone()))?,
            }),
            _ => Err(unexpected("challenge_rate.lua answered", format!("{reply:?}"))),
        }
    }
}
