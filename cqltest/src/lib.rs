//! CQL test helpers on the test run's Apache Cassandra 5.0.
//!
//! One Cassandra node serves every CQL test of a run (a JVM per test would
//! not fit two cores): the one `scripts/test` started, or one started for the
//! test process on first use (see `seckill_devstack::test_cassandra`). Each
//! test works in a keyspace of its own. The scylla driver speaks protocol
//! v4 to it directly; [`FaultProxy`] goes between the two when a test needs
//! the server to fail on purpose.
//!
//! ```no_run
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! let cql = seckill_cqltest::TestCql::start().await?;
//! let session = cql.session().await?;
//! let keyspace = cql.keyspace();
//! session
//!     .query_unpaged(
//!         format!("CREATE KEYSPACE {keyspace} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}"),
//!         (),
//!     )
//!     .await?;
//! # Ok(())
//! # }
//! ```

mod error;
mod fault_proxy;

use std::net::SocketAddr;
use std::time::Duration;

use scylla::client::session::Session;
use scylla::client::session_builder::SessionBuilder;

pub use error::CqlTestError;
pub use fault_proxy::FaultProxy;

/// One test's handle on the run's Cassandra node, with a keyspace name of
/// its own. The node outlives it (it is the run's).
#[derive(Debug, Clone)]
pub struct TestCql {
    /// The node's native-transport address.
    addr: SocketAddr,
    /// Unique to this handle; created by whoever uses it first.
    keyspace: String,
}

impl TestCql {
    /// The run's node, started first if this process is the first to need
    /// it (seconds; on a blocking thread, so other tests' tasks keep running).
    pub async fn start() -> Result<Self, CqlTestError> {
        let addr = tokio::task::spawn_blocking(seckill_devstack::test_cassandra)
            .await
            .map_err(|join| CqlTestError::Interrupted(join.to_string()))??;
        Ok(Self { addr, keyspace: unique_keyspace() })
    }

    /// The node's CQL address (for a [`FaultProxy`] in front of it).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The contact point for the scylla driver: `127.0.0.1:PORT`.
    pub fn nodes(&self) -> String {
        self.addr.to_string()
    }

    /// This handle's keyspace name (`ks_` and 32 hex digits), not yet created.
    pub fn keyspace(&self) -> &str {
        &self.keyspace
    }

    /// A session builder for the node (see [`session_builder`]); add a
    /// keyspace or profiles before `build`.
    pub fn session_builder(&self) -> SessionBuilder {
        session_builder(&self.nodes())
    }

    /// Opens a session on the node.
    pub async fn session(&self) -> Result<Session, CqlTestError> {
        Ok(self.session_builder().build().await?)
    }
}

/// A scylla session builder for the node at `node` (`host:port`): the
/// driver's defaults, with a generous connection timeout for a machine busy
/// with builds.
pub fn session_builder(node: &str) -> SessionBuilder {
    SessionBuilder::new().known_node(node).connection_timeout(Duration::from_secs(15))
}

/// A keyspace name no other test uses (`ks_` and 32 hex digits).
pub fn unique_keyspace() -> String {
    format!("ks_{}", uuid::Uuid::now_v7().simple())
}
