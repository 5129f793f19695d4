//! A local Kafka-protocol broker (`nisshi`, or `tansu` as a fallback).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::leftover::{stop_leftover, Expected, Leftover};
use crate::process::{find_binary, free_port, Server, StopSignal};
use crate::DevstackError;

/// Broker binaries we know how to run, most preferred first. Both take the
/// same flags.
const BROKERS: &[&str] = &["nisshi", "tansu"];

/// Where the broker keeps the log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BrokerStorage {
    /// PostgreSQL: the database at this URL (`postgres://USER@HOST:PORT/DB`,
    /// created beforehand). The engine upstream calls production-ready:
    /// a produced batch is one `COPY` in one transaction, committed before
    /// the broker acknowledges it; survives restarts and SIGKILL.
    Postgres(String),
    /// SQLite in the data directory: survives restarts and SIGKILL; one
    /// insert per record and unbounded fetch scans, so slower.
    Sqlite,
    /// Memory: faster, gone on stop.
    Memory,
}

impl BrokerStorage {
    /// The `--storage-engine` argument.
    fn engine(&self) -> String {
        match self {
            Self::Postgres(url) => url.clone(),
            Self::Sqlite => "sqlite://broker.db".to_owned(),
            Self::Memory => "memory://seckill/".to_owned(),
        }
    }
}

/// A running broker; stopped when dropped.
#[derive(Debug)]
pub struct Broker {
    server: Server,
    port: u16,
    dir: PathBuf,
    storage: BrokerStorage,
}

impl Broker {
    /// Starts a broker on `port` (0: a free one) with its data (or, on
    /// PostgreSQL, its log and pid file) in `dir`. A broker an earlier run
    /// left running in `dir` is stopped first.
    pub fn start(dir: &Path, port: u16, storage: BrokerStorage) -> Result<Self, DevstackError> {
        std::fs::create_dir_all(dir).map_err(|source| DevstackError::Spawn { what: "broker".into(), source })?;
        Self::stop_leftover(dir)?;
        let port = if port == 0 { free_port() } else { port };
        let server = Self::spawn(dir, port, &storage)?;
        Ok(Self { server, port, dir: dir.to_owned(), storage })
    }

    fn binary() -> Result<PathBuf, DevstackError> {
        std::env::var_os("SECKILL_BROKER_BIN")
            .map(PathBuf::from)
            .or_else(|| BROKERS.iter().find_map(|name| find_binary(name)))
            .ok_or_else(|| DevstackError::NotInstalled(BROKERS.join(" or ")))
    }

    fn spawn(dir: &Path, port: u16, storage: &BrokerStorage) -> Result<Server, DevstackError> {
        let url = format!("tcp://127.0.0.1:{port}");
        let mut command = Command::new(Self::binary()?);
        command
            .arg("broker")
            .args(["--listener-url", &url, "--advertised-listener-url", &url])
            .args(["--storage-engine", &storage.engine()])
            // The default 3 s delay before the first group join would slow
            // every consumer start.
            .args(["--group-initial-rebalance-delay", "0s"]);
        Server::start("broker", command, dir, "broker", SocketAddr::from(([127, 0, 0, 1], port)))
    }

    /// Stops a broker that an earlier run started in `dir` and left running
    /// (its parent was killed); says in the log what it found.
    pub fn stop_leftover(dir: &Path) -> Result<Leftover, DevstackError> {
        let programs: Vec<PathBuf> = BROKERS.iter().map(PathBuf::from).chain(Self::binary().ok()).collect();
        let expected = Expected { what: "broker", programs: &programs, cwd: dir, stop: StopSignal::Term };
        stop_leftover(&dir.join("broker.pid"), &expected)
    }

    /// The bootstrap servers string.
    pub fn brokers(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Where the log is kept.
    pub fn storage(&self) -> &BrokerStorage {
        &self.storage
    }

    /// The process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.server.pid()
    }

    /// Stops the broker gracefully (SIGTERM).
    pub fn stop(&mut self) {
        self.server.stop(Duration::from_secs(10));
    }

    /// Kills the broker at once (SIGKILL), as a crash would.
    pub fn kill(&mut self) {
        self.server.kill();
    }

    /// Starts the stopped broker again on the same port and data (the
    /// SQLite and PostgreSQL logs survive; the memory one does not).
    pub fn start_again(&mut self) -> Result<(), DevstackError> {
        self.server = Self::spawn(&self.dir, self.port, &self.storage)?;
        Ok(())
    }
}
