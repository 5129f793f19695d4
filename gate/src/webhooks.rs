//! Provider callbacks already handled: one marker per provider event id,
//! so a callback the provider delivers again (it retries until it gets a
//! `2xx`, and may send one twice) is answered at once and adds nothing to
//! the log. A marker is written only after the callback's record is in the
//! log: a crash between the two leaves the callback unmarked, and the
//! provider's retry publishes it again (the processor decides a payment
//! once per payment id, so the second record changes nothing).

use std::time::Duration;

use crate::keys::webhook_key;
use crate::Gate;

/// How long a handled callback is remembered: longer than a provider keeps
/// retrying one (Stripe: up to three days).
pub const WEBHOOK_MEMORY: Duration = Duration::from_secs(4 * 24 * 3600);

impl Gate {
    /// Whether the callback `event_id` was handled before.
    pub async fn webhook_handled(&self, event_id: &str) -> redis::RedisResult<bool> {
        let mut redis = self.redis.clone();
        redis::cmd("EXISTS").arg(webhook_key(&self.prefix, event_id)).query_async(&mut redis).await
    }

    /// Remembers that the callback `event_id` is in the log.
    pub async fn mark_webhook_handled(&self, event_id: &str) -> redis::RedisResult<()> {
        let mut redis = self.redis.clone();
        redis::cmd("SET")
            .arg(webhook_key(&self.prefix, event_id))
            .arg("1")
            .arg("EX")
            .arg(WEBHOOK_MEMORY.as_secs())
            .query_async(&mut redis)
            .await
    }
}
