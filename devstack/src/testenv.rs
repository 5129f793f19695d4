//! What every integration test starts with: its own Redis and broker in a
//! fresh directory, and names nobody else uses.

use std::path::Path;

use crate::{Broker, BrokerStorage, DevstackError, Redis, RedisPersistence, TestDatabase};

/// A Redis and a broker owned by one test; stopped when dropped.
#[derive(Debug)]
pub struct TestInfra {
    pub redis: Redis,
    pub broker: Broker,
    /// The broker's log, on the test run's PostgreSQL server; dropped after
    /// the broker stopped.
    pub database: TestDatabase,
    /// Unique per test: topic prefix, key prefix, group suffix, database.
    pub namespace: String,
    /// Holds the servers' data; removed when dropped.
    pub dir: TempDir,
}

/// A temporary directory under `SECKILL_TEST_DIR` (set by `scripts/test`,
/// which cleans up after killed runs) or the system temp dir.
#[derive(Debug)]
pub struct TempDir(std::path::PathBuf);

impl TempDir {
    pub fn new() -> std::io::Result<Self> {
        let base =
            std::env::var_os("SECKILL_TEST_DIR").map(std::path::PathBuf::from).unwrap_or_else(std::env::temp_dir);
        let dir = base.join(format!("t-{}", uuid::Uuid::now_v7().simple()));
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
    /// Starts a memory-only Redis and a broker on free ports, the broker's
    /// log in a database of its own on the test run's PostgreSQL server.
    pub fn start() -> Result<Self, DevstackError> {
        let dir = TempDir::new().map_err(|source| DevstackError::Spawn { what: "test dir".into(), source })?;
        let namespace = unique_namespace("t");
        let redis = Redis::start(&dir.path().join("redis"), 0, RedisPersistence::None)?;
        let database = TestDatabase::create(&namespace)?;
        let broker = Broker::start(&dir.path().join("broker"), 0, BrokerStorage::Postgres(database.url()))?;
        Ok(Self { redis, broker, database, namespace, dir })
    }
}
