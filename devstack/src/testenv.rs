//! What every integration test starts with: its own Redis in a fresh
//! directory, the run's Kafka broker, and names nobody else uses.

use crate::{test_kafka, unique_namespace, DevstackError, Redis, RedisPersistence, TempDir};

/// A Redis owned by one test (stopped when dropped) and the run's broker.
#[derive(Debug)]
pub struct TestInfra {
    pub redis: Redis,
    /// The bootstrap servers of the test run's broker ([`test_kafka`]),
    /// shared with other tests: a test that stops, freezes or kills its
    /// broker starts a [`Kafka`](crate::Kafka) of its own instead.
    pub brokers: String,
    /// Unique per test: topic prefix, key prefix, group suffix.
    pub namespace: String,
    /// Holds the servers' data; removed when dropped.
    pub dir: TempDir,
}

impl TestInfra {
    /// Starts a memory-only Redis on a free port, and names the run's
    /// broker (started on first use when `scripts/test` did not).
    pub fn start() -> Result<Self, DevstackError> {
        let dir = TempDir::new().map_err(|source| DevstackError::Spawn { what: "test dir".into(), source })?;
        let namespace = unique_namespace("t");
        let brokers = test_kafka()?.to_owned();
        let redis = Redis::start(&dir.path().join("redis"), 0, RedisPersistence::None)?;
        Ok(Self { redis, brokers, namespace, dir })
    }
}
