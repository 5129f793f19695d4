//! The projector's configuration.

use seckill_core::config::{ConfigError, ConsumerConfig, HttpConfig, KafkaConfig, StoreConfig, Validate};
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
    /// Group and batch bounds.
    pub consumer: ConsumerConfig,
}

impl Default for ProjectorConfig {
    fn default() -> Self {
        Self {
            http: HttpConfig::local(8082),
            kafka: KafkaConfig::default(),
            store: StoreConfig::embedded(".seckill/view.redb"),
            consumer: ConsumerConfig::new("seckill-projector"),
        }
    }
}

impl Validate for ProjectorConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        self.http.validate()?;
        self.kafka.validate()?;
        self.store.validate()?;
        self.consumer.validate()
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    #[test]
    fn the_example_config_is_valid_and_matches_the_defaults() {
        let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../config/projector.toml");
        let loaded: ProjectorConfig = seckill_core::config::load(Some(&example)).expect("the example loads");
        assert_eq!(loaded, ProjectorConfig::default());
    }
}
