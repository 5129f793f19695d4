//! Everything one Cassandra node is started with, written into its own
//! directory: `cassandra.yaml`, `logback.xml`, the system properties and
//! the JVM options.
//!
//! The install directory only holds the distribution and the one-time Java
//! 17 fixes of `cassandra-env.sh` made by `scripts/setup`; nothing here is
//! written there, so any number of nodes run side by side.

use std::fmt::Write as _;
use std::io;
use std::path::{Path, PathBuf};

/// The ports one node listens on, all on 127.0.0.1.
#[derive(Debug, Clone, Copy)]
pub(super) struct Ports {
    /// CQL native transport: what the bridge connects to.
    pub(super) native: u16,
    /// Internode messaging and gossip; unique, so parallel nodes never meet.
    pub(super) storage: u16,
    pub(super) ssl_storage: u16,
}

/// Heap size: ENVIRONMENT.md's measured 512 MB is plenty for tests.
pub(super) const MAX_HEAP_SIZE: &str = "512M";
/// Young generation size, which `cassandra-env.sh` wants set with the heap.
pub(super) const HEAP_NEWSIZE: &str = "128M";

/// `java.base` packages Cassandra 2.1 and its jamm agent reach into by
/// reflection (jamm measures prepared statements; without these, preparing
/// fails on Java 17).
const OPENED_PACKAGES: &[&str] = &[
    "java.io",
    "java.lang",
    "java.lang.invoke",
    "java.lang.ref",
    "java.lang.reflect",
    "java.math",
    "java.net",
    "java.nio",
    "java.nio.charset",
    "java.security",
    "java.text",
    "java.util",
    "java.util.concurrent",
    "java.util.concurrent.atomic",
    "java.util.concurrent.locks",
    "java.util.regex",
    "jdk.internal.misc",
    "jdk.internal.ref",
    "sun.nio.ch",
    "sun.nio.cs",
];

/// Writes the node's configuration into `dir` and creates its data
/// directories; returns the path of `cassandra.yaml`.
pub(super) fn write(dir: &Path, ports: Ports) -> io::Result<PathBuf> {
    for sub in ["data", "commitlog", "saved_caches", "logs"] {
        std::fs::create_dir_all(dir.join(sub))?;
    }
    let yaml = dir.join("cassandra.yaml");
    std::fs::write(&yaml, cassandra_yaml(dir, ports))?;
    std::fs::write(dir.join("logback.xml"), LOGBACK_XML)?;
    Ok(yaml)
}

/// `-D` properties for `bin/cassandra`; given after its own, so they win.
pub(super) fn system_properties(dir: &Path, yaml: &Path) -> Vec<String> {
    vec![
        format!("-Dcassandra.config=file://{}", yaml.display()),
        format!("-Dlogback.configurationFile={}", dir.join("logback.xml").display()),
        format!("-Dcassandra.logdir={}", dir.join("logs").display()),
        format!("-Dcassandra.storagedir={}", dir.display()),
        // A single seed node has nobody to wait for.
        "-Dcassandra.skip_wait_for_gossip_to_settle=0".to_owned(),
        // No fsync of the schema tables: DDL in tests is several times faster.
        "-Dcassandra.unsafesystem=true".to_owned(),
    ]
}

/// For short-lived test nodes on two shared cores: the quick C1 compiler
/// only, and the single-threaded collector. Measured here: start-up 3.1 s
/// instead of 4.1-4.4 s, and about 40% less CPU over the test suite.
const TEST_JVM_OPTIONS: &str = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC";

/// `JVM_EXTRA_OPTS`, appended by `cassandra-env.sh` to its own options.
pub(super) fn jvm_extra_opts() -> String {
    let mut options = String::from(TEST_JVM_OPTIONS);
    for package in OPENED_PACKAGES {
        let _ = write!(options, " --add-opens=java.base/{package}=ALL-UNNAMED");
    }
    options
}

fn cassandra_yaml(dir: &Path, ports: Ports) -> String {
    let dir = dir.display();
    let Ports { native, storage, ssl_storage } = ports;
    format!(
        "# One single-node test cluster, written by seckill-cqltest.
cluster_name: seckill-test
num_tokens: 1
partitioner: org.apache.cassandra.dht.Murmur3Partitioner
endpoint_snitch: SimpleSnitch
seed_provider:
  - class_name: org.apache.cassandra.locator.SimpleSeedProvider
    parameters:
      - seeds: \"127.0.0.1\"
listen_address: 127.0.0.1
rpc_address: 127.0.0.1
storage_port: {storage}
ssl_storage_port: {ssl_storage}
start_native_transport: true
native_transport_port: {native}
start_rpc: false
data_file_directories:
  - {dir}/data
commitlog_directory: {dir}/commitlog
saved_caches_directory: {dir}/saved_caches
commitlog_sync: periodic
commitlog_sync_period_in_ms: 10000
# The largest mutation a node accepts is half a segment: 512 KiB here, as
# against 16 MiB with production defaults, so a write that only a production
# workload makes too large is refused at test sizes too.
commitlog_segment_size_in_mb: 1
# Java 17 cannot unmap memory-mapped files the way 2.1 does.
disk_access_mode: standard
auto_snapshot: false
hinted_handoff_enabled: false
concurrent_compactors: 1
memtable_flush_writers: 1
# Generous timeouts: tests share two cores with builds and other nodes.
request_timeout_in_ms: 20000
read_request_timeout_in_ms: 20000
range_request_timeout_in_ms: 20000
write_request_timeout_in_ms: 20000
counter_write_request_timeout_in_ms: 20000
cas_contention_timeout_in_ms: 10000
truncate_request_timeout_in_ms: 60000
"
    )
}

/// INFO and above, to the log `Server` captures: the npm package's
/// own logback.xml logs everything at DEBUG.
const LOGBACK_XML: &str = r#"<configuration>
  <appender name="STDOUT" class="ch.qos.logback.core.ConsoleAppender">
    <encoder>
      <pattern>%-5level %date{HH:mm:ss,SSS} [%thread] %logger{0} %msg%n</pattern>
    </encoder>
  </appender>
  <root level="INFO">
    <appender-ref ref="STDOUT" />
  </root>
</configuration>
"#;
