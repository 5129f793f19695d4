//! The test run's Apache Cassandra node, shared by every CQL test of the
//! run with a keyspace each: a JVM that takes seconds to start, once per run
//! instead of once per test.
//!
//! `scripts/test` starts it and names it in [`TEST_CASSANDRA_VAR`]. Without
//! the variable (`cargo test` alone) the first test that needs it starts one
//! for its process, with a watchdog that kills it and removes its directory
//! when the process exits, however it exits: a test process never drops its
//! statics, so nothing else would.

use std::net::{SocketAddr, TcpStream};
use std::sync::OnceLock;
use std::time::Duration;

use crate::cassandra::Cassandra;
use crate::test_dir::test_path;
use crate::watchdog::Watchdog;
use crate::DevstackError;

/// `127.0.0.1:PORT`: the CQL address of the node `scripts/test` started.
pub const TEST_CASSANDRA_VAR: &str = "SECKILL_TEST_CASSANDRA";

/// The CQL address of the test run's node: named by [`TEST_CASSANDRA_VAR`],
/// or started for this process on first use (blocking: seconds).
pub fn test_cassandra() -> Result<SocketAddr, DevstackError> {
    static SHARED: OnceLock<Result<Shared, String>> = OnceLock::new();
    SHARED
        .get_or_init(|| Shared::connect_or_start().map_err(|error| error.to_string()))
        .as_ref()
        .map(|shared| shared.addr)
        .map_err(|error| DevstackError::Setup(format!("the tests' Cassandra node: {error}")))
}

/// The shared node, and what keeps one started here alive until exit.
#[derive(Debug)]
struct Shared {
    addr: SocketAddr,
    /// Never stopped by us; the watchdog kills it when the process exits.
    _own: Option<(Cassandra, Watchdog)>,
}

impl Shared {
    fn connect_or_start() -> Result<Self, DevstackError> {
        if let Some(named) = std::env::var(TEST_CASSANDRA_VAR).ok().filter(|named| !named.is_empty()) {
            let addr: SocketAddr = named
                .parse()
                .map_err(|error| DevstackError::Setup(format!("{TEST_CASSANDRA_VAR}={named}: {error}")))?;
            TcpStream::connect_timeout(&addr, Duration::from_secs(5)).map_err(|error| {
                DevstackError::Setup(format!("{TEST_CASSANDRA_VAR}={named} accepts no connection: {error}"))
            })?;
            return Ok(Self { addr, _own: None });
        }
        let dir = test_path("cassandra");
        std::fs::create_dir_all(&dir).map_err(|source| DevstackError::Spawn { what: "cassandra".into(), source })?;
        let cassandra = Cassandra::start(&dir)?;
        // A throwaway node: nothing to flush, so no graceful stop.
        let watchdog = Watchdog::spawn("Cassandra", "KILL", &[cassandra.pid().unwrap_or_default()], dir)?;
        tracing::info!(addr = %cassandra.addr(), "Started the tests' Cassandra node.");
        Ok(Self { addr: cassandra.addr(), _own: Some((cassandra, watchdog)) })
    }
}
