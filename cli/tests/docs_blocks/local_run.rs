//! The local run as the README starts it, in a directory laid out as a
//! reader's checkout is after `scripts/dev`: `target/release/seckill` (this
//! build's binary), `config/` and `scripts/` (the repository's), and the
//! run's data in `.seckill/`, where `seckill dev` puts it when started from
//! there with no flags. No flags means the default ports (8080, 8081, 8082,
//! 16379, 19092, 8090): the blocks name them, and are run as written.

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use seckill_devstack::{Server, StopSignal};

/// The ports `seckill dev` listens on by default: ingress, processor,
/// projector, Redis, Kafka, the payment sandbox, the beacon sandbox.
const DEFAULT_PORTS: [u16; 7] = [8080, 8081, 8082, 16379, 19092, 8090, 8099];
/// Kafka's JVM and the services' first group joins on a loaded machine.
const START_TIMEOUT: Duration = Duration::from_secs(150);

/// A running `seckill dev`, stopped (Ctrl-C) when dropped, with the
/// servers it started in their own process groups.
pub(crate) struct LocalRun {
    /// The reader's checkout: where every block runs.
    pub(crate) work: PathBuf,
    server: Server,
}

impl LocalRun {
    /// Lays out `work` and starts the run in it.
    pub(crate) fn start(work: &Path) -> LocalRun {
        if let Some(port) = DEFAULT_PORTS.iter().find(|&&port| TcpListener::bind(("127.0.0.1", port)).is_err()) {
            panic!(
                "port {port} is taken: the docs' blocks name the local run's default ports, so this test runs \
                 `seckill dev` on them (stop a local run, or whatever holds it, first)"
            );
        }
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").canonicalize().expect("the repository");
        std::fs::create_dir_all(work.join("target/release")).expect("target/release");
        std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_seckill"), work.join("target/release/seckill"))
            .expect("links the binary");
        for dir in ["config", "scripts"] {
            std::os::unix::fs::symlink(root.join(dir), work.join(dir)).expect("links the repository's files");
        }
        let mut command = Command::new(work.join("target/release/seckill"));
        command.arg("dev").env("RUST_LOG", "info");
        let addr = SocketAddr::from(([127, 0, 0, 1], DEFAULT_PORTS[0]));
        let server = Server::spawn("seckill dev", command, work, "dev")
            .and_then(|mut server| {
                server.wait_ready(addr, START_TIMEOUT)?;
                Ok(server)
            })
            .unwrap_or_else(|error| panic!("seckill dev did not start: {error}"))
            .stopped_by(StopSignal::Int);
        LocalRun { work: work.to_path_buf(), server }
    }

    /// Stops the run as Ctrl-C does; whether it exited cleanly.
    pub(crate) fn stop(mut self) -> bool {
        self.server.stop(Duration::from_secs(60))
    }
}

impl Drop for LocalRun {
    /// A failing test still stops the run, and the servers it started in
    /// their own process groups, which would otherwise hold the ports.
    fn drop(&mut self) {
        self.server.stop(Duration::from_secs(60));
        let data = self.work.join(".seckill");
        for file in ["redis/redis.pid", "kafka/node-1/kafka.pid", "payments/payments.pid"] {
            let Ok(pid) = std::fs::read_to_string(data.join(file)) else { continue };
            let _ = Command::new("kill").args(["-KILL", pid.trim()]).status();
        }
    }
}
