//! A local Redis Cluster: `redis-server --cluster-enabled yes` nodes on free
//! ports, joined by `redis-cli --cluster create`, for the tests and the
//! benchmark. Each node keeps its data in memory only (the failover test is
//! about what replication carries, not the disk).
//!
//! Besides starting and stopping, it does to a running cluster what an
//! operator (or a failure) would: kill or freeze a node, promote a replica
//! (`CLUSTER FAILOVER TAKEOVER`), and move a hash slot to another master
//! the way `redis-cli --cluster reshard` does (`CLUSTER SETSLOT … IMPORTING
//! / MIGRATING`, `MIGRATE` key by key, `CLUSTER SETSLOT … NODE`).
//!
//! [`shared_test_cluster`] starts one cluster per test process, stopped by
//! a watchdog when the process exits; tests share it with a key prefix each.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::process::{find_binary, free_port, send_signal, Server};
use crate::watchdog::Watchdog;
use crate::{DevstackError, TempDir};

/// How long the cluster may take to agree on its configuration.
const SETTLE: Duration = Duration::from_secs(30);
/// How long a node may be unreachable before the others mark it failed
/// (short: a test kills masters).
const NODE_TIMEOUT_MS: u32 = 2_000;

/// One node of the cluster.
#[derive(Debug)]
struct Node {
    port: u16,
    /// None once killed.
    server: Option<Server>,
}

/// A running Redis Cluster; every node is stopped when dropped.
#[derive(Debug)]
pub struct RedisCluster {
    nodes: Vec<Node>,
    dir: PathBuf,
    cli: PathBuf,
}

impl RedisCluster {
    /// Starts `masters` masters with `replicas` replicas each, in `dir`,
    /// and waits until every node reports `cluster_state:ok`, every slot is
    /// served and the nodes agree on who serves it.
    pub fn start(dir: &Path, masters: usize, replicas: usize) -> Result<Self, DevstackError> {
        let server = find_binary("redis-server").ok_or_else(|| DevstackError::NotInstalled("redis-server".into()))?;
        let cli = find_binary("redis-cli").ok_or_else(|| DevstackError::NotInstalled("redis-cli".into()))?;
        let mut nodes = Vec::new();
        for _ in 0..masters * (1 + replicas) {
            let port = free_port();
            let node_dir = dir.join(format!("node-{port}"));
            std::fs::create_dir_all(&node_dir)
                .map_err(|source| DevstackError::Spawn { what: "a Redis Cluster node".into(), source })?;
            let mut command = Command::new(&server);
            command
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--daemonize", "no"])
                .args(["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"])
                .args(["--cluster-node-timeout", &NODE_TIMEOUT_MS.to_string()])
                .args(["--save", "", "--appendonly", "no", "--protected-mode", "yes"])
                .args(["--dir", &node_dir.to_string_lossy()]);
            let addr = SocketAddr::from(([127, 0, 0, 1], port));
            let server =
                Server::start("a Redis Cluster node", command, &node_dir, "redis", addr, crate::redis::READY_WITHIN)?;
            nodes.push(Node { port, server: Some(server) });
        }
        let cluster = Self { nodes, dir: dir.to_owned(), cli };
        let mut create = vec!["--cluster".to_owned(), "create".to_owned()];
        create.extend(cluster.nodes.iter().map(|node| format!("127.0.0.1:{}", node.port)));
        create.extend(["--cluster-replicas".to_owned(), replicas.to_string(), "--cluster-yes".to_owned()]);
        cluster.cli_args(&create)?;
        cluster.wait_settled(masters * (1 + replicas))?;
        if replicas > 0 {
            cluster.wait_replicas_linked()?;
        }
        Ok(cluster)
    }

    /// `redis://127.0.0.1:PORT` of every node alive: the seed nodes.
    pub fn seed_urls(&self) -> Vec<String> {
        self.alive().map(|port| format!("redis://127.0.0.1:{port}")).collect()
    }

    /// The ports of the nodes alive.
    pub fn ports(&self) -> Vec<u16> {
        self.alive().collect()
    }

