//! A child server process: started, awaited on its port, stopped.

use std::fs::File;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::listener::{listener_of, Listener};

/// Why a local server could not be started.
#[derive(Debug, thiserror::Error)]
pub enum DevstackError {
    #[error("`{0}` is not installed; run scripts/setup")]
    NotInstalled(String),
    #[error("cannot start {what}: {source}")]
    Spawn {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{what} did not accept connections on {addr} within {timeout:?}; {log}")]
    NotReady { what: String, addr: SocketAddr, timeout: Duration, log: Box<LogEnd> },
    #[error("{what} exited during startup ({status}); {log}")]
    Exited { what: String, status: std::process::ExitStatus, log: Box<LogEnd> },
    #[error("{what} was to listen on {addr}, but another process (pid {owner}) holds it; {log}")]
    PortTaken { what: String, addr: SocketAddr, owner: String, log: Box<LogEnd> },
    #[error("{what} failed; see {log}")]
    Failed { what: String, log: PathBuf },
    #[error("{0}")]
    Setup(String),
    #[error("{what} (pid {pid}), left running by an earlier run, did not stop within {timeout:?}")]
    LeftoverRunning { what: String, pid: u32, timeout: Duration },
}

/// A server's log and its last lines: why it did not start is almost
/// always there.
#[derive(Debug)]
pub struct LogEnd {
    pub log: PathBuf,
    pub tail: String,
}

impl LogEnd {
    /// The last lines of `log`.
    pub(crate) fn of(log: &Path) -> Box<Self> {
        const LINES: usize = 12;
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let tail = lines[lines.len().saturating_sub(LINES)..].join("\n");
        Box::new(Self { log: log.to_owned(), tail })
    }
}

impl std::fmt::Display for LogEnd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the end of {}:\n{}", self.log.display(), self.tail)
    }
}

/// The signal that asks a server to stop gracefully.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopSignal {
    /// SIGTERM: Redis, Kafka (a controlled shutdown), the services.
    Term,
    /// SIGINT: what a terminal's Ctrl-C sends.
    Int,
}

impl StopSignal {
    /// The name `kill -NAME` takes.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Term => "TERM",
            Self::Int => "INT",
        }
    }

    /// The signal's number: a JVM that ran its shutdown hooks on it exits
    /// with 128 plus this.
    fn number(self) -> i32 {
        match self {
            Self::Term => 15,
            Self::Int => 2,
        }
    }
}

/// Sends `signal` to `pid` (through `kill`: no unsafe code here).
pub(crate) fn send_signal(pid: u32, signal: &str) {
    let _ = Command::new("kill").arg(format!("-{signal}")).arg(pid.to_string()).stderr(Stdio::null()).status();
}

/// Where [`free_port`] hands ports out: below the kernel's ephemeral range
/// (32768 and up on Linux), so no outgoing connection's source port can take
/// one between handing it out and its server binding it, and low enough
/// that a Redis Cluster node's bus port (its port + 10000) is below that
/// range too.
const PORTS_FROM: u32 = 10_000;
const PORTS: u32 = 10_000;

/// The next candidate, shared by the process's threads.
static NEXT_PORT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(u32::MAX);

/// A port nobody listens on right now (nor on its port + 10000), never the
/// same twice in one process: tests start several servers at once, and a
/// port handed out twice made two of them fight for it. Each process scans
/// from a place of its own (by its pid), so parallel test processes rarely
/// meet; a port some other program holds is skipped.
pub fn free_port() -> u16 {
    use std::sync::atomic::Ordering;
    let start = PORTS_FROM + (std::process::id().wrapping_mul(7_919) % PORTS);
    let _ = NEXT_PORT.compare_exchange(u32::MAX, start, Ordering::AcqRel, Ordering::Acquire);
    for _ in 0..PORTS {
        let next = NEXT_PORT.fetch_add(1, Ordering::AcqRel);
        let port = u16::try_from(PORTS_FROM + (next - PORTS_FROM) % PORTS).expect("below 20000");
        let free = |port: u16| TcpListener::bind(("127.0.0.1", port)).is_ok();
        if free(port) && free(port + 10_000) {
            return port;
        }
    }
    panic!("no free port in {PORTS_FROM}..{}", PORTS_FROM + PORTS)
}

impl DevstackError {
    /// Whether the server lost its port to another process between
    /// [`free_port`] handing it out and the server binding it.
    pub fn is_port_clash(&self) -> bool {
        match self {
            Self::PortTaken { .. } => true,
            Self::Exited { log, .. } => log.tail.contains("Address already in use"),
            _ => false,
        }
    }
}

