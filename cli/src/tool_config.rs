//! What the operator and analyst commands read from a configuration file:
//! where the log and the admission gate are.
//!
//! They take the ingress's file (`config/ingress.toml`) and environment,
//! read its `[kafka]` and `[redis]` sections (and `[draw]`, whose key only
//! `seckill reconcile` uses) and ignore the rest, so an analyst replaying
//! the log needs none of the ingress's secrets.

use seckill_core::config::{ConfigError, DrawConfig, KafkaConfig, RedisConfig, Validate};
use serde::{Deserialize, Serialize};

/// The `[kafka]`, `[redis]` and `[draw]` sections of a service
/// configuration.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct ToolConfig {
    pub(crate) kafka: KafkaConfig,
    pub(crate) redis: RedisConfig,
    /// The key that opens draws' sealed seeds (`seckill reconcile` only).
    pub(crate) draw: DrawConfig,
}

impl Validate for ToolConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        self.kafka.validate()?;
        self.redis.validate()?;
        self.draw.validate()
    }
}
