//! Apache Kafka on 127.0.0.1 (or each node on a test host of its own,
//! [`Kafka::start_on`]), from the jars Maven Central publishes
//! ([`Distribution::KAFKA`]), in KRaft mode: one node (the local run, the
//! tests) or several (the replication tests), each a combined broker and
//! controller, all of them voters of the metadata quorum.
//!
//! A node's directory holds its `server.properties`, `log4j2.properties`,
//! its log (`kafka.log`), its pid file and its data (`data/`, formatted by
//! `kafka.tools.StorageTool` on the first start only, with the cluster id
//! kept in `cluster.id` so every later start and every node agree).
//!
//! Besides starting and stopping, it does to a running cluster what an
//! operator or a failure would: stop or SIGKILL one node, start it again,
//! and move a partition's leadership with Kafka's own tools.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

mod config;
mod settings;
mod tools;

use config::{base64url, LOG4J2};
pub use settings::{KafkaDurability, KafkaSettings};

use crate::jvm::{self, Distribution};
use crate::leftover::{stop_leftover, Expected, Leftover};
use crate::process::{free_port, Server, StopSignal};
use crate::DevstackError;

/// How long a node may take to open its broker port: a JVM start, log
/// recovery after a crash, and a quorum election, on a busy 2-core machine.
const READY_TIMEOUT: Duration = Duration::from_secs(90);
/// How long a node gets to stop cleanly (a controlled shutdown moves its
/// leaderships away first).
const STOP_GRACE: Duration = Duration::from_secs(30);
/// What `Server` names the log and pid files in a node's directory.
const NAME: &str = "kafka";

/// One node of the cluster.
#[derive(Debug)]
struct Node {
    id: u32,
    port: u16,
    controller_port: u16,
    dir: PathBuf,
    /// None while stopped or killed.
    server: Option<Server>,
    /// The test host it runs on (None: 127.0.0.1 of this machine).
    host: Option<crate::Host>,
}

impl Node {
    fn ip(&self) -> std::net::Ipv4Addr {
        self.host.as_ref().map_or(std::net::Ipv4Addr::LOCALHOST, crate::Host::ip)
    }

    fn addr(&self) -> SocketAddr {
        SocketAddr::from((self.ip(), self.port))
    }
}

/// A running Kafka cluster; every node is stopped (SIGKILL) when dropped.
#[derive(Debug)]
pub struct Kafka {
    nodes: Vec<Node>,
    settings: KafkaSettings,
    dir: PathBuf,
}

impl Kafka {
    /// Starts a cluster as `settings` says, in `dir` (one sub-directory a
    /// node), and returns once every node's broker port accepts
    /// connections. Nodes an earlier run left running in `dir` are stopped
    /// first; their data is kept and used again, ports included.
    pub fn start(dir: &Path, settings: KafkaSettings) -> Result<Self, DevstackError> {
        Self::start_with(dir, settings, &[])
    }

    /// As [`start`](Self::start), node `i` on test host `hosts[i]`
    /// (`settings.nodes` of them), listening on the host's address.
    pub fn start_on(hosts: &[crate::Host], dir: &Path, settings: KafkaSettings) -> Result<Self, DevstackError> {
        if hosts.len() != settings.nodes {
            return Err(DevstackError::Setup(format!("{} hosts for {} Kafka nodes", hosts.len(), settings.nodes)));
        }
        Self::start_with(dir, settings, hosts)
    }

    fn start_with(dir: &Path, settings: KafkaSettings, hosts: &[crate::Host]) -> Result<Self, DevstackError> {
        std::fs::create_dir_all(dir).map_err(|source| DevstackError::Spawn { what: "kafka".into(), source })?;
        Self::stop_leftover(dir)?;
        let mut nodes = Self::layout(dir, settings)?;
        for (node, host) in nodes.iter_mut().zip(hosts) {
            node.host = Some(host.clone());
        }
        let mut kafka = Self { nodes, settings, dir: dir.to_owned() };
        let cluster_id = kafka.cluster_id()?;
        for index in 0..kafka.nodes.len() {
            kafka.write_config(index)?;
        }
        kafka.format(&cluster_id)?;
        for index in 0..kafka.nodes.len() {
            kafka.spawn_node(index)?;
        }
        // Together: a node's broker waits for a quorum of controllers.
        for index in 0..kafka.nodes.len() {
            kafka.wait_node(index)?;
        }
        tracing::info!(brokers = %kafka.brokers(), dir = %dir.display(), "Kafka is up.");
        Ok(kafka)
    }

