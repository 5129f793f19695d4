//! A local `redis-server`, alone or as the replica of another
//! ([`Redis::start_replica`]).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::leftover::{stop_leftover, Expected, Leftover};
use crate::process::{find_binary, on_a_free_port, send_signal, Server, StopSignal};
use crate::DevstackError;

/// How long a Redis (or a cluster node) may take to listen: an empty one
/// listens within milliseconds, one loading a large AOF later still, but
/// tests and the development run start them empty.
pub(crate) const READY_WITHIN: Duration = Duration::from_secs(20);

/// How the server keeps its data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RedisPersistence {
    /// Memory only: fastest, for tests that never restart Redis.
    None,
    /// Append-only file fsynced every second, in the data directory.
    AppendOnly,
}

/// A running Redis; stopped when dropped.
#[derive(Debug)]
pub struct Redis {
    server: Server,
    port: u16,
    dir: std::path::PathBuf,
    persistence: RedisPersistence,
    /// The port of the master it replicates (None: a master).
    replica_of: Option<u16>,
    /// The test host it runs on (None: 127.0.0.1 of this machine).
    host: Option<crate::Host>,
}

impl Redis {
    /// Starts Redis on `port` (0: a free one) with its data in `dir`. A
    /// Redis an earlier run left running in `dir` is stopped first.
    pub fn start(dir: &Path, port: u16, persistence: RedisPersistence) -> Result<Self, DevstackError> {
        std::fs::create_dir_all(dir).map_err(|source| DevstackError::Spawn { what: "redis".into(), source })?;
        Self::stop_leftover(dir)?;
        let (server, port) = if port == 0 {
            on_a_free_port(|port| Ok((Self::spawn(dir, port, persistence, None, None)?, port)))?
        } else {
            (Self::spawn(dir, port, persistence, None, None)?, port)
        };
        Ok(Self { server, port, dir: dir.to_owned(), persistence, replica_of: None, host: None })
    }

    /// Starts Redis on test host `host`, listening on its address (a port
    /// of its own: nothing else listens there), with its data in `dir`.
    pub fn start_on(host: &crate::Host, dir: &Path, persistence: RedisPersistence) -> Result<Self, DevstackError> {
        std::fs::create_dir_all(dir).map_err(|source| DevstackError::Spawn { what: "redis".into(), source })?;
        Self::stop_leftover(dir)?;
        let port = 6379;
        let server = Self::spawn(dir, port, persistence, None, Some(host))?;
        Ok(Self { server, port, dir: dir.to_owned(), persistence, replica_of: None, host: Some(host.clone()) })
    }

    /// Starts a replica of `master` (`--replicaof`) on a free port, memory
    /// only, with its data in `dir`, and waits until its link to the master
    /// is up and the first sync done.
    pub fn start_replica(dir: &Path, master: &Redis) -> Result<Self, DevstackError> {
        std::fs::create_dir_all(dir).map_err(|source| DevstackError::Spawn { what: "redis".into(), source })?;
        Self::stop_leftover(dir)?;
        let persistence = RedisPersistence::None;
        let (server, port) =
            on_a_free_port(|port| Ok((Self::spawn(dir, port, persistence, Some(master.port), None)?, port)))?;
        let replica =
            Self { server, port, dir: dir.to_owned(), persistence, replica_of: Some(master.port), host: None };
        replica.wait_linked()?;
        Ok(replica)
    }

    /// Waits until the replica reports `master_link_status:up`.
    fn wait_linked(&self) -> Result<(), DevstackError> {
        let cli = find_binary("redis-cli").ok_or_else(|| DevstackError::NotInstalled("redis-cli".into()))?;
        let deadline = Instant::now() + READY_WITHIN;
        while Instant::now() < deadline {
            let info = Command::new(&cli).args(["-p", &self.port.to_string(), "INFO", "replication"]).output();
            if info.is_ok_and(|info| String::from_utf8_lossy(&info.stdout).contains("master_link_status:up")) {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Err(DevstackError::Setup(format!("the replica on port {} did not link within {READY_WITHIN:?}", self.port)))
    }

    fn spawn(
        dir: &Path,
        port: u16,
        persistence: RedisPersistence,
        replica_of: Option<u16>,
        host: Option<&crate::Host>,
    ) -> Result<Server, DevstackError> {
        let binary = find_binary("redis-server").ok_or_else(|| DevstackError::NotInstalled("redis-server".into()))?;
        let (mut command, bind) = match host {
            Some(host) => (host.command(binary), host.ip().to_string()),
            None => (Command::new(binary), "127.0.0.1".to_owned()),
        };
        command.args(["--port", &port.to_string(), "--bind", &bind, "--save", "", "--daemonize", "no"]).args([
            "--dir",
            &dir.to_string_lossy(),
            "--protected-mode",
            "yes",
        ]);
        if host.is_some() {
            // Its clients come from other hosts, never from its loopback.
            command.args(["--protected-mode", "no"]);
        }
        match persistence {
            RedisPersistence::None => command.args(["--appendonly", "no"]),
            RedisPersistence::AppendOnly => command.args(["--appendonly", "yes", "--appendfsync", "everysec"]),
        };
        if let Some(master) = replica_of {
            command.args(["--replicaof", "127.0.0.1", &master.to_string()]);
        }
        if let Some(host) = host {
            let mut server = Server::spawn("redis", command, dir, "redis")?;
            host.wait_listening(&mut server, port, READY_WITHIN)?;
            return Ok(server);
        }
        Server::start("redis", command, dir, "redis", SocketAddr::from(([127, 0, 0, 1], port)), READY_WITHIN)
    }

    /// Stops a Redis that an earlier run started in `dir` and left running
    /// (its parent was killed); says in the log what it found.
    pub fn stop_leftover(dir: &Path) -> Result<Leftover, DevstackError> {
        let programs: Vec<PathBuf> =
            std::iter::once("redis-server".into()).chain(find_binary("redis-server")).collect();
        let expected = Expected { what: "redis", programs: &programs, cwd: dir, stop: StopSignal::Term };
        stop_leftover(&dir.join("redis.pid"), &expected)
    }

    /// The process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.server.pid()
    }

    /// `redis://127.0.0.1:PORT/`, or the test host's address.
    pub fn url(&self) -> String {
        let ip = self.host.as_ref().map_or_else(|| "127.0.0.1".to_owned(), |host| host.ip().to_string());
        format!("redis://{ip}:{}/", self.port)
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Freezes the server (SIGSTOP): it answers nobody, and a replica
    /// acknowledges nothing, until [`resume`](Self::resume). Its
    /// connections stay open, so its master still counts it connected.
    pub fn pause(&self) {
        if let Some(pid) = self.pid() {
            send_signal(pid, "STOP");
        }
    }

    /// Lets a frozen server run again (SIGCONT).
    pub fn resume(&self) {
        if let Some(pid) = self.pid() {
            send_signal(pid, "CONT");
        }
    }

    /// Stops the server gracefully.
    pub fn stop(&mut self) {
        self.server.stop(Duration::from_secs(10));
    }

    /// Kills the server at once (SIGKILL), as a crash would: nothing is
    /// flushed beyond what the append-only file already has.
    pub fn kill(&mut self) {
        self.server.kill();
    }

    /// Starts the stopped server again on the same port and data.
    pub fn start_again(&mut self) -> Result<(), DevstackError> {
        self.server = Self::spawn(&self.dir, self.port, self.persistence, self.replica_of, self.host.as_ref())?;
        Ok(())
    }
}
