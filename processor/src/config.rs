//! The processor's configuration.

use std::path::PathBuf;

use seckill_core::config::{ensure, ConfigError, HttpConfig, KafkaConfig, StoreConfig, Validate};
use serde::{Deserialize, Serialize};

/// Everything the processor needs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ProcessorConfig {
    /// Health, metrics and the stock inspection route.
    pub http: HttpConfig,
    pub kafka: KafkaConfig,
    /// Where the persistent stock lives.
    pub store: StoreConfig,
    /// Consumer group of the processor instances.
    pub group: String,
    /// Most records decided per batch (one store transaction each).
    pub max_batch: usize,
    /// How long a batch waits to fill once it has a record.
    pub max_wait_ms: u64,
}

impl Default for ProcessorConfig {
    fn default() -> Self {
        Self {
            http: HttpConfig::local(8081),
            kafka: KafkaConfig::default(),
            store: StoreConfig::Embedded { path: PathBuf::from(".seckill/processor.redb") },
            group: "seckill-processor".to_owned(),
            max_batch: 500,
            max_wait_ms: 5,
        }
    }
}

impl Validate for ProcessorConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        self.kafka.validate()?;
        self.store.validate()?;
        ensure(!self.group.trim().is_empty(), "group", "must not be empty")?;
        ensure((1..=10_000).contains(&self.max_batch), "max_batch", "must be 1 to 10000")?;
        ensure(self.max_wait_ms <= 1_000, "max_wait_ms", "must be at most 1000")
    }
}