    /// The nodes' ids, directories and ports: those an earlier start
    /// recorded in `ports` (the quorum's voters are fixed at format time),
    /// else free ones.
    fn layout(dir: &Path, settings: KafkaSettings) -> Result<Vec<Node>, DevstackError> {
        let record = dir.join("ports");
        let recorded: Vec<(u16, u16)> = std::fs::read_to_string(&record)
            .unwrap_or_default()
            .lines()
            .filter_map(|line| line.split_once(' '))
            .filter_map(|(port, controller)| Some((port.parse().ok()?, controller.parse().ok()?)))
            .collect();
        let ports: Vec<(u16, u16)> = if recorded.len() == settings.nodes {
            recorded
        } else {
            (0..settings.nodes)
                .map(|index| {
                    let port = if index == 0 && settings.port != 0 { settings.port } else { free_port() };
                    (port, free_port())
                })
                .collect()
        };
        let text: String = ports.iter().map(|(port, controller)| format!("{port} {controller}\n")).collect();
        std::fs::write(&record, text).map_err(|source| DevstackError::Spawn { what: "kafka".into(), source })?;
        Ok(ports
            .into_iter()
            .enumerate()
            .map(|(index, (port, controller_port))| Node {
                id: u32::try_from(index + 1).unwrap_or(u32::MAX),
                port,
                controller_port,
                dir: dir.join(format!("node-{}", index + 1)),
                server: None,
                host: None,
            })
            .collect())
    }

    /// The cluster id every node is formatted with, made once and kept.
    fn cluster_id(&self) -> Result<String, DevstackError> {
        let file = self.dir.join("cluster.id");
        if let Ok(id) = std::fs::read_to_string(&file) {
            return Ok(id.trim().to_owned());
        }
        // 16 bytes, base64url without padding: the form `random-uuid` prints.
        let id = base64url(uuid::Uuid::now_v7().as_bytes());
        std::fs::write(&file, &id).map_err(|source| DevstackError::Spawn { what: "kafka".into(), source })?;
        Ok(id)
    }

    fn write_config(&self, index: usize) -> Result<(), DevstackError> {
        let node = &self.nodes[index];
        let io_error = |source| DevstackError::Spawn { what: format!("kafka node {}", node.id), source };
        std::fs::create_dir_all(&node.dir).map_err(io_error)?;
        std::fs::write(node.dir.join("server.properties"), self.server_properties(node)).map_err(io_error)?;
        std::fs::write(node.dir.join("log4j2.properties"), LOG4J2).map_err(io_error)
    }

    /// Formats every node not formatted yet, in parallel (each is a JVM start).
    fn format(&self, cluster_id: &str) -> Result<(), DevstackError> {
        let mut running = Vec::new();
        for node in &self.nodes {
            if node.dir.join("data/meta.properties").is_file() {
                continue;
            }
            let log_path = node.dir.join("format.log");
            let log = std::fs::File::create(&log_path)
                .map_err(|source| DevstackError::Spawn { what: "kafka storage format".into(), source })?;
            let mut command = jvm::command(&Distribution::KAFKA, 256)?;
            command
                .arg(format!("-Dlog4j2.configurationFile={}", node.dir.join("log4j2.properties").display()))
                .arg("kafka.tools.StorageTool")
                .args(["format", "-t", cluster_id, "-c"])
                .arg(node.dir.join("server.properties"))
                .arg("--ignore-formatted")
                .stdin(std::process::Stdio::null())
                .stdout(log.try_clone().map_err(|source| DevstackError::Spawn { what: "kafka".into(), source })?)
                .stderr(log);
            let child = command
                .spawn()
                .map_err(|source| DevstackError::Spawn { what: "kafka storage format".into(), source })?;
            running.push((child, log_path));
        }
        for (mut child, log) in running {
            let status =
                child.wait().map_err(|source| DevstackError::Spawn { what: "kafka storage format".into(), source })?;
            if !status.success() {
                return Err(DevstackError::Failed { what: "formatting Kafka's storage".into(), log });
            }
        }
        Ok(())
    }

    fn spawn_node(&mut self, index: usize) -> Result<(), DevstackError> {
        let node = &self.nodes[index];
        let mut command = jvm::command(&Distribution::KAFKA, self.settings.heap_mb)?;
        command
            .args(["-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:+ExplicitGCInvokesConcurrent"])
            .arg(format!("-Dlog4j2.configurationFile={}", node.dir.join("log4j2.properties").display()))
            .arg("kafka.Kafka")
            .arg(node.dir.join("server.properties"));
        if let Some(host) = &node.host {
            command = host.wrap(&command);
        }
        let server = Server::spawn(&format!("kafka node {}", node.id), command, &node.dir, NAME)?;
        self.nodes[index].server = Some(server);
        Ok(())
    }

