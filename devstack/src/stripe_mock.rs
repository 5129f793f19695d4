//! Stripe's own `stripe-mock`: the server Stripe's SDKs test against,
//! generated from Stripe's OpenAPI specification. It refuses any request
//! the specification does not allow and answers with Stripe's fixtures, so
//! the payment adapter's requests and the shapes it reads are checked
//! against Stripe itself, not against our reading of it (the sandbox).
//! Stateless: it checks shapes, not flows.
//!
//! `scripts/setup --tests` installs the pinned version through the Go
//! module proxy into `~/.local/share/seckill/stripe-mock-<version>/`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::process::{find_binary, on_a_free_port, Server};
use crate::DevstackError;

/// The version `scripts/setup` installs (`github.com/stripe/stripe-mock`).
pub const STRIPE_MOCK_VERSION: &str = "0.203.0";
/// Names the binary to run instead of the installed one.
pub const STRIPE_MOCK_VAR: &str = "SECKILL_STRIPE_MOCK";

/// It loads its embedded specification before listening: a second or two.
const READY_WITHIN: Duration = Duration::from_secs(30);

/// A running stripe-mock; stopped when dropped.
#[derive(Debug)]
pub struct StripeMock {
    _server: Server,
    port: u16,
}

impl StripeMock {
    /// Starts stripe-mock on a free port, logging into `dir`.
    pub fn start(dir: &Path) -> Result<Self, DevstackError> {
        std::fs::create_dir_all(dir).map_err(|source| DevstackError::Spawn { what: "stripe-mock".into(), source })?;
        let binary = binary().ok_or_else(|| {
            DevstackError::NotInstalled(format!(
                "stripe-mock {STRIPE_MOCK_VERSION} (scripts/setup --tests installs it; or name one in {STRIPE_MOCK_VAR})"
            ))
        })?;
        let (server, port) = on_a_free_port(|port| {
            let mut command = Command::new(&binary);
            // Its HTTPS listener is not used; it must not take a port
            // another test was handed, so it gets its own free one.
            let https = crate::process::free_port();
            command.args(["-http-port", &port.to_string(), "-https-port", &https.to_string()]);
            let addr = SocketAddr::from(([127, 0, 0, 1], port));
            Ok((Server::start("stripe-mock", command, dir, "stripe-mock", addr, READY_WITHIN)?, port))
        })?;
        Ok(Self { _server: server, port })
    }

    /// `http://127.0.0.1:PORT`, the base URL an adapter is given.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

/// The binary: the one named in the environment, the pinned install, or
/// one on PATH.
fn binary() -> Option<PathBuf> {
    if let Some(named) = std::env::var_os(STRIPE_MOCK_VAR) {
        return Some(PathBuf::from(named));
    }
    let installed = std::env::var_os("HOME").map(|home| {
        PathBuf::from(home).join(format!(".local/share/seckill/stripe-mock-{STRIPE_MOCK_VERSION}/stripe-mock"))
    });
    installed.filter(|path| path.is_file()).or_else(|| find_binary("stripe-mock"))
}
