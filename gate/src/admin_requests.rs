//! What an admin's request with an `Idempotency-Key` did, remembered so a
//! retry completes that same change and answers the same result.
//!
//! Two keys per admin key, each a string with the same lifetime, under one
//! hash tag of their own (`{admin:<key in hex>}`): `:request`, the change
//! the first request prepared (claimed with `SET NX`, so concurrent retries
//! agree on one), and `:answer`, the first answer given (`SET NX` too, so
//! every retry answers the same). The values are opaque here: the ingress
//! decides what they hold.

use std::time::Duration;

use crate::keys::check_idempotency_key;
use crate::Gate;

/// An admin's `Idempotency-Key`. The admin token is one identity, so its
/// keys are one scope, apart from every user's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AdminRetryKey {
    request: String,
    answer: String,
}

impl AdminRetryKey {
    /// Validates `key` (1 to 128 visible ASCII characters) and names its
    /// Redis keys under `prefix`.
    pub fn new(prefix: &str, key: &str) -> Result<Self, String> {
        check_idempotency_key(key)?;
        // Hex: braces in the key must not become the hash tag's end.
        let hex: String = key.bytes().map(|byte| format!("{byte:02x}")).collect();
        let base = format!("{prefix}:{{admin:{hex}}}");
        Ok(Self { request: format!("{base}:request"), answer: format!("{base}:answer") })
    }
}

/// What was remembered under a key: the change the first request prepared
/// and, once one was given, its answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AdminRequest {
    pub change: Vec<u8>,
    pub answer: Option<Vec<u8>>,
}

impl Gate {
    /// The request remembered under `key`, if any.
    pub async fn admin_request(&self, key: &AdminRetryKey) -> redis::RedisResult<Option<AdminRequest>> {
        let (change, answer): (Option<Vec<u8>>, Option<Vec<u8>>) = redis::pipe()
            .cmd("GET")
            .arg(&key.request)
            .cmd("GET")
            .arg(&key.answer)
            .query_async(&mut self.redis.clone())
            .await?;
        Ok(change.map(|change| AdminRequest { change, answer }))
    }

    /// Remembers `change` under `key` for `ttl`, unless a request claimed
    /// the key first: None when this one did, else what the first holds.
    pub async fn claim_admin_request(
        &self,
        key: &AdminRetryKey,
        change: &[u8],
        ttl: Duration,
    ) -> redis::RedisResult<Option<AdminRequest>> {
        // A claim that expires between the SET and the GET is claimed anew.
        for _ in 0..3 {
            let claimed: Option<String> = redis::cmd("SET")
                .arg(&key.request)
                .arg(change)
                .arg("NX")
                .arg("PX")
                .arg(millis(ttl))
                .query_async(&mut self.redis.clone())
                .await?;
            if claimed.is_some() {
                return Ok(None);
            }
            if let Some(first) = self.admin_request(key).await? {
                return Ok(Some(first));
            }
        }
        Err(redis::RedisError::from((redis::ErrorKind::Client, "an admin request key kept expiring while claimed")))
    }

    /// Keeps `answer` as the answer under `key` for `ttl`, unless one was
    /// kept first; returns the answer kept, which every retry gives.
    pub async fn answer_admin_request(
        &self,
        key: &AdminRetryKey,
        answer: &[u8],
        ttl: Duration,
    ) -> redis::RedisResult<Vec<u8>> {
        let (_, kept): (Option<String>, Option<Vec<u8>>) = redis::pipe()
            .cmd("SET")
            .arg(&key.answer)
            .arg(answer)
            .arg("NX")
            .arg("PX")
            .arg(millis(ttl))
            .cmd("GET")
            .arg(&key.answer)
            .query_async(&mut self.redis.clone())
            .await?;
        Ok(kept.unwrap_or_else(|| answer.to_vec()))
    }
}

fn millis(ttl: Duration) -> u64 {
    u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1)
}
