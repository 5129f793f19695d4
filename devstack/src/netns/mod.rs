//! Test hosts: network namespaces on a bridge of the test's own, so a test
//! can cut and heal the network between servers that otherwise share one
//! machine.
//!
//! [`TestNet::create`] makes a bridge with a private /24 no other test or
//! lane uses (`10.X.Y.0/24`, the bridge `.1`, the root namespace's own
//! address on it) and [`TestNet::host`] adds a namespace per host, joined to
//! the bridge by a veth pair, with `.2`, `.3`, … of its own. Nothing routes
//! out: hosts get only the /24's connected route, and forwarding is never
//! turned on, so traffic stays between the hosts, the root namespace and
//! each namespace's loopback. A server runs on a host through
//! [`Host::command`] (`ip netns exec NAME program …`).
//!
//! Faults are `tc` rules on both ends of a host's veth pair ([`fault`]):
//! [`Host::isolate`] and [`Host::cut_from`] drop packets silently (as a
//! pulled cable or a dead switch port does, so TCP waits for its timeouts
//! rather than being refused), [`Host::heal`] undoes them.
//!
//! A host made by [`TestNet::emulated_host`] instead has its link go
//! through a user-space link emulator ([`emulated`]), which
//! [`Host::impair`] slows and makes lossy as `netem` would; the kernels
//! here have no `netem`. Opt-in: veth hosts pay nothing for it.
//!
//! Everything is removed when the [`TestNet`] is dropped, a panicking test
//! too. A run killed outright (SIGKILL) leaves its namespaces and links
//! behind: their names carry the creating process's id ([`names`]), and
//! the next [`TestNet::create`] removes those whose process is gone.
//!
//! Only root may create namespaces. [`TestNet::create`] says so with
//! [`NetError::NotPermitted`], which a test reports as skipped, never as a
//! pass.

mod emulated;
mod fault;
mod names;

use std::net::Ipv4Addr;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::process::Server;

pub use emulated::Impairment;

/// Why the test's network could not be made.
#[derive(Debug, thiserror::Error)]
pub enum NetError {
    /// The machine does not let this process create namespaces (not root,
    /// or a container without the capability): tests that need them skip.
    #[error("network namespaces are not permitted here ({0})")]
    NotPermitted(String),
    /// A command that should have worked failed.
    #[error("`{command}` failed: {stderr}")]
    Command { command: String, stderr: String },
    #[error("no free 10.X.Y.0/24 for a test network")]
    NoSubnet,
    /// Only an emulated host's link can be slowed or made lossy.
    #[error("test host {0} is not emulated (made by `TestNet::host`, not `emulated_host`)")]
    NotEmulated(String),
}

/// Runs `ip`/`tc` with `args`; its stderr as the error.
pub(crate) fn run(program: &str, args: &[&str]) -> Result<(), NetError> {
    let output = Command::new(program).args(args).output().map_err(|error| NetError::Command {
        command: format!("{program} {}", args.join(" ")),
        stderr: error.to_string(),
    })?;
    if output.status.success() {
        return Ok(());
    }
    Err(NetError::Command {
        command: format!("{program} {}", args.join(" ")),
        stderr: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
    })
}

/// Nets made by this process, for names unique within it.
static NETS: AtomicU32 = AtomicU32::new(0);

/// A bridge and the test hosts on it; all removed when dropped.
#[derive(Debug)]
pub struct TestNet {
    /// The prefix of every name this net made ([`names`]).
    tag: String,
    /// The first three octets of the /24.
    subnet: [u8; 3],
    hosts: Vec<Host>,
    /// The link emulator, once an emulated host asked for it.
    emulator: Option<Arc<emulated::Emulator>>,
}

/// One test host: a network namespace with one address on the bridge.
#[derive(Clone, Debug)]
pub struct Host {
    /// The name the test gave it (`redis`, `ingress`, …), for messages.
    label: String,
    /// The namespace's name (`ip netns exec NAME`).
    netns: String,
    /// Its address on the bridge.
    ip: Ipv4Addr,
    /// The veth end (or TAP device) in the root namespace, on the bridge;
    /// the end inside the namespace is `eth0`.
    outer: String,
    /// The emulator its link goes through; None for a veth pair.
    emulator: Option<Arc<emulated::Emulator>>,
}

impl TestNet {
    /// A bridge on a /24 of its own, with no hosts yet. Removes first what
    /// killed runs left behind.
    pub fn create() -> Result<Self, NetError> {
        names::remove_leftovers();
        let tag = names::tag(std::process::id(), NETS.fetch_add(1, Ordering::Relaxed));
        let probe = format!("{tag}-probe");
        if let Err(error) = run("ip", &["netns", "add", &probe]) {
            let reason = match error {
                NetError::Command { stderr, .. } => stderr,
                other => other.to_string(),
            };
            return Err(NetError::NotPermitted(reason));
        }
        run("ip", &["netns", "del", &probe])?;
        let subnet = free_subnet()?;
        let net = Self { tag, subnet, hosts: Vec::new(), emulator: None };
        let bridge = net.bridge();
        run("ip", &["link", "add", &bridge, "type", "bridge"])?;
        run("ip", &["addr", "add", &format!("{}/24", net.root_ip()), "dev", &bridge])?;
        run("ip", &["link", "set", &bridge, "up"])?;
        tracing::info!(bridge, subnet = %net.root_ip(), "Made a test network.");
        Ok(net)
    }

    fn bridge(&self) -> String {
        names::bridge(&self.tag)
    }

