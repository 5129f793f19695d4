//! The processor's configuration.

use seckill_core::config::{
    ensure, ConfigError, ConsumerConfig, HttpConfig, KafkaConfig, PaymentsConfig, RedisConfig, StoreConfig, Validate,
};
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
    /// Group and batch bounds.
    pub consumer: ConsumerConfig,
    /// The admission gate, where failed and cancelled orders give their
    /// units back.
    pub redis: RedisConfig,
    /// How often expired holds (orders not paid within the voucher's
    /// `payment_seconds`) are looked for, in milliseconds.
    pub expiry_sweep_ms: u64,
    /// The payment provider: asked about an order before it is closed as
    /// unpaid, and where refunds go (off unless `base_url` is set).
    pub payments: PaymentsConfig,
}

impl Default for ProcessorConfig {
    fn default() -> Self {
        Self {
            http: HttpConfig::local(8081),
            kafka: KafkaConfig::default(),
            store: StoreConfig::embedded(".seckill/processor.redb"),
            consumer: ConsumerConfig::new("seckill-processor"),
            redis: RedisConfig::default(),
            expiry_sweep_ms: 1_000,
            payments: PaymentsConfig::default(),
        }
    }
}

impl Validate for ProcessorConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        self.http.validate()?;
        self.kafka.validate()?;
        self.store.validate()?;
        self.redis.validate()?;
        self.consumer.validate()?;
        self.payments.validate()?;
        ensure((10..=60_000).contains(&self.expiry_sweep_ms), "expiry_sweep_ms", "must be 10 to 60000")
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    #[test]
    fn the_example_config_is_valid_and_matches_the_defaults() {
        let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../config/processor.toml");
        let loaded: ProcessorConfig = seckill_core::config::load(Some(&example)).expect("the example loads");
        assert_eq!(loaded, ProcessorConfig::default());
    }
}