/// Starts a server with `start` on a port from [`free_port`], and on a new
/// one when another process took the port first (a port handed out is free
/// only until someone binds it); other failures are returned at once.
pub(crate) fn on_a_free_port<T>(mut start: impl FnMut(u16) -> Result<T, DevstackError>) -> Result<T, DevstackError> {
    const ATTEMPTS: usize = 3;
    let mut attempt = 1;
    loop {
        match start(free_port()) {
            Err(error) if error.is_port_clash() && attempt < ATTEMPTS => {
                tracing::warn!(%error, "A port handed out was taken before the server bound it; another port.");
                attempt += 1;
            }
            result => return result,
        }
    }
}

/// Finds `name` on PATH or in cargo's bin directory.
pub(crate) fn find_binary(name: &str) -> Option<PathBuf> {
    let cargo_bin = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cargo")))
        .map(|home| home.join("bin"));
    std::env::var_os("PATH")
        .map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .chain(cargo_bin)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

/// A running server process; killed when dropped.
#[derive(Debug)]
pub struct Server {
    what: String,
    child: Option<Child>,
    pid_file: PathBuf,
    log: PathBuf,
    stop_signal: StopSignal,
}

impl Server {
    /// Starts `command` in `dir`, logging to `dir/{name}.log`, and waits
    /// up to `ready_within` (each kind of server knows how long it takes)
    /// until it accepts connections on `addr`.
    pub fn start(
        what: &str,
        command: Command,
        dir: &Path,
        name: &str,
        addr: SocketAddr,
        ready_within: Duration,
    ) -> Result<Self, DevstackError> {
        let mut server = Self::spawn(what, command, dir, name)?;
        server.wait_ready(addr, ready_within)?;
        Ok(server)
    }

    /// Starts `command` in `dir`, logging to `dir/{name}.log`, without
    /// waiting: for servers that become ready only together (the nodes of
    /// a Kafka quorum). Follow with [`wait_ready`](Self::wait_ready).
    pub fn spawn(what: &str, mut command: Command, dir: &Path, name: &str) -> Result<Self, DevstackError> {
        let log = dir.join(format!("{name}.log"));
        let spawn_error = |source| DevstackError::Spawn { what: what.to_owned(), source };
        let log_file = File::options().create(true).append(true).open(&log).map_err(spawn_error)?;
        // Its own process group: a Ctrl-C in the terminal reaches only our
        // process, which then stops the server after the services drained.
        let child = command
            .process_group(0)
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(log_file.try_clone().map_err(spawn_error)?)
            .stderr(log_file)
            .spawn()
            .map_err(spawn_error)?;
        let pid_file = dir.join(format!("{name}.pid"));
        std::fs::write(&pid_file, format!("{}\n", child.id())).map_err(spawn_error)?;
        Ok(Self { what: what.to_owned(), child: Some(child), pid_file, log, stop_signal: StopSignal::Term })
    }

    /// Makes [`stop`](Self::stop) send `signal` instead of SIGTERM.
    pub fn stopped_by(mut self, signal: StopSignal) -> Self {
        self.stop_signal = signal;
        self
    }

    /// The process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// The file the server's output goes to.
    pub fn log(&self) -> &Path {
        &self.log
    }

    /// Waits up to `timeout` until this server (not another process that
    /// took the port) accepts connections on `addr`; an exit meanwhile, or
    /// the port held by someone else, is an error with the log's end.
    pub fn wait_ready(&mut self, addr: SocketAddr, timeout: Duration) -> Result<(), DevstackError> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            self.check_running()?;
            if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                let group = self.pid().unwrap_or_default();
                match listener_of(addr.port(), group) {
                    Listener::Ours | Listener::Unknown => return Ok(()),
                    Listener::Other(owner) => {
                        let owner = owner.map_or_else(|| "unknown".to_owned(), |pid| pid.to_string());
                        let log = LogEnd::of(&self.log);
                        return Err(DevstackError::PortTaken { what: self.what.clone(), addr, owner, log });
                    }
                    // Gone between the connect and the look: ask again.
                    Listener::Nobody => {}
                }
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        Err(DevstackError::NotReady { what: self.what.clone(), addr, timeout, log: LogEnd::of(&self.log) })
    }

    /// An error if the process has exited (during start-up: it failed).
    pub fn check_running(&mut self) -> Result<(), DevstackError> {
        if let Some(child) = self.child.as_mut() {
            if let Ok(Some(status)) = child.try_wait() {
                self.child = None;
                return Err(DevstackError::Exited { what: self.what.clone(), status, log: LogEnd::of(&self.log) });
            }
        }
        Ok(())
    }

    /// Asks the process to stop (SIGTERM, or the signal set by
    /// [`stopped_by`](Self::stopped_by)) and waits up to `grace`, then
    /// kills it. Returns whether it exited by itself with success.
    pub fn stop(&mut self, grace: Duration) -> bool {
        self.stop_with(self.stop_signal, grace)
    }

    /// Sends `signal` and waits up to `grace` for the process to exit,
    /// then kills it. Returns whether it exited by itself with success (or,
    /// as a JVM does after its shutdown hooks ran, with 128 + the signal).
    pub fn stop_with(&mut self, signal: StopSignal, grace: Duration) -> bool {
        let Some(mut child) = self.child.take() else { return false };
        send_signal(child.id(), signal.name());
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = child.try_wait() {
                let _ = std::fs::remove_file(&self.pid_file);
                // Java's exit status after a clean shutdown on a signal.
                return status.success() || status.code() == Some(128 + signal.number());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        tracing::warn!(what = %self.what, "Did not stop in time; killing it.");
        self.kill_child(child);
        false
    }

    /// Kills the process at once (SIGKILL), as a crash would.
    pub fn kill(&mut self) {
        if let Some(child) = self.child.take() {
            self.kill_child(child);
        }
    }

    fn kill_child(&self, mut child: Child) {
        let _ = child.kill();
        let _ = child.wait();
        let _ = std::fs::remove_file(&self.pid_file);
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_handed_out_are_distinct_and_free() {
        let ports: Vec<u16> = (0..500).map(|_| free_port()).collect();
        let distinct: std::collections::HashSet<u16> = ports.iter().copied().collect();
        assert_eq!(distinct.len(), ports.len(), "a port handed out twice");
        assert!(ports.iter().all(|port| (10_000..20_000).contains(port)), "{ports:?}");
        // Handed out, not held: each can be bound by its server.
        let held: Vec<TcpListener> =
            ports.iter().map(|port| TcpListener::bind(("127.0.0.1", *port)).expect("binds")).collect();
        assert_eq!(held.len(), 500);
    }

    #[test]
    fn a_port_someone_else_listens_on_is_not_taken_for_the_server_being_started() {
        let taken = TcpListener::bind("127.0.0.1:0").expect("binds");
        let addr = taken.local_addr().expect("address");
        let dir = crate::TempDir::new().expect("dir");
        let mut command = Command::new("sleep");
        command.arg("30");
        let error = Server::start("a sleeper", command, dir.path(), "sleeper", addr, Duration::from_secs(5))
            .expect_err("the listener is not the sleeper");
        match error {
            DevstackError::PortTaken { what, addr: named, owner, .. } => {
                assert_eq!((what.as_str(), named), ("a sleeper", addr));
                assert_eq!(owner, std::process::id().to_string(), "the test process holds it");
            }
            other => panic!("expected PortTaken, got {other}"),
        }
    }

    #[test]
    fn a_server_that_exits_during_startup_is_named_with_its_log() {
        let dir = crate::TempDir::new().expect("dir");
        let mut command = Command::new("sh");
        command.args(["-c", "echo 'bind: address in use' >&2; exit 3"]);
        let addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
        let error = Server::start("a failing server", command, dir.path(), "failing", addr, Duration::from_secs(5))
            .expect_err("it exited");
        assert!(matches!(error, DevstackError::Exited { .. }), "{error}");
        let message = error.to_string();
        assert!(message.starts_with("a failing server exited during startup"), "{message}");
        assert!(message.contains("bind: address in use"), "the log's end: {message}");
    }

    #[test]
    fn a_port_lost_to_another_process_is_retried_on_another_and_other_failures_are_not() {
        let clash = || DevstackError::PortTaken {
            what: "x".into(),
            addr: SocketAddr::from(([127, 0, 0, 1], 1)),
            owner: "1".into(),
            log: Box::new(LogEnd { log: PathBuf::from("x.log"), tail: String::new() }),
        };
        let mut ports = Vec::new();
        let started = on_a_free_port(|port| {
            ports.push(port);
            if ports.len() < 2 {
                Err(clash())
            } else {
                Ok(port)
            }
        })
        .expect("the second port");
        assert_eq!((ports.len(), started), (2, ports[1]));
        assert_ne!(ports[0], ports[1]);

        let mut calls = 0;
        let failed = on_a_free_port(|_| -> Result<(), DevstackError> {
            calls += 1;
            Err(DevstackError::Setup("a bad config".into()))
        });
        assert!(matches!(failed, Err(DevstackError::Setup(_))));
        assert_eq!(calls, 1, "only a lost port is retried");
    }
}
