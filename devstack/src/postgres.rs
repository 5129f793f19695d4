//! A private PostgreSQL server for the broker's log (nisshi's
//! `postgres://` engine): its own cluster directory, port and socket
//! directory, created with `initdb` on first use.
//!
//! When we are root the server runs as the unprivileged `postgres` user
//! (initdb and postgres refuse root), and its directory is that user's.

use std::ffi::OsStr;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use crate::leftover::{stop_leftover, Expected, Leftover};
use crate::pg_admin::PgAdmin;
use crate::pg_install::{PgInstall, POSTGRES_USER};
use crate::process::{free_port, Server, StopSignal};
use crate::DevstackError;

/// The cluster's directory inside the server's directory.
const CLUSTER_DIR: &str = "data";
/// Where `initdb` builds a new cluster; renamed to [`CLUSTER_DIR`] once
/// complete, so a cluster directory is never half made.
const PARTIAL_CLUSTER_DIR: &str = "data.initdb";
/// Longest Unix socket path the kernel takes (`sun_path` less its NUL).
const MAX_SOCKET_PATH: usize = 107;

/// How much a commit the server acknowledges can survive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PgDurability {
    /// `fsync=on`, `synchronous_commit=on`, `full_page_writes=on`
    /// (PostgreSQL's defaults, set explicitly): a commit is acknowledged
    /// once its WAL is flushed to disk, so it survives a crash of the
    /// server or of the machine.
    Full,
    /// `fsync=off`: commits survive a crash or restart of the server (the
    /// WAL is written before the acknowledgement) but not of the machine.
    /// For test data, which is thrown away.
    Throwaway,
}

/// How a server is configured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PgSettings {
    pub durability: PgDurability,
    /// `max_connections`: a broker's pool holds up to 16.
    pub max_connections: u32,
}

impl PgSettings {
    /// For the local run and the benchmark: full durability.
    pub const DURABLE: Self = Self { durability: PgDurability::Full, max_connections: 100 };
    /// For a test run's shared server: many brokers, throwaway data.
    pub const TEST: Self = Self { durability: PgDurability::Throwaway, max_connections: 400 };

    fn options(&self) -> Vec<String> {
        let fsync = match self.durability {
            PgDurability::Full => "on",
            PgDurability::Throwaway => "off",
        };
        [
            format!("fsync={fsync}"),
            "synchronous_commit=on".to_owned(),
            format!("full_page_writes={fsync}"),
            format!("max_connections={}", self.max_connections),
            // The broker fetches a record range's headers with
            // `offset_id = ANY($offsets)`. Planned for the actual array
            // (PostgreSQL's first five executions of a prepared statement,
            // and later ones it judges cheaper so), that condition becomes a
            // filter over every header of the partition: a fetch then costs
            // the partition's size times the records it returns, and a
            // 60,000-order burst took 45 s rather than 4 s to drain. The
            // generic plan keeps both columns in the index condition.
            "plan_cache_mode=force_generic_plan".to_owned(),
        ]
        .into_iter()
        .flat_map(|setting| ["-c".to_owned(), setting])
        .collect()
    }
}

/// A running PostgreSQL server; stopped (immediately, by SIGKILL) when
/// dropped: call [`stop`](Self::stop) for a clean shutdown.
#[derive(Debug)]
pub struct Postgres {
    server: Server,
    port: u16,
    dir: PathBuf,
    settings: PgSettings,
    install: PgInstall,
    admin: PgAdmin,
}

impl Postgres {
    /// Starts a server on `port` (0: a free one) with its cluster in
    /// `dir/data`, creating the cluster on first use. A server an earlier
    /// run left running in `dir` is stopped first.
    pub fn start(dir: &Path, port: u16, settings: PgSettings) -> Result<Self, DevstackError> {
        let install = PgInstall::find()?;
        Self::stop_leftover(dir)?;
        install.prepare_dir(dir)?;
        if !dir.join(CLUSTER_DIR).is_dir() {
            init_cluster(&install, dir, settings)?;
        }
        let port = if port == 0 { free_port() } else { port };
        let admin = PgAdmin::new(&format!("postgres://{POSTGRES_USER}@127.0.0.1:{port}"))?;
        let server = Self::spawn(&install, dir, port, settings, &admin)?;
        Ok(Self { server, port, dir: dir.to_owned(), settings, install, admin })
    }

