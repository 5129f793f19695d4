//! The projector's configuration.

use std::path::PathBuf;

use seckill_core::config::{ensure, ConfigError, HttpConfig, KafkaConfig, StoreConfig, Validate};
use serde::{Deserialize, Serialize};

/// Everything the projector needs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ProjectorConfig {
    /// The query API, health and metrics.
    pub http: HttpConfig,
    pub kafka: KafkaConfig,
    /// Where the view lives.
    pub store: StoreConfig,
    /// Consumer group of the projector instances.
    pub group: String,
    /// Most records applied per batch (one store transaction each).
    pub max_batch: usize,
    /// How long a batch waits to fill once it has a record.
    pub max_wait_ms: u64,
}

impl Default for ProjectorConfig {
    fn default() -> Self {
        Self {
            http: HttpConfig::local(8082),
            kafka: KafkaConfig::default(),
            store: StoreConfig::Embedded { path: PathBuf::from(".seckill/view.redb") },
            group: "seckill-projector".to_owned(),
            max_batch: 1_000,
            max_wait_ms: 5,
        }
    }
}

impl Validate for ProjectorConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        self.kafka.validate()?;
        self.store.validate()?;
        ensure(!self.group.trim().is_empty(), "group", "must not be empty")?;
        ensure((1..=10_000).contains(&self.max_batch), "max_batch", "must be 1 to 10000")?;
        ensure(self.max_wait_ms <= 1_000, "max_wait_ms", "must be at most 1000")
    }
}
