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
//!
//! [`RedisCluster::start_on`] runs each node on a test host of its own
//! (`crate::netns`), so a test can cut a node off the network as a failure
//! would, rather than stop it. Every `redis-cli` call to such a cluster is
//! bounded (`timeout`): a call to a node cut off would otherwise wait for
//! TCP's own timeouts, minutes.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::process::{find_binary, free_port, send_signal, Server};
use crate::watchdog::Watchdog;
use crate::{DevstackError, Host, TempDir};

/// How long the cluster may take to agree on its configuration.
const SETTLE: Duration = Duration::from_secs(30);
/// How long a node may be unreachable before the others mark it failed
/// (short: a test kills masters).
const NODE_TIMEOUT_MS: u32 = 2_000;
/// The longest a `redis-cli` call to a cluster on test hosts may take: a
/// node answers within milliseconds, or it is cut off.
const CALL_BOUND: Duration = Duration::from_secs(2);

/// One node of the cluster.
#[derive(Debug)]
struct Node {
    /// Unique within the cluster, hosted or not: the node's name in every
    /// method.
    port: u16,
    /// The address it listens on and announces.
    ip: Ipv4Addr,
    /// The test host it runs on (None: this machine's 127.0.0.1).
    host: Option<Host>,
    /// None once killed.
    server: Option<Server>,
}

/// A running Redis Cluster; every node is stopped when dropped.
#[derive(Debug)]
pub struct RedisCluster {
    nodes: Vec<Node>,
    dir: PathBuf,
    cli: PathBuf,
    /// Its nodes run on test hosts: every `redis-cli` call is bounded.
    hosted: bool,
}

/// What `INFO replication` says of a node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Replication {
    /// `role:master`.
    pub master: bool,
    /// Its replication offset: `master_repl_offset` on a master,
    /// `slave_repl_offset` on a replica (what it has received).
    pub offset: u64,
    /// A replica's master (`master_host:master_port`), as ip and port.
    pub following: Option<(Ipv4Addr, u16)>,
    /// A replica's link to its master is up.
    pub linked: bool,
}

impl Replication {
    fn parse(info: &str) -> Self {
        let field = |name: &str| {
            info.lines().find_map(|line| Some(line.trim().strip_prefix(name)?.strip_prefix(':')?.to_owned()))
        };
        let master = field("role").as_deref() == Some("master");
        let offset = if master { field("master_repl_offset") } else { field("slave_repl_offset") };
        let following = field("master_host")
            .and_then(|ip| ip.parse().ok())
            .zip(field("master_port").and_then(|port| port.parse().ok()));
        Self {
            master,
            offset: offset.and_then(|offset| offset.parse().ok()).unwrap_or(0),
            following,
            linked: field("master_link_status").as_deref() == Some("up"),
        }
    }
}

impl RedisCluster {
    /// Starts `masters` masters with `replicas` replicas each, in `dir`,
    /// and waits until every node reports `cluster_state:ok`, every slot is
    /// served and the nodes agree on who serves it.
    pub fn start(dir: &Path, masters: usize, replicas: usize) -> Result<Self, DevstackError> {
        let count = masters * (1 + replicas);
        Self::start_nodes(dir, masters, replicas, &vec![None; count])
    }

    /// As [`start`](Self::start), each node on a test host of its own
    /// (`hosts`: one per node, `masters × (1 + replicas)`), listening on
    /// the host's address and announcing it to the others and the clients.
    pub fn start_on(hosts: &[Host], dir: &Path, masters: usize, replicas: usize) -> Result<Self, DevstackError> {
        let count = masters * (1 + replicas);
        if hosts.len() != count {
            return Err(DevstackError::Setup(format!(
                "{masters} masters with {replicas} replicas each need {count} test hosts, not {}",
                hosts.len()
            )));
        }
        let hosts: Vec<Option<Host>> = hosts.iter().cloned().map(Some).collect();
        Self::start_nodes(dir, masters, replicas, &hosts)
    }