    fn spawn(
        install: &PgInstall,
        dir: &Path,
        port: u16,
        settings: PgSettings,
        admin: &PgAdmin,
    ) -> Result<Server, DevstackError> {
        let socket_path = dir.join(format!(".s.PGSQL.{port}"));
        // Everything connects over TCP; the socket is for an operator's psql,
        // and is left out where the path would be too long for one.
        let socket_dir =
            if socket_path.as_os_str().len() <= MAX_SOCKET_PATH { dir.as_os_str() } else { OsStr::new("") };
        let mut command = install.server_program("postgres");
        command
            .arg("-D")
            .arg(dir.join(CLUSTER_DIR))
            .args(["-p", &port.to_string()])
            .arg("-k")
            .arg(socket_dir)
            .args(["-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_permissions=0700"])
            .args(settings.options());
        let server = Server::start("postgres", command, dir, "postgres", SocketAddr::from(([127, 0, 0, 1], port)))?
            .stopped_by(StopSignal::Int);
        // It accepts connections before it has finished starting (or
        // recovering after a crash); queries tell when it is ready.
        admin.wait_ready(Duration::from_secs(60))?;
        Ok(server)
    }

    /// Stops a server that an earlier run started in `dir` and left
    /// running (its parent was killed); says in the log what it found.
    pub fn stop_leftover(dir: &Path) -> Result<Leftover, DevstackError> {
        let programs: Vec<PathBuf> = std::iter::once("postgres".into())
            .chain(PgInstall::find().ok().map(|install| install.path("postgres")))
            .collect();
        let expected =
            Expected { what: "postgres", programs: &programs, cwd: &dir.join(CLUSTER_DIR), stop: StopSignal::Int };
        stop_leftover(&dir.join("postgres.pid"), &expected)
    }

    /// Creates, checks and drops this server's databases.
    pub fn admin(&self) -> &PgAdmin {
        &self.admin
    }

    /// The URL of `database` on this server, as the broker takes it.
    pub fn database_url(&self, database: &str) -> String {
        self.admin.database_url(database)
    }

    /// The server's process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.server.pid()
    }

    /// Stops the server cleanly (fast shutdown: clients are disconnected,
    /// everything committed is on disk).
    pub fn stop(&mut self) {
        self.server.stop(Duration::from_secs(30));
    }

    /// Crashes the server: an immediate shutdown, its processes exit at
    /// once without a checkpoint; the next start recovers from the WAL.
    pub fn crash(&mut self) {
        self.server.stop_with(StopSignal::Quit, Duration::from_secs(30));
    }

    /// Starts the stopped server again on the same port and cluster.
    pub fn start_again(&mut self) -> Result<(), DevstackError> {
        self.server = Self::spawn(&self.install, &self.dir, self.port, self.settings, &self.admin)?;
        Ok(())
    }
}

/// `initdb` as the server's account: trust authentication (the server
/// listens on 127.0.0.1 only), UTF-8, the C locale.
fn init_cluster(install: &PgInstall, dir: &Path, settings: PgSettings) -> Result<(), DevstackError> {
    let partial = dir.join(PARTIAL_CLUSTER_DIR);
    let _ = std::fs::remove_dir_all(&partial);
    let log = dir.join("initdb.log");
    let io = |source| DevstackError::Spawn { what: "initdb".into(), source };
    let log_file = std::fs::File::create(&log).map_err(io)?;
    let mut command = install.server_program("initdb");
    command
        .arg("-D")
        .arg(&partial)
        .args(["--username", POSTGRES_USER, "--auth", "trust", "--encoding", "UTF8", "--locale", "C"])
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(log_file.try_clone().map_err(io)?)
        .stderr(log_file);
    if settings.durability == PgDurability::Throwaway {
        command.arg("--no-sync");
    }
    let status = command.status().map_err(io)?;
    if !status.success() {
        return Err(DevstackError::Failed { what: "initdb".into(), log });
    }
    std::fs::rename(&partial, dir.join(CLUSTER_DIR)).map_err(io)
}
