//! One Apache Cassandra 5.0 node on 127.0.0.1 (or on a test host of its
//! own), for the tests of the CQL stores: the real server the scylla driver
//! (protocol v4) talks to directly.
//!
//! No ScyllaDB can be installed on these machines; Cassandra is the jars
//! Maven Central publishes ([`Distribution::CASSANDRA`]), run here without
//! its shell scripts: `java` with the options of Cassandra's own
//! `conf/jvm17-server.options` and a `cassandra.yaml` written into the node's
//! directory, on free ports, so any number of nodes run side by side. The
//! node runs in its own process group, killed whole when its handle is
//! dropped: test data is thrown away, nothing needs a clean shutdown.
//!
//! Its commit log segments are 1 MiB, so it refuses mutations over 512 KiB
//! (half a segment), as a production node refuses those over 16 MiB: a
//! write that only a production workload would make too large is refused at
//! test sizes too (the stores' bounded batches are tested against that).

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::jvm::{self, Distribution};
use crate::process::{free_port, Server};
use crate::DevstackError;

/// The name `Server` gives the log and pid files in the node's directory.
const NAME: &str = "cassandra";
/// Heap of a test node: plenty for the tests' keyspaces.
const HEAP_MB: u32 = 512;
/// How long the node may take to serve CQL: about 15 s on an idle two-core
/// machine; a busy one (builds, other tests) may take several times that.
const READY_TIMEOUT: Duration = Duration::from_secs(120);
/// The log line that says the native transport (CQL) is open.
const READY_LINE: &str = "Starting listening for CQL clients";

/// Cassandra's documented Java 17 module options (`conf/jvm17-server.options`,
/// section JPMS), and Netty's reflective direct buffers.
const JVM17_OPTIONS: &[&str] = &[
    "-Djdk.attach.allowAttachSelf=true",
    "--add-exports=java.base/jdk.internal.misc=ALL-UNNAMED",
    "--add-exports=java.management.rmi/com.sun.jmx.remote.internal.rmi=ALL-UNNAMED",
    "--add-exports=java.rmi/sun.rmi.registry=ALL-UNNAMED",
    "--add-exports=java.rmi/sun.rmi.server=ALL-UNNAMED",
    "--add-exports=java.sql/java.sql=ALL-UNNAMED",
    "--add-exports=java.base/java.lang.ref=ALL-UNNAMED",
    "--add-exports=jdk.unsupported/sun.misc=ALL-UNNAMED",
    "--add-exports=jdk.compiler/com.sun.tools.javac.file=ALL-UNNAMED",
    "--add-exports=jdk.attach/sun.tools.attach=ALL-UNNAMED",
    "--add-opens=java.base/java.lang.module=ALL-UNNAMED",
    "--add-opens=java.base/jdk.internal.loader=ALL-UNNAMED",
    "--add-opens=java.base/jdk.internal.ref=ALL-UNNAMED",
    "--add-opens=java.base/jdk.internal.reflect=ALL-UNNAMED",
    "--add-opens=java.base/jdk.internal.math=ALL-UNNAMED",
    "--add-opens=java.base/jdk.internal.module=ALL-UNNAMED",
    "--add-opens=java.base/jdk.internal.util.jar=ALL-UNNAMED",
    "--add-opens=jdk.management/com.sun.management.internal=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens=java.base/java.io=ALL-UNNAMED",
    "--add-opens=java.base/java.lang.reflect=ALL-UNNAMED",
    "--add-opens=jdk.compiler/com.sun.tools.javac=ALL-UNNAMED",
    "--add-opens=java.base/java.lang=ALL-UNNAMED",
    "--add-opens=java.base/java.util=ALL-UNNAMED",
    "-Dio.netty.tryReflectionSetAccessible=true",
];

/// The address and ports one node listens on.
#[derive(Debug, Clone, Copy)]
struct Ports {
    /// 127.0.0.1, or the test host's address.
    ip: Ipv4Addr,
    /// CQL native transport: what drivers connect to.
    native: u16,
    /// Internode messaging and gossip; unique, so parallel nodes never meet.
    storage: u16,
    /// JMX, local only; its own, as the default 7199 would be shared.
    jmx: u16,
}

