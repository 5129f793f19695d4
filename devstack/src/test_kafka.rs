//! The test run's Kafka broker, shared by every test that does not stop,
//! freeze or kill it: one JVM start per run instead of one per test. Tests
//! keep apart by name (topic prefix, consumer groups), which Kafka isolates.
//!
//! `scripts/test` starts it and names it in [`TEST_KAFKA_VAR`]. Without the
//! variable (`cargo test` alone) the first test that needs it starts one
//! for its process, with a watchdog that stops it and removes its directory
//! when the process exits, however it exits: a test process never drops its
//! statics, so nothing else would.

use std::sync::OnceLock;

use crate::kafka::{Kafka, KafkaSettings};
use crate::test_dir::test_path;
use crate::watchdog::Watchdog;
use crate::DevstackError;

/// `127.0.0.1:PORT`: the broker `scripts/test` started for the run.
pub const TEST_KAFKA_VAR: &str = "SECKILL_TEST_KAFKA";

/// The bootstrap servers of the test run's broker: named by
/// [`TEST_KAFKA_VAR`], or started for this process on first use.
pub fn test_kafka() -> Result<&'static str, DevstackError> {
    static SHARED: OnceLock<Result<Shared, String>> = OnceLock::new();
    SHARED
        .get_or_init(|| Shared::connect_or_start().map_err(|error| error.to_string()))
        .as_ref()
        .map(|shared| shared.brokers.as_str())
        .map_err(|error| DevstackError::Setup(format!("the tests' Kafka broker: {error}")))
}

/// The shared broker, and what keeps one started here alive until exit.
#[derive(Debug)]
struct Shared {
    brokers: String,
    /// Never stopped by us; the watchdog stops it when the process exits.
    _own: Option<(Kafka, Watchdog)>,
}

impl Shared {
    fn connect_or_start() -> Result<Self, DevstackError> {
        if let Some(brokers) = std::env::var(TEST_KAFKA_VAR).ok().filter(|brokers| !brokers.is_empty()) {
            return Ok(Self { brokers, _own: None });
        }
        let dir = test_path("kafka");
        let kafka = Kafka::start(&dir, KafkaSettings::SINGLE)?;
        // SIGKILL: the data is thrown away, nothing to shut down cleanly for.
        let watchdog = Watchdog::spawn("Kafka", "KILL", &kafka.pids(), dir)?;
        tracing::info!(brokers = %kafka.brokers(), "Started the tests' Kafka broker.");
        Ok(Self { brokers: kafka.brokers(), _own: Some((kafka, watchdog)) })
    }
}
