//! A local Kafka-protocol broker (`nisshi`, or `tansu` as a fallback).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::process::{find_binary, free_port, Server};
use crate::DevstackError;

/// Broker binaries we know how to run, most preferred first. Both take the
/// same flags.
const BROKERS: &[&str] = &["nisshi", "tansu"];

/// Where the broker keeps the log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BrokerStorage {
    /// SQLite in the data directory: survives restarts and SIGKILL.
    Sqlite,
    /// Memory: faster, gone on stop.
    Memory,
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
    /// Starts a broker on `port` (0: a free one) with its data in `dir`.
    pub fn start(dir: &Path, port: u16, storage: BrokerStorage) -> Result<Self, DevstackError> {
        std::fs::create_dir_all(dir).map_err(|source| DevstackError::Spawn { what: "broker".into(), source })?;
        let port = if port == 0 { free_port() } else { port };
        let server = Self::spawn(dir, port, storage)?;
        Ok(Self { server, port, dir: dir.to_owned(), storage })
    }

    fn spawn(dir: &Path, port: u16, storage: BrokerStorage) -> Result<Server, DevstackError> {
        let binary = std::env::var_os("SECKILL_BROKER_BIN")
            .map(PathBuf::from)
            .or_else(|| BROKERS.iter().find_map(|name| find_binary(name)))
            .ok_or_else(|| DevstackError::NotInstalled(BROKERS.join(" or ")))?;
        let url = format!("tcp://127.0.0.1:{port}");
        let engine = match storage {
            BrokerStorage::Sqlite => "sqlite://broker.db".to_owned(),
            BrokerStorage::Memory => "memory://seckill/".to_owned(),
        };
        let mut command = Command::new(binary);
        command
            .arg("broker")
            .args(["--listener-url", &url, "--advertised-listener-url", &url])
            .args(["--storage-engine", &engine])
            // The default 3 s delay before the first group join would slow
            // every consumer start.
            .args(["--group-initial-rebalance-delay", "0s"]);
        Server::start("broker", command, dir, "broker", SocketAddr::from(([127, 0, 0, 1], port)))
    }

    /// The bootstrap servers string.
    pub fn brokers(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Stops the broker gracefully (SIGTERM).
    pub fn stop(&mut self) {
        self.server.stop(Duration::from_secs(10));
    }

    /// Starts the stopped broker again on the same port and data (the
    /// SQLite log survives; the memory one does not).
    pub fn start_again(&mut self) -> Result<(), DevstackError> {
        self.server = Self::spawn(&self.dir, self.port, self.storage)?;
        Ok(())
    }
}