    /// The root namespace's address on the bridge: where the test itself,
    /// and whatever runs outside the hosts, is seen from a host.
    pub fn root_ip(&self) -> Ipv4Addr {
        Ipv4Addr::new(self.subnet[0], self.subnet[1], self.subnet[2], 1)
    }

    /// Adds a host called `label` with the next address on the bridge.
    pub fn host(&mut self, label: &str) -> Result<Host, NetError> {
        let (index, ip) = self.next_address()?;
        let host = Host {
            label: label.to_owned(),
            netns: names::netns(&self.tag, index),
            ip,
            outer: names::veth(&self.tag, index),
            emulator: None,
        };
        // Recorded first, so a failure half-way is still removed on drop.
        self.hosts.push(host.clone());
        run("ip", &["netns", "add", &host.netns])?;
        run("ip", &["link", "add", &host.outer, "type", "veth", "peer", "name", "eth0", "netns", &host.netns])?;
        run("ip", &["link", "set", &host.outer, "master", &self.bridge(), "up"])?;
        self.configure(&host)?;
        tracing::info!(host = label, ip = %host.ip, netns = host.netns, "Made a test host.");
        Ok(host)
    }

    /// The next host's index and address.
    fn next_address(&self) -> Result<(usize, Ipv4Addr), NetError> {
        let index = self.hosts.len() + 1;
        let octet = u8::try_from(index + 1).map_err(|_| NetError::NoSubnet)?;
        Ok((index, Ipv4Addr::new(self.subnet[0], self.subnet[1], self.subnet[2], octet)))
    }

    /// Gives a new host's `eth0` (in its namespace, on the bridge) its
    /// address, sets it and the loopback up, and readies its cuts.
    fn configure(&self, host: &Host) -> Result<(), NetError> {
        run("ip", &["-n", &host.netns, "addr", "add", &format!("{}/24", host.ip), "dev", "eth0"])?;
        run("ip", &["-n", &host.netns, "link", "set", "eth0", "up"])?;
        run("ip", &["-n", &host.netns, "link", "set", "lo", "up"])?;
        fault::prepare(host)
    }

    /// Every host made so far.
    pub fn hosts(&self) -> &[Host] {
        &self.hosts
    }
}

impl Drop for TestNet {
    fn drop(&mut self) {
        // The emulator's devices go with it, before their namespaces.
        if let Some(emulator) = &self.emulator {
            emulator.stop();
        }
        // The namespace's name goes with `netns del`, but a process still
        // inside keeps the namespace (and its veth end) alive: deleting the
        // outer end removes the pair whatever runs inside.
        for host in &self.hosts {
            let _ = run("ip", &["link", "del", &host.outer]);
            let _ = run("ip", &["netns", "del", &host.netns]);
        }
        let _ = run("ip", &["link", "del", &self.bridge()]);
    }
}

impl Host {
    /// Its address on the bridge.
    pub fn ip(&self) -> Ipv4Addr {
        self.ip
    }

    /// The name the test gave it.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// The namespace's name.
    pub fn netns(&self) -> &str {
        &self.netns
    }

    /// `program` run on this host: `ip netns exec NAME program`, which
    /// execs it, so the child's pid is the program's.
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut command = Command::new("ip");
        command.args(["netns", "exec", &self.netns]).arg(program);
        command
    }

    /// `command` run on this host instead (its program, arguments,
    /// environment and directory), as [`command`](Self::command) runs one.
    pub fn wrap(&self, command: &Command) -> Command {
        let mut wrapped = self.command(command.get_program());
        wrapped.args(command.get_args());
        for (key, value) in command.get_envs() {
            match value {
                Some(value) => wrapped.env(key, value),
                None => wrapped.env_remove(key),
            };
        }
        if let Some(dir) = command.get_current_dir() {
            wrapped.current_dir(dir);
        }
        wrapped
    }

    /// Waits up to `timeout` until `server`, started on this host, accepts
    /// connections on `port` of the host's address. (`Server::wait_ready`
    /// cannot be used: it looks the listener up in the root namespace's
    /// socket tables, where a host's sockets are not.)
    pub fn wait_listening(
        &self,
        server: &mut Server,
        port: u16,
        timeout: Duration,
    ) -> Result<(), crate::DevstackError> {
        let addr = std::net::SocketAddr::from((self.ip, port));
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            server.check_running()?;
            if std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        Err(crate::DevstackError::NotReady {
            what: format!("the server on host {}", self.label),
            addr,
            timeout,
            log: crate::process::LogEnd::of(server.log()),
        })
    }
}

/// A 10.X.Y.0/24 that no interface or route of this machine uses, chosen
/// at random in 10.128.0.0/9 so tests and lanes running at once (each of
/// which checks the same way) rarely even try the same one.
fn free_subnet() -> Result<[u8; 3], NetError> {
    let taken = Command::new("ip").args(["-4", "route", "show", "table", "all"]).output();
    let taken = taken.map(|output| String::from_utf8_lossy(&output.stdout).into_owned()).unwrap_or_default();
    let seed = uuid::Uuid::new_v4().as_u128();
    for attempt in 0..64u32 {
        let bits = (seed >> (attempt * 2)) as u16;
        let [high, low] = bits.to_be_bytes();
        let subnet = [10, 0x80 | (high & 0x7f), low];
        let prefix = format!("10.{}.{}.", subnet[1], subnet[2]);
        if subnet[2] != 0 && !taken.contains(&prefix) {
            return Ok(subnet);
        }
    }
    Err(NetError::NoSubnet)
}
