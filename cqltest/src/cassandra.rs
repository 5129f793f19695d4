//! One Apache Cassandra 2.1 node for a test, on free ports of 127.0.0.1 with
//! a fresh data directory, killed (with its whole process group) when
//! dropped.
//!
//! Started through the distribution's `bin/cassandra -f`, which runs the
//! `cassandra-env.sh` that `scripts/setup` made fit for Java 17; everything
//! per node (yaml, ports, heap, `--add-opens`) comes from `config.rs`.

mod config;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use seckill_devstack::{free_port, Server};

use crate::client::Client;
use crate::home::cassandra_home;
use crate::CqlTestError;

/// How long Cassandra may take, after opening its port, to answer a query.
const QUERY_TIMEOUT: Duration = Duration::from_secs(30);
/// The query that proves the node serves reads.
const PROBE: &str = "SELECT release_version FROM system.local WHERE key = 'local'";
/// The name `Server` gives the log and pid files in the node's directory.
const NAME: &str = "cassandra";

/// A running single-node Cassandra.
#[derive(Debug)]
pub struct Cassandra {
    server: Server,
    addr: SocketAddr,
    dir: PathBuf,
}

impl Cassandra {
    /// Starts a node with its configuration, data and log in `dir`, and
    /// returns once it answers CQL queries (protocol v3) on [`Self::addr`].
    pub async fn start(dir: &Path) -> Result<Self, CqlTestError> {
        let home = cassandra_home()?;
        if dir.to_string_lossy().contains(char::is_whitespace) {
            return Err(CqlTestError::UnusableDir(dir.to_owned()));
        }
        let ports = config::Ports { native: free_port(), storage: free_port(), ssl_storage: free_port() };
        let yaml = config::write(dir, ports)
            .map_err(CqlTestError::io(format!("cannot configure Cassandra in {}", dir.display())))?;
        let mut command = Command::new(home.join("bin/cassandra"));
        command
            .arg("-f")
            .args(config::system_properties(dir, &yaml))
            .env("CASSANDRA_HOME", &home)
            .env("MAX_HEAP_SIZE", config::MAX_HEAP_SIZE)
            .env("HEAP_NEWSIZE", config::HEAP_NEWSIZE)
            .env("JVM_EXTRA_OPTS", config::jvm_extra_opts());
        let addr = SocketAddr::from(([127, 0, 0, 1], ports.native));
        let started = Instant::now();
        let server_dir = dir.to_owned();
        let server = tokio::task::spawn_blocking(move || Server::start("cassandra", command, &server_dir, NAME, addr))
            .await
            .map_err(|join| CqlTestError::io("Cassandra start-up was interrupted")(std::io::Error::other(join)))??;
        // From here on a failure drops `cassandra`, which kills the node.
        let cassandra = Self { server, addr, dir: dir.to_owned() };
        cassandra.wait_for_queries().await?;
        tracing::info!(%addr, elapsed = ?started.elapsed(), "Cassandra is ready.");
        Ok(cassandra)
    }

    /// The native-transport address (protocol v3; the scylla driver needs the
    /// bridge in front of it).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Cassandra's console log.
    pub fn log(&self) -> PathBuf {
        self.dir.join(format!("{NAME}.log"))
    }

    async fn wait_for_queries(&self) -> Result<(), CqlTestError> {
        let deadline = Instant::now() + QUERY_TIMEOUT;
        loop {
            let last_error = match probe(self.addr).await {
                Ok(()) => return Ok(()),
                Err(error) => error,
            };
            if Instant::now() >= deadline {
                return Err(CqlTestError::NotAnswering {
                    addr: self.addr,
                    timeout: QUERY_TIMEOUT,
                    last_error: last_error.to_string(),
                    log: self.log(),
                });
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Kills the JVM and anything else in its process group at once.
    fn kill_group(&mut self) {
        // `Server` runs the node in its own process group and records its
        // pid, which is also the group id.
        if let Ok(pid) = std::fs::read_to_string(self.dir.join(format!("{NAME}.pid"))) {
            let _ = Command::new("kill").args(["-KILL", "--", &format!("-{}", pid.trim())]).status();
        }
        self.server.kill();
    }
}

impl Drop for Cassandra {
    fn drop(&mut self) {
        self.kill_group();
    }
}

async fn probe(addr: SocketAddr) -> std::io::Result<()> {
    let attempt = async {
        let rows = Client::connect(addr).await?.query(PROBE, &[]).await?;
        if rows.is_empty() {
            Err(std::io::Error::other("system.local has no row yet"))
        } else {
            Ok(())
        }
    };
    tokio::time::timeout(Duration::from_secs(5), attempt)
        .await
        .unwrap_or_else(|_| Err(std::io::Error::new(std::io::ErrorKind::TimedOut, "no answer within 5 s")))
}
