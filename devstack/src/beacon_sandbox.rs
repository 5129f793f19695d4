//! The beacon sandbox (`seckill-beacon-sandbox`, crate `seckill-beacon`) as
//! a process of its own: a drand chain of one signer on a free port, for the
//! draws that rank by a beacon round. Its chain (hash, public key, genesis,
//! period) is at `{url}/info`, as a drand relay's is.
//!
//! The binary is found in `SECKILL_BEACON_SANDBOX`, beside the running
//! executable's build directory (`target/debug/`, where `cargo test
//! --workspace` builds it), or on the `PATH`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::leftover::{stop_leftover_program, Leftover};
use crate::process::{find_binary, on_a_free_port, Server};
use crate::DevstackError;

/// Names the binary to run instead of the one beside the build.
pub const BEACON_SANDBOX_VAR: &str = "SECKILL_BEACON_SANDBOX";
const BINARY: &str = "seckill-beacon-sandbox";
const READY_WITHIN: Duration = Duration::from_secs(20);

/// A running beacon sandbox; stopped when dropped.
#[derive(Debug)]
pub struct BeaconSandbox {
    _server: Server,
    port: u16,
}

impl BeaconSandbox {
    /// Starts a sandbox whose round 1 is now, one round every `period`
    /// seconds, logging into `dir`.
    pub fn start(dir: &Path, period: u32) -> Result<Self, DevstackError> {
        Self::start_at(dir, period, chrono_now(), None)
    }

    /// Starts the chain whose round 1 was at `genesis` (Unix seconds) on
    /// `port` (a free one when None): the same chain as every sandbox of the
    /// same genesis and period, since they share the sandbox's key. A test
    /// that stops one and starts another later has a relay that went away
    /// and came back.
    pub fn start_at(dir: &Path, period: u32, genesis: i64, port: Option<u16>) -> Result<Self, DevstackError> {
        std::fs::create_dir_all(dir)
            .map_err(|source| DevstackError::Spawn { what: "the beacon sandbox".into(), source })?;
        let binary = binary().ok_or_else(not_installed)?;
        // A sandbox a killed earlier run left in `dir` holds its port.
        if let Leftover::Stopped { pid } = stop_leftover_program("the beacon sandbox", dir, "beacon-sandbox", &binary)?
        {
            tracing::warn!(pid, "Stopped the beacon sandbox an earlier run left running.");
        }
        let run = |port: u16| {
            let mut command = Command::new(&binary);
            command.args(["--listen", &format!("127.0.0.1:{port}"), "--period", &period.to_string()]);
            command.args(["--genesis", &genesis.to_string()]);
            let addr = SocketAddr::from(([127, 0, 0, 1], port));
            Ok((Server::start("the beacon sandbox", command, dir, "beacon-sandbox", addr, READY_WITHIN)?, port))
        };
        let (server, port) = match port {
            Some(port) => run(port)?,
            None => on_a_free_port(run)?,
        };
        Ok(Self { _server: server, port })
    }

    /// Its port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `http://127.0.0.1:PORT`: a relay's base URL.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

impl BeaconSandbox {
    /// Whether the sandbox's binary can be found (see the module's header).
    pub fn installed() -> bool {
        binary().is_some()
    }
}

fn not_installed() -> DevstackError {
    DevstackError::NotInstalled(format!(
        "{BINARY} (cargo build -p seckill-beacon builds it; or name one in {BEACON_SANDBOX_VAR})"
    ))
}

fn chrono_now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |since| since.as_secs() as i64)
}

fn binary() -> Option<PathBuf> {
    if let Some(named) = std::env::var_os(BEACON_SANDBOX_VAR) {
        return Some(PathBuf::from(named));
    }
    // A test executable runs from target/<profile>/deps/.
    let exe = std::env::current_exe().ok()?;
    let beside = exe
        .parent()
        .into_iter()
        .flat_map(|dir| [dir.join(BINARY), dir.parent().map(|up| up.join(BINARY)).unwrap_or_default()]);
    beside.into_iter().find(|candidate| candidate.is_file()).or_else(|| find_binary(BINARY))
}