/// A running single-node Cassandra; killed when dropped.
#[derive(Debug)]
pub struct Cassandra {
    server: Server,
    addr: SocketAddr,
    dir: PathBuf,
    /// The test host it runs on; None: 127.0.0.1 of this machine.
    host: Option<crate::Host>,
}

impl Cassandra {
    /// Starts a node with its configuration, data and log in `dir`, and
    /// returns once it serves CQL on [`addr`](Self::addr). Blocks (up to a
    /// few minutes on a busy machine).
    pub fn start(dir: &Path) -> Result<Self, DevstackError> {
        let ports = Ports { ip: Ipv4Addr::LOCALHOST, native: free_port(), storage: free_port(), jmx: free_port() };
        Self::start_with(dir, ports, None)
    }

    /// As [`start`](Self::start), on test host `host`, listening on its
    /// address: drivers learn a node's address from the node itself, so a
    /// node other hosts reach must listen where they reach it. The host's
    /// network is its own, so the ports are Cassandra's defaults.
    pub fn start_on(host: &crate::Host, dir: &Path) -> Result<Self, DevstackError> {
        let ports = Ports { ip: host.ip(), native: 9042, storage: 7000, jmx: 7199 };
        Self::start_with(dir, ports, Some(host))
    }

    fn start_with(dir: &Path, ports: Ports, host: Option<&crate::Host>) -> Result<Self, DevstackError> {
        let started = Instant::now();
        let libs = Distribution::CASSANDRA.libs()?;
        let config_error = |source| DevstackError::Spawn { what: "cassandra".into(), source };
        // The configuration names its directories by absolute paths.
        let dir = &std::path::absolute(dir).map_err(config_error)?;
        write_config(dir, ports).map_err(config_error)?;
        let mut command = jvm::command(&Distribution::CASSANDRA, HEAP_MB)?;
        command
            .args(["-XX:+UseG1GC", "-XX:+ParallelRefProcEnabled", "-XX:MaxTenuringThreshold=1"])
            .args(JVM17_OPTIONS)
            .arg(format!("-javaagent:{}", libs.join("jamm-0.4.0.jar").display()))
            .args(system_properties(dir, ports))
            .arg("org.apache.cassandra.service.CassandraDaemon");
        let command = match host {
            Some(host) => host.wrap(&command),
            None => command,
        };
        let server = Server::spawn("cassandra", command, dir, NAME)?;
        // From here on a failure drops `cassandra`, which kills the node.
        let mut cassandra =
            Self { server, addr: SocketAddr::from((ports.ip, ports.native)), dir: dir.to_owned(), host: host.cloned() };
        cassandra.wait_for_cql()?;
        tracing::info!(addr = %cassandra.addr, elapsed = ?started.elapsed(), "Cassandra is ready.");
        Ok(cassandra)
    }

