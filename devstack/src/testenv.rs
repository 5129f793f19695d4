//! What every integration test starts with: its own Redis in a fresh
//! directory, the run's Kafka broker, and names nobody else uses.

use std::path::Path;

use crate::{test_kafka, DevstackError, Redis, RedisPersistence};

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

/// A fresh path `NAME-<uuid>` under `SECKILL_TEST_DIR` (set by
/// `scripts/test`, which removes it and stops what runs in it) or the
/// system temp dir; not created.
pub(crate) fn test_path(name: &str) -> std::path::PathBuf {
    let base = std::env::var_os("SECKILL_TEST_DIR").map(std::path::PathBuf::from).unwrap_or_else(std::env::temp_dir);
    base.join(format!("{name}-{}", uuid::Uuid::now_v7().simple()))
}

/// A temporary directory under `SECKILL_TEST_DIR` (set by `scripts/test`,
/// which cleans up after killed runs) or the system temp dir.
#[derive(Debug)]
pub struct TempDir(std::path::PathBuf);

impl TempDir {
    pub fn new() -> std::io::Result<Self> {
        let dir = test_path("t");
        std::fs::create_dir_all(&dir)?;
        Ok(Self(dir))
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A namespace no other test uses: `prefix` and 12 hex digits, usable as a
/// topic prefix, key prefix and database name.
pub fn unique_namespace(prefix: &str) -> String {
    format!("{prefix}{}", &uuid::Uuid::now_v7().simple().to_string()[20..])
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
