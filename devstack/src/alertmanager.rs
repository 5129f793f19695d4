//! A local Alertmanager (Debian's `prometheus-alertmanager`) on a given
//! configuration, for testing routes and inhibitions against the real
//! thing.

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::process::{find_binary, on_a_free_port, Server};
use crate::DevstackError;

/// How long Alertmanager may take to listen.
const READY_WITHIN: Duration = Duration::from_secs(30);

/// A running Alertmanager; stopped when dropped.
#[derive(Debug)]
pub struct Alertmanager {
    _server: Server,
    port: u16,
}

impl Alertmanager {
    /// Starts Alertmanager on `config` with its data in `dir`, alone (no
    /// cluster peers).
    pub fn start(dir: &Path, config: &Path) -> Result<Self, DevstackError> {
        let spawn_error = |source| DevstackError::Spawn { what: "alertmanager".into(), source };
        std::fs::create_dir_all(dir).map_err(spawn_error)?;
        let binary = find_binary("prometheus-alertmanager")
            .ok_or_else(|| DevstackError::NotInstalled("prometheus-alertmanager".into()))?;
        on_a_free_port(|port| {
            let mut command = Command::new(&binary);
            command
                .arg(format!("--config.file={}", config.display()))
                .arg(format!("--storage.path={}", dir.join("data").display()))
                .arg(format!("--web.listen-address=127.0.0.1:{port}"))
                .arg("--cluster.listen-address=");
            let addr = SocketAddr::from(([127, 0, 0, 1], port));
            let server = Server::start("alertmanager", command, dir, "alertmanager", addr, READY_WITHIN)?;
            Ok(Self { _server: server, port })
        })
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}
