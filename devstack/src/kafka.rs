//! Apache Kafka on 127.0.0.1, from the jars Maven Central publishes
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
//! operator or a failure would: stop, SIGKILL or freeze one node, start it
//! again, and move a partition's leadership with Kafka's own tools.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::jvm::{self, Distribution};
use crate::leftover::{stop_leftover, Expected, Leftover};
use crate::process::{free_port, send_signal, Server, StopSignal};
use crate::DevstackError;

/// How long a node may take to open its broker port: a JVM start, log
/// recovery after a crash, and a quorum election, on a busy 2-core machine.
const READY_TIMEOUT: Duration = Duration::from_secs(90);
/// How long a node gets to stop cleanly (a controlled shutdown moves its
/// leaderships away first).
const STOP_GRACE: Duration = Duration::from_secs(30);
/// What `Server` names the log and pid files in a node's directory.
const NAME: &str = "kafka";

/// When a node writes what it acknowledged to disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KafkaDurability {
    /// Kafka's default: the operating system's page cache writes it back;
    /// an acknowledged record survives a broker crash (SIGKILL), not a
    /// machine crash, unless it is also on other replicas.
    PageCache,
    /// `fsync` after every appended batch (`log.flush.interval.messages=1`):
    /// an acknowledged record survives a machine crash on a single node.
    FlushEveryBatch,
}

/// How a cluster is laid out.
#[derive(Clone, Copy, Debug)]
pub struct KafkaSettings {
    /// Nodes, each a broker and a controller (1 or 3, typically).
    pub nodes: usize,
    /// The first node's broker port (0: a free one); the others take free ports.
    pub port: u16,
    /// Heap per node, in MB.
    pub heap_mb: u32,
    pub durability: KafkaDurability,
}

impl KafkaSettings {
    /// One node with a small heap, page-cache durability: the tests.
    pub const SINGLE: Self = Self { nodes: 1, port: 0, heap_mb: 512, durability: KafkaDurability::PageCache };

    /// Three nodes (replication factor 3, `min.insync.replicas=2`): the
    /// replication tests.
    pub const THREE: Self = Self { nodes: 3, port: 0, heap_mb: 256, durability: KafkaDurability::PageCache };

    /// The replication factor of every topic, and of Kafka's own.
    fn replication(&self) -> usize {
        self.nodes.min(3)
    }

    /// Replicas a write with `acks=all` needs: 2 of 3 where there are three.
    fn min_insync(&self) -> usize {
        if self.replication() >= 3 {
            2
        } else {
            1
        }
    }
}

/// One node of the cluster.
#[derive(Debug)]
struct Node {
    id: u32,
    port: u16,
    controller_port: u16,
    dir: PathBuf,
    /// None while stopped or killed.
    server: Option<Server>,
}

impl Node {
    fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
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
        std::fs::create_dir_all(dir).map_err(|source| DevstackError::Spawn { what: "kafka".into(), source })?;
        Self::stop_leftover(dir)?;
        let nodes = Self::layout(dir, settings)?;
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