    /// Starts a node per entry of `hosts` (None: on 127.0.0.1), joins them
    /// and waits until the cluster is settled.
    fn start_nodes(dir: &Path, masters: usize, replicas: usize, hosts: &[Option<Host>]) -> Result<Self, DevstackError> {
        let server = find_binary("redis-server").ok_or_else(|| DevstackError::NotInstalled("redis-server".into()))?;
        let cli = find_binary("redis-cli").ok_or_else(|| DevstackError::NotInstalled("redis-cli".into()))?;
        let mut nodes = Vec::new();
        for host in hosts {
            nodes.push(start_node(&server, dir, host.as_ref())?);
        }
        let hosted = hosts.iter().any(Option::is_some);
        let cluster = Self { nodes, dir: dir.to_owned(), cli, hosted };
        let mut create = vec!["--cluster".to_owned(), "create".to_owned()];
        create.extend(cluster.nodes.iter().map(|node| format!("{}:{}", node.ip, node.port)));
        create.extend(["--cluster-replicas".to_owned(), replicas.to_string(), "--cluster-yes".to_owned()]);
        cluster.cli_args(&create, SETTLE)?;
        cluster.wait_settled(masters * (1 + replicas))?;
        if replicas > 0 {
            cluster.wait_replicas_linked()?;
        }
        Ok(cluster)
    }

    /// `redis://IP:PORT` of every node alive: the seed nodes.
    pub fn seed_urls(&self) -> Vec<String> {
        self.nodes
            .iter()
            .filter(|node| node.server.is_some())
            .map(|node| format!("redis://{}:{}", node.ip, node.port))
            .collect()
    }

    /// The test host the node on `port` runs on (None: not on one, or no
    /// such node).
    pub fn host_of(&self, port: u16) -> Option<&Host> {
        self.node(port)?.host.as_ref()
    }

    fn node(&self, port: u16) -> Option<&Node> {
        self.nodes.iter().find(|node| node.port == port)
    }

    /// The address of the node on `port` (127.0.0.1 unless on a host).
    fn ip(&self, port: u16) -> Ipv4Addr {
        self.node(port).map_or(Ipv4Addr::LOCALHOST, |node| node.ip)
    }