    /// The native-transport (CQL) address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The JVM's process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.server.pid()
    }

    /// The node's console log.
    pub fn log(&self) -> PathBuf {
        self.dir.join(format!("{NAME}.log"))
    }

    /// Waits for the log to say the native transport is open and for its
    /// port to accept a connection; fails at once if the JVM exits.
    fn wait_for_cql(&mut self) -> Result<(), DevstackError> {
        let deadline = Instant::now() + READY_TIMEOUT;
        let log = self.log();
        while Instant::now() < deadline {
            self.server.check_running()?;
            if std::fs::read_to_string(&log).is_ok_and(|text| text.contains(READY_LINE)) {
                // Listening, by its log: that the port is its own, not a
                // process that took it first.
                let left = deadline.saturating_duration_since(Instant::now()).max(Duration::from_secs(1));
                return match &self.host {
                    Some(host) => host.wait_listening(&mut self.server, self.addr.port(), left),
                    None => self.server.wait_ready(self.addr, left),
                };
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let log = crate::process::LogEnd::of(&log);
        Err(DevstackError::NotReady { what: "cassandra (CQL)".into(), addr: self.addr, timeout: READY_TIMEOUT, log })
    }
}

impl Drop for Cassandra {
    fn drop(&mut self) {
        // `Server` runs the node in its own process group, whose id is the
        // JVM's pid: kill the group, then let `Server` reap the JVM.
        if let Some(pid) = self.pid() {
            let group = format!("-{pid}");
            let _ = Command::new("kill").args(["-KILL", "--", &group]).stderr(Stdio::null()).status();
        }
        self.server.kill();
    }
}

/// `-D` properties: where the configuration is, and start-up shortcuts for
/// a node alone.
fn system_properties(dir: &Path, ports: Ports) -> Vec<String> {
    vec![
        format!("-Dcassandra.config=file://{}", dir.join("cassandra.yaml").display()),
        format!("-Dcassandra.storagedir={}", dir.join("data").display()),
        format!("-Dlogback.configurationFile={}", dir.join("logback.xml").display()),
        format!("-Dcassandra.jmx.local.port={}", ports.jmx),
        "-Dcassandra-foreground=yes".to_owned(),
        // A single seed node has nobody to wait for.
        "-Dcassandra.skip_wait_for_gossip_to_settle=0".to_owned(),
        "-Dcassandra.initial_token=0".to_owned(),
        // No fsync of the system tables: DDL (a keyspace per test) is faster.
        "-Dcassandra.unsafesystem=true".to_owned(),
    ]
}

/// Writes `cassandra.yaml` and `logback.xml` into `dir` and creates the
/// data directories.
fn write_config(dir: &Path, ports: Ports) -> std::io::Result<()> {
    for sub in ["data", "commitlog", "saved_caches", "hints", "cdc_raw"] {
        std::fs::create_dir_all(dir.join(sub))?;
    }
    std::fs::write(dir.join("cassandra.yaml"), cassandra_yaml(dir, ports))?;
    std::fs::write(dir.join("logback.xml"), LOGBACK_XML)
}

fn cassandra_yaml(dir: &Path, ports: Ports) -> String {
    let dir = dir.display();
    let Ports { ip, native, storage, .. } = ports;
    format!(
        "# One single-node test cluster, written by seckill-devstack.
cluster_name: seckill-test
num_tokens: 1
initial_token: 0
partitioner: org.apache.cassandra.dht.Murmur3Partitioner
endpoint_snitch: SimpleSnitch
seed_provider:
  - class_name: org.apache.cassandra.locator.SimpleSeedProvider
    parameters:
      - seeds: \"{ip}:{storage}\"
listen_address: {ip}
rpc_address: {ip}
storage_port: {storage}
start_native_transport: true
native_transport_port: {native}
data_file_directories:
  - {dir}/data
commitlog_directory: {dir}/commitlog
saved_caches_directory: {dir}/saved_caches
hints_directory: {dir}/hints
cdc_raw_directory: {dir}/cdc_raw
commitlog_sync: periodic
commitlog_sync_period: 10000ms
# The largest mutation a node accepts is half a segment: 512 KiB here, as
# against 16 MiB with production defaults, so a write that only a production
# workload makes too large is refused at test sizes too.
commitlog_segment_size: 1MiB
auto_snapshot: false
hinted_handoff_enabled: false
concurrent_reads: 8
concurrent_writes: 8
concurrent_counter_writes: 8
concurrent_compactors: 1
memtable_flush_writers: 1
memtable_heap_space: 64MiB
# Generous timeouts: tests share two cores with builds.
request_timeout: 20000ms
read_request_timeout: 20000ms
range_request_timeout: 20000ms
write_request_timeout: 20000ms
counter_write_request_timeout: 20000ms
cas_contention_timeout: 10000ms
truncate_request_timeout: 60000ms
"
    )
}

/// INFO and above, to the console `Server` captures in the log.
const LOGBACK_XML: &str = r#"<configuration>
  <appender name="STDOUT" class="ch.qos.logback.core.ConsoleAppender">
    <encoder>
      <pattern>%-5level %date{HH:mm:ss.SSS} [%thread] %logger{0} %msg%n</pattern>
    </encoder>
  </appender>
  <root level="INFO">
    <appender-ref ref="STDOUT" />
  </root>
</configuration>
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_yaml_bounds_mutations_and_names_the_ports() {
        let ports = Ports { ip: Ipv4Addr::LOCALHOST, native: 19042, storage: 17000, jmx: 17199 };
        let yaml = cassandra_yaml(Path::new("/tmp/node"), ports);
        for line in [
            "commitlog_segment_size: 1MiB",
            "native_transport_port: 19042",
            "storage_port: 17000",
            "- seeds: \"127.0.0.1:17000\"",
            "commitlog_directory: /tmp/node/commitlog",
        ] {
            assert!(yaml.lines().any(|l| l.trim() == line), "{line} in\n{yaml}");
        }
    }
}
