//! A local Prometheus (Debian's package) scraping given targets every
//! second, for checking dashboards against real data.

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::process::{find_binary, on_a_free_port, Server};
use crate::DevstackError;

/// How long Prometheus may take to listen (it replays no data here: each
/// test's is fresh).
const READY_WITHIN: Duration = Duration::from_secs(30);

/// A running Prometheus; stopped when dropped.
#[derive(Debug)]
pub struct Prometheus {
    server: Server,
    port: u16,
}

impl Prometheus {
    /// Starts Prometheus with its data in `dir`, scraping `targets`
    /// (`host:port`, each serving `/metrics`) every second.
    pub fn start(dir: &Path, targets: &[String]) -> Result<Self, DevstackError> {
        Self::start_with_rules(dir, targets, None)
    }

    /// As [`start`](Self::start), evaluating the rules of `rules` (alerting
    /// and recording) every second.
    pub fn start_with_rules(dir: &Path, targets: &[String], rules: Option<&Path>) -> Result<Self, DevstackError> {
        let spawn_error = |source| DevstackError::Spawn { what: "prometheus".into(), source };
        std::fs::create_dir_all(dir).map_err(spawn_error)?;
        let binary = find_binary("prometheus").ok_or_else(|| DevstackError::NotInstalled("prometheus".into()))?;
        let quoted: Vec<String> = targets.iter().map(|target| format!("'{target}'")).collect();
        let rule_files = rules.map(|rules| format!("rule_files: ['{}']\n", rules.display())).unwrap_or_default();
        let config = format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n{rule_files}scrape_configs:\n  - job_name: seckill\n    \
             static_configs:\n      - targets: [{}]\n",
            quoted.join(", ")
        );
        let config_file = dir.join("prometheus.yml");
        std::fs::write(&config_file, config).map_err(spawn_error)?;
        on_a_free_port(|port| {
            let mut command = Command::new(&binary);
            command
                .arg(format!("--config.file={}", config_file.display()))
                .arg(format!("--storage.tsdb.path={}", dir.join("data").display()))
                .arg(format!("--web.listen-address=127.0.0.1:{port}"));
            let addr = SocketAddr::from(([127, 0, 0, 1], port));
            let server = Server::start("prometheus", command, dir, "prometheus", addr, READY_WITHIN)?;
            Ok(Self { server, port })
        })
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Stops it gracefully.
    pub fn stop(&mut self) {
        self.server.stop(Duration::from_secs(10));
    }
}
