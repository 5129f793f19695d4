//! The key every ingress signs and checks challenges with
//! (`seckill_core::challenge`): drawn once by whichever process asks first
//! and kept in Redis, so there is nothing to distribute or configure, and a
//! challenge issued by one ingress is checked by any other.

use seckill_core::queue;

use crate::Gate;

impl Gate {
    /// The shared challenge key (created now if there is none yet).
    pub async fn challenge_key(&self) -> redis::RedisResult<Vec<u8>> {
        let key = format!("{}:challenge_key", self.prefix);
        redis::cmd("SET").arg(&key).arg(queue::new_seed()).arg("NX").query_async::<()>(&mut self.redis.clone()).await?;
        let current: Vec<u8> = redis::cmd("GET").arg(&key).query_async(&mut self.redis.clone()).await?;
        Ok(current)
    }
}
