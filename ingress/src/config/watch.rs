//! `[watch]`: which consumer groups the ingress watches for the alert
//! rules, and how often.

use seckill_core::config::{ensure, ConfigError};
use serde::{Deserialize, Serialize};

/// The pipeline's consumer groups, watched from the broker's side
/// (`seckill_consumer_group_lag`): a processor that died reports nothing
/// of itself, so the ingress, which always runs, measures for it. An empty
/// name is not watched.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WatchConfig {
    /// The processor's consumer group (`consumer.group` of its config); it
    /// reads the sales topic.
    pub processor_group: String,
    /// The projector's consumer group; it reads the sales and orders topics.
    pub projector_group: String,
    /// How often the groups' positions are asked of the broker.
    pub interval_ms: u64,
}

impl Default for WatchConfig {
    fn default() -> Self {
        Self {
            processor_group: "seckill-processor".to_owned(),
            projector_group: "seckill-projector".to_owned(),
            interval_ms: 5_000,
        }
    }
}

impl WatchConfig {
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        ensure((500..=300_000).contains(&self.interval_ms), "watch.interval_ms", "must be 500 to 300000")
    }
}