    fn server_properties(&self, node: &Node) -> String {
        let settings = &self.settings;
        let voters: Vec<String> =
            self.nodes.iter().map(|voter| format!("{}@127.0.0.1:{}", voter.id, voter.controller_port)).collect();
        let replication = settings.replication();
        let min_insync = settings.min_insync();
        let mut text = String::new();
        let mut set = |key: &str, value: &dyn std::fmt::Display| {
            let _ = writeln!(text, "{key}={value}");
        };
        set("process.roles", &"broker,controller");
        set("node.id", &node.id);
        set("controller.quorum.voters", &voters.join(","));
        set(
            "listeners",
            &format!("PLAINTEXT://127.0.0.1:{},CONTROLLER://127.0.0.1:{}", node.port, node.controller_port),
        );
        // 127.0.0.1, not localhost: that may resolve to ::1.
        set("advertised.listeners", &format!("PLAINTEXT://127.0.0.1:{}", node.port));
        set("controller.listener.names", &"CONTROLLER");
        set("inter.broker.listener.name", &"PLAINTEXT");
        set("listener.security.protocol.map", &"CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT");
        set("log.dirs", &node.dir.join("data").display());
        // Kafka's own topics at the cluster's replication (their defaults of
        // 3 and 2 make group commits and transactions fail on one node), and
        // fewer partitions than the 50 default: a group's first commit
        // creates them all.
        set("offsets.topic.replication.factor", &replication);
        set("offsets.topic.num.partitions", &10);
        set("transaction.state.log.replication.factor", &replication);
        set("transaction.state.log.min.isr", &min_insync);
        set("transaction.state.log.num.partitions", &10);
        set("share.coordinator.state.topic.replication.factor", &replication);
        set("share.coordinator.state.topic.min.isr", &min_insync);
        set("default.replication.factor", &replication);
        set("min.insync.replicas", &min_insync);
        // The platform creates its topics with the partitions and configs it
        // wants; a topic appearing because a client named it would hide a bug.
        set("auto.create.topics.enable", &false);
        // A group's first member starts at once (the default waits 3 s).
        set("group.initial.rebalance.delay.ms", &0);
        // Small: nothing here is compacted at volume (the default takes 128 MB).
        set("log.cleaner.dedupe.buffer.size", &(2 * 1024 * 1024));
        // Fewer threads than a production broker's: two cores carry everything.
        set("num.network.threads", &2);
        set("num.io.threads", &4);
        set("num.recovery.threads.per.data.dir", &2);
        if settings.durability == KafkaDurability::FlushEveryBatch {
            set("log.flush.interval.messages", &1);
        }
        text
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
        let server = Server::spawn(&format!("kafka node {}", node.id), command, &node.dir, NAME)?;
        self.nodes[index].server = Some(server);
        Ok(())
    }