    fn wait_node(&mut self, index: usize) -> Result<(), DevstackError> {
        let (addr, port, host) = (self.nodes[index].addr(), self.nodes[index].port, self.nodes[index].host.clone());
        match (self.nodes[index].server.as_mut(), host) {
            (Some(server), Some(host)) => host.wait_listening(server, port, READY_TIMEOUT),
            (Some(server), None) => server.wait_ready(addr, READY_TIMEOUT),
            (None, _) => Ok(()),
        }
    }

    /// Stops Kafka nodes that an earlier run started under `dir` and left
    /// running (their parent was killed); says in the log what it found.
    pub fn stop_leftover(dir: &Path) -> Result<Leftover, DevstackError> {
        let programs: Vec<PathBuf> = std::iter::once(PathBuf::from("java")).chain(jvm::java().ok()).collect();
        let mut found = Leftover::None;
        let Ok(entries) = std::fs::read_dir(dir) else { return Ok(found) };
        for entry in entries.flatten() {
            let node_dir = entry.path();
            if !node_dir.join(format!("{NAME}.pid")).is_file() {
                continue;
            }
            let expected = Expected { what: "kafka", programs: &programs, cwd: &node_dir, stop: StopSignal::Term };
            match stop_leftover(&node_dir.join(format!("{NAME}.pid")), &expected)? {
                Leftover::None => {}
                other if found == Leftover::None || matches!(other, Leftover::Stopped { .. }) => found = other,
                _ => {}
            }
        }
        Ok(found)
    }

    /// The bootstrap servers: every node's `127.0.0.1:PORT` (its test
    /// host's address, on one).
    pub fn brokers(&self) -> String {
        self.nodes.iter().map(|node| node.addr().to_string()).collect::<Vec<_>>().join(",")
    }

    /// The process id of node `index`, while it runs.
    fn node_pid(&self, index: usize) -> Option<u32> {
        self.nodes[index].server.as_ref().and_then(Server::pid)
    }

    /// The first node's process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.node_pid(0)
    }

    /// The pids of every running node.
    pub fn pids(&self) -> Vec<u32> {
        self.nodes.iter().filter_map(|node| node.server.as_ref().and_then(Server::pid)).collect()
    }

    /// Node `index`'s console log.
    pub fn node_log(&self, index: usize) -> PathBuf {
        self.nodes[index].dir.join(format!("{NAME}.log"))
    }

    /// Stops every node cleanly (SIGTERM: a controlled shutdown), the
    /// last quorum member last. Returns whether all exited by themselves.
    pub fn stop(&mut self) -> bool {
        // Every node is stopped, whatever an earlier one did.
        let clean: Vec<bool> = (0..self.nodes.len()).rev().map(|index| self.stop_node(index)).collect();
        clean.into_iter().all(|clean| clean)
    }

    /// Kills every node at once (SIGKILL), as a crash would.
    pub fn kill(&mut self) {
        for index in 0..self.nodes.len() {
            self.kill_node(index);
        }
    }

    /// Starts every stopped node again on the same ports and data, and
    /// waits for all of them.
    pub fn start_again(&mut self) -> Result<(), DevstackError> {
        let stopped: Vec<usize> = (0..self.nodes.len()).filter(|&index| self.nodes[index].server.is_none()).collect();
        for &index in &stopped {
            self.spawn_node(index)?;
        }
        for &index in &stopped {
            self.wait_node(index)?;
        }
        Ok(())
    }

    /// Stops node `index` cleanly; returns whether it exited by itself.
    pub fn stop_node(&mut self, index: usize) -> bool {
        self.nodes[index].server.take().is_some_and(|mut server| server.stop(STOP_GRACE))
    }

    /// Kills node `index` at once (SIGKILL).
    pub fn kill_node(&mut self, index: usize) {
        if let Some(mut server) = self.nodes[index].server.take() {
            server.kill();
        }
    }

    /// Starts node `index` again (stopped or killed) and waits for it.
    pub fn start_node(&mut self, index: usize) -> Result<(), DevstackError> {
        if self.nodes[index].server.is_none() {
            self.spawn_node(index)?;
        }
        self.wait_node(index)
    }
}