    fn alive(&self) -> impl Iterator<Item = u16> + '_ {
        self.nodes.iter().filter(|node| node.server.is_some()).map(|node| node.port)
    }

    /// The process id of the node on `port`, while it runs.
    pub fn pid(&self, port: u16) -> Option<u32> {
        self.nodes.iter().find(|node| node.port == port)?.server.as_ref()?.pid()
    }

    /// The ports of the masters serving slots, as the node on the first
    /// live port sees them.
    pub fn masters(&self) -> Result<Vec<u16>, DevstackError> {
        let mut masters: Vec<u16> =
            self.cluster_nodes()?.into_iter().filter_map(|n| n.serves.then_some(n.port)).collect();
        masters.sort_unstable();
        Ok(masters)
    }

    /// The port of the master serving `slot`.
    pub fn master_of(&self, slot: u16) -> Result<u16, DevstackError> {
        let nodes = self.cluster_nodes()?;
        nodes
            .iter()
            .find(|node| node.slots.iter().any(|(first, last)| (*first..=*last).contains(&slot)))
            .map(|node| node.port)
            .ok_or_else(|| DevstackError::Setup(format!("no master serves slot {slot}")))
    }

    /// The port of a replica of the master on `master`, if it has one.
    pub fn replica_of(&self, master: u16) -> Result<Option<u16>, DevstackError> {
        let nodes = self.cluster_nodes()?;
        let Some(id) = nodes.iter().find(|node| node.port == master).map(|node| node.id.clone()) else {
            return Ok(None);
        };
        Ok(nodes.iter().find(|node| node.master_id.as_deref() == Some(id.as_str())).map(|node| node.port))
    }

    /// Kills the node on `port` at once (SIGKILL), as a crash would.
    pub fn kill(&mut self, port: u16) {
        if let Some(node) = self.nodes.iter_mut().find(|node| node.port == port) {
            if let Some(mut server) = node.server.take() {
                server.kill();
            }
        }
    }

    /// Freezes the node on `port` (SIGSTOP): it answers nobody, replicates
    /// nothing, until [`resume`](Self::resume).
    pub fn pause(&self, port: u16) {
        if let Some(pid) = self.pid(port) {
            send_signal(pid, "STOP");
        }
    }

    /// Freezes the replica on `replica` and cuts its link to `master`, so
    /// that nothing the master writes from now on reaches it, not even into
    /// its socket buffer (freezing alone would let the kernel keep receiving
    /// the replication stream for the frozen process). The replica cannot
    /// reconnect while frozen: the master's later writes exist on the master
    /// only, as when a master dies before replicating its last writes.
    pub fn cut_off_replica(&self, master: u16, replica: u16) -> Result<(), DevstackError> {
        self.pause(replica);
        self.cli(master, &["CLIENT", "KILL", "TYPE", "replica"])?;
        Ok(())
    }

    /// Waits until the replica on `replica` has everything the master on
    /// `master` wrote so far (their replication offsets agree).
    pub fn wait_replicated(&self, master: u16, replica: u16) -> Result<(), DevstackError> {
        let offset = |port: u16, field: &str| -> Result<Option<u64>, DevstackError> {
            let info = self.cli(port, &["INFO", "replication"])?;
            Ok(info.lines().find_map(|line| line.trim().strip_prefix(field)?.strip_prefix(':')?.parse().ok()))
        };
        let deadline = Instant::now() + SETTLE;
        while Instant::now() < deadline {
            let written = offset(master, "master_repl_offset")?;
            if written.is_some() && offset(replica, "slave_repl_offset")? == written {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Err(DevstackError::Setup(format!("the replica on port {replica} did not catch up within {SETTLE:?}")))
    }

    /// Lets a frozen node run again (SIGCONT).
    pub fn resume(&self, port: u16) {
        if let Some(pid) = self.pid(port) {
            send_signal(pid, "CONT");
        }
    }

    /// Promotes the replica on `replica` to master without its master's
    /// agreement (`CLUSTER FAILOVER TAKEOVER`, as after the master died),
    /// and waits until the live nodes see it serving the slots and report
    /// `cluster_state:ok`.
    pub fn take_over(&self, replica: u16) -> Result<(), DevstackError> {
        self.cli(replica, &["CLUSTER", "FAILOVER", "TAKEOVER"])?;
        let deadline = Instant::now() + SETTLE;
        while Instant::now() < deadline {
            let promoted = self
                .cluster_nodes_from(replica)
                .is_ok_and(|nodes| nodes.iter().any(|node| node.port == replica && node.serves));
            if promoted && self.alive().all(|port| self.state_ok(port)) {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err(DevstackError::Setup(format!("the replica on port {replica} did not take over within {SETTLE:?}")))
    }

    /// Moves `slot` to the master on `to`, as a resharding does: marks it
    /// importing there and migrating at its master, moves its keys one
    /// `MIGRATE` at a time (a live sale meets the slot half moved: `ASK`
    /// redirections, `TRYAGAIN` for calls whose keys are split), then gives
    /// it to `to` on every master.
    pub fn migrate_slot(&self, slot: u16, to: u16) -> Result<(), DevstackError> {
        let from = self.master_of(slot)?;
        if from == to {
            return Ok(());
        }
        let from_id = self.cli(from, &["CLUSTER", "MYID"])?;
        let to_id = self.cli(to, &["CLUSTER", "MYID"])?;
        let slot_arg = slot.to_string();
        self.cli(to, &["CLUSTER", "SETSLOT", &slot_arg, "IMPORTING", &from_id])?;
        self.cli(from, &["CLUSTER", "SETSLOT", &slot_arg, "MIGRATING", &to_id])?;
        loop {
            let keys = self.cli(from, &["CLUSTER", "GETKEYSINSLOT", &slot_arg, "1"])?;
            let Some(key) = keys.lines().map(str::trim).find(|line| !line.is_empty()) else { break };
            let key = key.to_owned();
            let to_port = to.to_string();
            self.cli(from, &["MIGRATE", "127.0.0.1", &to_port, "", "0", "5000", "KEYS", &key])?;
        }
        for port in self.masters()? {
            self.cli(port, &["CLUSTER", "SETSLOT", &slot_arg, "NODE", &to_id])?;
        }
        let deadline = Instant::now() + SETTLE;
        while Instant::now() < deadline {
            if self.alive().all(|port| self.cluster_nodes_from(port).is_ok_and(|nodes| serves(&nodes, to, slot))) {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err(DevstackError::Setup(format!("slot {slot} was not seen at port {to} by every node within {SETTLE:?}")))
    }

    /// Runs `redis-cli -p PORT ARGS…` and returns its output, trimmed.
    pub fn cli(&self, port: u16, args: &[&str]) -> Result<String, DevstackError> {
        let mut all = vec!["-p".to_owned(), port.to_string()];
        all.extend(args.iter().map(|arg| (*arg).to_owned()));
        self.cli_args(&all)
    }

    fn cli_args(&self, args: &[String]) -> Result<String, DevstackError> {
        let output = Command::new(&self.cli)
            .args(args)
            .output()
            .map_err(|source| DevstackError::Spawn { what: "redis-cli".into(), source })?;
        let stdout = String::from_utf8_lossy(&output.stdout).trim().to_owned();
        let failed = !output.status.success() || stdout.starts_with("ERR") || stdout.starts_with("(error)");
        if failed {
            let stderr = String::from_utf8_lossy(&output.stderr);
            return Err(DevstackError::Setup(format!("redis-cli {} failed: {stdout} {stderr}", args.join(" "))));
        }
        Ok(stdout)
    }

    fn state_ok(&self, port: u16) -> bool {
        self.cli(port, &["CLUSTER", "INFO"])
            .is_ok_and(|info| info.lines().any(|line| line.trim() == "cluster_state:ok"))
    }

    /// Waits until every node is ok, knows `count` nodes and serves all
    /// slots, and all agree on the slot map.
    fn wait_settled(&self, count: usize) -> Result<(), DevstackError> {
        let deadline = Instant::now() + SETTLE;
        let known = format!("cluster_known_nodes:{count}");
        while Instant::now() < deadline {
            let ready = self.alive().all(|port| {
                self.cli(port, &["CLUSTER", "INFO"]).is_ok_and(|info| {
                    let lines: Vec<&str> = info.lines().map(str::trim).collect();
                    lines.contains(&"cluster_state:ok")
                        && lines.contains(&"cluster_slots_ok:16384")
                        && lines.contains(&known.as_str())
                })
            });
            let first = self.alive().next().unwrap_or_default();
            let agreed = ready
                && self
                    .cli_args(&["--cluster".into(), "check".into(), format!("127.0.0.1:{first}")])
                    .is_ok_and(|report| report.contains("All nodes agree about slots configuration"));
            if agreed {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err(DevstackError::Setup(format!(
            "the Redis Cluster in {} did not settle within {SETTLE:?}",
            self.dir.display()
        )))
    }

    /// Waits until every replica's link to its master is up.
    fn wait_replicas_linked(&self) -> Result<(), DevstackError> {
        let deadline = Instant::now() + SETTLE;
        while Instant::now() < deadline {
            let linked = self.alive().all(|port| {
                self.cli(port, &["INFO", "replication"]).is_ok_and(|info| {
                    info.contains("role:master") || info.lines().any(|l| l.trim() == "master_link_status:up")
                })
            });
            if linked {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err(DevstackError::Setup(format!("the replicas did not link to their masters within {SETTLE:?}")))
    }

    fn cluster_nodes(&self) -> Result<Vec<NodeLine>, DevstackError> {
        let mut last = None;
        for port in self.alive() {
            match self.cluster_nodes_from(port) {
                Ok(nodes) => return Ok(nodes),
                Err(error) => last = Some(error),
            }
        }
        Err(last.unwrap_or_else(|| DevstackError::Setup("no Redis Cluster node is alive".into())))
    }

    fn cluster_nodes_from(&self, port: u16) -> Result<Vec<NodeLine>, DevstackError> {
        Ok(self.cli(port, &["CLUSTER", "NODES"])?.lines().filter_map(NodeLine::parse).collect())
    }

    fn pids(&self) -> Vec<u32> {
        self.nodes.iter().filter_map(|node| node.server.as_ref()?.pid()).collect()
    }
}

fn serves(nodes: &[NodeLine], port: u16, slot: u16) -> bool {
    nodes.iter().any(|node| node.port == port && node.slots.iter().any(|(a, b)| (*a..=*b).contains(&slot)))
}

/// One line of `CLUSTER NODES`.
#[derive(Debug)]
struct NodeLine {
    id: String,
    port: u16,
    /// A master alive with slots.
    serves: bool,
    master_id: Option<String>,
    slots: Vec<(u16, u16)>,
}

impl NodeLine {
    /// `<id> <ip:port@cport> <flags> <master> <ping> <pong> <epoch> <link> <slot> …`
    fn parse(line: &str) -> Option<Self> {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let port = fields.get(1)?.split('@').next()?.rsplit(':').next()?.parse().ok()?;
        let flags = fields.get(2)?;
        let failed = flags.contains("fail") && !flags.contains("fail?");
        let master = flags.split(',').any(|flag| flag == "master");
        let slots: Vec<(u16, u16)> = fields
            .iter()
            .skip(8)
            .filter(|field| !field.starts_with('['))
            .filter_map(|range| match range.split_once('-') {
                Some((first, last)) => Some((first.parse().ok()?, last.parse().ok()?)),
                None => range.parse().ok().map(|slot| (slot, slot)),
            })
            .collect();
        Some(Self {
            id: (*fields.first()?).to_owned(),
            port,
            serves: master && !failed && !slots.is_empty(),
            master_id: (*fields.get(3)? != "-").then(|| fields[3].to_owned()),
            slots,
        })
    }
}

/// The test process's cluster (three masters, no replicas), started on first
/// use in its own temporary directory and stopped by a watchdog when the
/// process exits. Tests share it with a key prefix each; a test that kills
/// nodes or moves slots starts a cluster of its own.
pub fn shared_test_cluster() -> Result<&'static RedisCluster, DevstackError> {
    static SHARED: OnceLock<Result<(RedisCluster, TempDir, Watchdog), String>> = OnceLock::new();
    SHARED
        .get_or_init(|| {
            let start = || -> Result<(RedisCluster, TempDir, Watchdog), DevstackError> {
                let dir = TempDir::new().map_err(|source| DevstackError::Spawn { what: "test dir".into(), source })?;
                let cluster = RedisCluster::start(dir.path(), 3, 0)?;
                let watchdog = Watchdog::spawn("the tests' Redis Cluster", "TERM", &cluster.pids(), dir.path().into())?;
                Ok((cluster, dir, watchdog))
            };
            start().map_err(|error| error.to_string())
        })
        .as_ref()
        .map(|(cluster, _, _)| cluster)
        .map_err(|error| DevstackError::Setup(format!("the tests' Redis Cluster: {error}")))
}
