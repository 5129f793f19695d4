//! The ingress's configuration.

use seckill_core::config::{ensure, ConfigError, HttpConfig, KafkaConfig, RedisConfig, Secret, Validate};
use serde::{Deserialize, Serialize};

/// Everything the ingress needs; see `config/ingress.toml` for an example.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct IngressConfig {
    pub http: HttpConfig,
    pub redis: RedisConfig,
    pub kafka: KafkaConfig,
    /// Bearer token required on admin routes. Unset: admin routes are open,
    /// acceptable only on a developer's machine (a warning is logged).
    pub admin_token: Option<Secret>,
    /// Largest request body accepted, in bytes.
    pub max_body_bytes: u64,
    /// Base URL of the projector's query API, used for status queries when
    /// the view is not in this process.
    pub view_url: String,
    /// How long in-flight requests may take to finish at shutdown.
    pub drain_ms: u64,
    /// How long a sell-out seen in Redis is answered from memory (0: never):
    /// also the longest a returned unit can go unnoticed.
    pub sold_out_memo_ms: u64,
    /// Most admitted orders the Redis outbox may hold before new orders are
    /// refused with `503` (the log is down or far behind).
    pub max_outbox_entries: u64,
    /// How long an outbox entry may stay unacknowledged by the relay that
    /// read it before another relay publishes it (its process died).
    pub outbox_claim_idle_ms: u64,
}

impl Default for IngressConfig {
    fn default() -> Self {
        Self {
            http: HttpConfig::local(8080),
            redis: RedisConfig::default(),
            kafka: KafkaConfig::default(),
            admin_token: None,
            max_body_bytes: 16 * 1024,
            view_url: "http://127.0.0.1:8082".to_owned(),
            drain_ms: 10_000,
            sold_out_memo_ms: 500,
            max_outbox_entries: 100_000,
            outbox_claim_idle_ms: 5_000,
        }
    }
}

impl Validate for IngressConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        self.redis.validate()?;
        self.kafka.validate()?;
        ensure((256..=1024 * 1024).contains(&self.max_body_bytes), "max_body_bytes", "must be 256 to 1048576")?;
        ensure(
            self.view_url.starts_with("http://") || self.view_url.starts_with("https://"),
            "view_url",
            "must be an http(s) URL",
        )?;
        ensure(self.drain_ms <= 120_000, "drain_ms", "must be at most 120000")?;
        ensure(self.sold_out_memo_ms <= 1_000, "sold_out_memo_ms", "must be at most 1000")?;
        ensure((1..=10_000_000).contains(&self.max_outbox_entries), "max_outbox_entries", "must be 1 to 10000000")?;
        ensure((100..=600_000).contains(&self.outbox_claim_idle_ms), "outbox_claim_idle_ms", "must be 100 to 600000")?;
        if let Some(token) = &self.admin_token {
            ensure(token.expose().len() >= 16, "admin_token", "must be at least 16 characters")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    #[test]
    fn the_example_config_is_valid_and_matches_the_defaults() {
        let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../config/ingress.toml");
        let loaded: IngressConfig = seckill_core::config::load(Some(&example)).expect("the example loads");
        assert_eq!(loaded, IngressConfig::default());
    }
}