    /// The port of the node listening at `ip`:`port`, if it is one of
    /// this cluster's (how a replica names its master).
    pub fn port_at(&self, ip: Ipv4Addr, port: u16) -> Option<u16> {
        self.nodes.iter().find(|node| node.ip == ip && node.port == port).map(|node| node.port)
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
        self.node(port)?.server.as_ref()?.pid()
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

    /// The port of the master serving `slot` as the node on `from` sees it
    /// (a node on the majority's side of a partition, say).
    pub fn master_of_seen_from(&self, from: u16, slot: u16) -> Result<Option<u16>, DevstackError> {
        let nodes = self.cluster_nodes_from(from)?;
        let serving = |node: &&NodeLine| node.serves && node.slots.iter().any(|(a, b)| (*a..=*b).contains(&slot));
        Ok(nodes.iter().find(serving).map(|node| node.port))
    }

    /// The ports of every replica of the master on `master`.
    pub fn replicas_of(&self, master: u16) -> Result<Vec<u16>, DevstackError> {
        let nodes = self.cluster_nodes()?;
        let Some(id) = nodes.iter().find(|node| node.port == master).map(|node| node.id.clone()) else {
            return Ok(Vec::new());
        };
        let mut replicas: Vec<u16> =
            nodes.iter().filter(|node| node.master_id.as_deref() == Some(id.as_str())).map(|node| node.port).collect();
        replicas.sort_unstable();
        Ok(replicas)
    }

    /// What `INFO replication` of the node on `port` says.
    pub fn replication(&self, port: u16) -> Result<Replication, DevstackError> {
        Ok(Replication::parse(&self.cli(port, &["INFO", "replication"])?))
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
            let (to_ip, to_port) = (self.ip(to).to_string(), to.to_string());
            self.cli(from, &["MIGRATE", &to_ip, &to_port, "", "0", "5000", "KEYS", &key])?;
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

    /// Runs `redis-cli -p PORT ARGS…` (with `-h IP` for a node on a test
    /// host) and returns its output, trimmed.
    pub fn cli(&self, port: u16, args: &[&str]) -> Result<String, DevstackError> {
        let mut all = Vec::new();
        if self.hosted {
            all.extend(["-h".to_owned(), self.ip(port).to_string()]);
        }
        all.extend(["-p".to_owned(), port.to_string()]);
        all.extend(args.iter().map(|arg| (*arg).to_owned()));
        self.cli_args(&all, CALL_BOUND)
    }

    /// `redis-cli ARGS…`; on a hosted cluster killed after `bound` (and
    /// then an error), since a node cut off never answers.
    fn cli_args(&self, args: &[String], bound: Duration) -> Result<String, DevstackError> {
        let mut command = if self.hosted {
            let mut command = Command::new("timeout");
            command.arg(format!("{}", bound.as_secs_f64())).arg(&self.cli);
            command
        } else {
            Command::new(&self.cli)
        };
        let output =
            command.args(args).output().map_err(|source| DevstackError::Spawn { what: "redis-cli".into(), source })?;
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
            let check = ["--cluster".into(), "check".into(), format!("{}:{first}", self.ip(first))];
            let agreed = ready
                && self
                    .cli_args(&check, SETTLE)
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

/// Starts a node with its data in a directory of its own under `dir`, on
/// `host` (listening on its address, announcing it, open to the other
/// hosts) or on 127.0.0.1.
fn start_node(server: &Path, dir: &Path, host: Option<&Host>) -> Result<Node, DevstackError> {
    // Unique on hosts too, though each has its ports to itself: the port
    // names the node.
    let port = free_port();
    let node_dir = dir.join(format!("node-{port}"));
    std::fs::create_dir_all(&node_dir)
        .map_err(|source| DevstackError::Spawn { what: "a Redis Cluster node".into(), source })?;
    let ip = host.map_or(Ipv4Addr::LOCALHOST, Host::ip);
    let mut command = host.map_or_else(|| Command::new(server), |host| host.command(server));
    command
        .args(["--port", &port.to_string(), "--bind", &ip.to_string(), "--daemonize", "no"])
        .args(["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"])
        .args(["--cluster-node-timeout", &NODE_TIMEOUT_MS.to_string()])
        .args(["--save", "", "--appendonly", "no"])
        .args(["--dir", &node_dir.to_string_lossy()]);
    let what = "a Redis Cluster node";
    let Some(host) = host else {
        command.args(["--protected-mode", "yes"]);
        let addr = SocketAddr::from((ip, port));
        let server = Server::start(what, command, &node_dir, "redis", addr, crate::redis::READY_WITHIN)?;
        return Ok(Node { port, ip, host: None, server: Some(server) });
    };
    // Its clients and peers are on other hosts, never on its loopback.
    command.args(["--protected-mode", "no", "--cluster-announce-ip", &ip.to_string()]);
    let mut server = Server::spawn(what, command, &node_dir, "redis")?;
    host.wait_listening(&mut server, port, crate::redis::READY_WITHIN)?;
    Ok(Node { port, ip, host: Some(host.clone()), server: Some(server) })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replication_is_read_from_info_as_redis_7_writes_it() {
        let master = "# Replication\r\nrole:master\r\nconnected_slaves:2\r\nmaster_repl_offset:1553910\r\n";
        assert_eq!(
            Replication::parse(master),
            Replication { master: true, offset: 1_553_910, following: None, linked: false }
        );
        let replica = "# Replication\r\nrole:slave\r\nmaster_host:10.200.3.4\r\nmaster_port:11845\r\n\
                       master_link_status:up\r\nslave_repl_offset:1589638\r\nmaster_repl_offset:1589638\r\n";
        assert_eq!(
            Replication::parse(replica),
            Replication {
                master: false,
                offset: 1_589_638,
                following: Some((Ipv4Addr::new(10, 200, 3, 4), 11_845)),
                linked: true
            }
        );
        let cut_off = replica.replace("master_link_status:up", "master_link_status:down");
        assert!(!Replication::parse(&cut_off).linked);
    }
}