    fn wait_node(&mut self, index: usize) -> Result<(), DevstackError> {
        let addr = self.nodes[index].addr();
        match self.nodes[index].server.as_mut() {
            Some(server) => server.wait_ready(addr, READY_TIMEOUT),
            None => Ok(()),
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

    /// The bootstrap servers: every node's `127.0.0.1:PORT`.
    pub fn brokers(&self) -> String {
        self.nodes.iter().map(|node| format!("127.0.0.1:{}", node.port)).collect::<Vec<_>>().join(",")
    }

    /// The number of nodes.
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// Node `index`'s id (`index + 1`).
    pub fn node_id(&self, index: usize) -> u32 {
        self.nodes[index].id
    }

    /// The process id of node `index`, while it runs.
    pub fn node_pid(&self, index: usize) -> Option<u32> {
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

    /// Freezes node `index` (SIGSTOP): it holds its connections and
    /// answers nothing, as a stalled machine would.
    pub fn freeze_node(&self, index: usize) {
        if let Some(pid) = self.node_pid(index) {
            send_signal(pid, "STOP");
        }
    }

    /// Lets a frozen node `index` run again (SIGCONT).
    pub fn thaw_node(&self, index: usize) {
        if let Some(pid) = self.node_pid(index) {
            send_signal(pid, "CONT");
        }
    }

    /// Makes node id `leader` the leader of `topic`'s `partition`, as an
    /// operator would with Kafka's tools: a reassignment that puts it first
    /// in the replica list (the same replicas, so no data moves), then a
    /// preferred-leader election.
    pub fn move_leader(&self, topic: &str, partition: i32, leader: u32) -> Result<(), DevstackError> {
        let mut replicas: Vec<u32> = self.nodes.iter().map(|node| node.id).collect();
        replicas.retain(|&id| id != leader);
        replicas.truncate(self.settings.replication().saturating_sub(1));
        replicas.insert(0, leader);
        let plan = format!(
            r#"{{"version":1,"partitions":[{{"topic":"{topic}","partition":{partition},"replicas":[{}]}}]}}"#,
            replicas.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
        );
        let plan_file = self.dir.join(format!("reassign-{}.json", uuid::Uuid::now_v7().simple()));
        std::fs::write(&plan_file, plan)
            .map_err(|source| DevstackError::Spawn { what: "kafka tools".into(), source })?;
        let bootstrap = self.running_brokers();
        self.tool(&[
            "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
            "--bootstrap-server",
            &bootstrap,
            "--reassignment-json-file",
            &plan_file.to_string_lossy(),
            "--execute",
        ])?;
        // The reassignment completes at once (no new replica), but the
        // election is refused until it has: try for a while.
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let elected = self.tool(&[
                "org.apache.kafka.tools.LeaderElectionCommand",
                "--bootstrap-server",
                &bootstrap,
                "--election-type",
                "PREFERRED",
                "--topic",
                topic,
                "--partition",
                &partition.to_string(),
            ]);
            match elected {
                Ok(output) if !output.contains("Error") && !output.contains("failed") => return Ok(()),
                Ok(output) if output.contains("already the preferred leader") => return Ok(()),
                _ if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(500)),
                Ok(output) => {
                    return Err(DevstackError::Setup(format!("moving the leader of {topic}-{partition}: {output}")))
                }
                Err(error) => return Err(error),
            }
        }
    }

    /// The bootstrap servers of the nodes running now.
    fn running_brokers(&self) -> String {
        self.nodes
            .iter()
            .filter(|node| node.server.is_some())
            .map(|node| format!("127.0.0.1:{}", node.port))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Runs one of Kafka's command-line tools (a main class of the
    /// distribution's jars); returns what it printed.
    fn tool(&self, args: &[&str]) -> Result<String, DevstackError> {
        let mut command = jvm::command(&Distribution::KAFKA, 128)?;
        let log4j = self.nodes[0].dir.join("log4j2.properties");
        command.arg(format!("-Dlog4j2.configurationFile={}", log4j.display())).args(args);
        let output = command.output().map_err(|source| DevstackError::Spawn { what: args[0].to_owned(), source })?;
        let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
        if output.status.success() {
            Ok(text)
        } else {
            Err(DevstackError::Setup(format!("{} failed: {}", args[0], text.trim())))
        }
    }
}

/// Logging for the nodes and the tools: the console (a node's goes to its
/// `kafka.log`), warnings only for the chatty request and state loggers.
const LOG4J2: &str = "\
status = warn
appender.console.type = Console
appender.console.name = STDOUT
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.stdout.ref = STDOUT
logger.request.name = kafka.request.logger
logger.request.level = warn
logger.statechange.name = state.change.logger
logger.statechange.level = warn
";

/// RFC 4648 base64url without padding.
fn base64url(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let value = chunk.iter().enumerate().fold(0u32, |acc, (i, byte)| acc | (u32::from(*byte) << (16 - 8 * i)));
        let symbols = chunk.len() + 1;
        for i in 0..symbols {
            let index = usize::try_from((value >> (18 - 6 * i)) & 63).unwrap_or(0);
            out.push(char::from(ALPHABET[index]));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_ids_are_22_base64url_characters() {
        let id = base64url(&[0xfb; 16]);
        assert_eq!(id.len(), 22);
        assert!(id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'), "{id}");
        assert_eq!(base64url(b"Man"), "TWFu");
        assert_eq!(base64url(b"Ma"), "TWE");
        assert_eq!(base64url(&[0xff, 0xff, 0xff]), "____");
    }

    #[test]
    fn three_nodes_replicate_three_times_and_need_two_in_sync() {
        assert_eq!((KafkaSettings::THREE.replication(), KafkaSettings::THREE.min_insync()), (3, 2));
        assert_eq!((KafkaSettings::SINGLE.replication(), KafkaSettings::SINGLE.min_insync()), (1, 1));
    }
}
