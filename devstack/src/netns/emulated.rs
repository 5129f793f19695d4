//! Test hosts whose link can be slowed and made lossy, as `netem` would
//! (`delay D J loss P`) on a kernel that has none.
//!
//! The kernels here lack `sch_netem`, so a user-space emulator does its
//! work: `devstack/netem/link_emulator.py`, one process per [`TestNet`]
//! that asks for an emulated host, in the root namespace. For each such
//! host it owns two TAP devices, the host's `eth0` and a port on the
//! bridge, and forwards frames between them, delaying and dropping them
//! as the host's [`Impairment`] says. Unimpaired, a frame passes at once
//! (a round trip costs about a tenth of a millisecond more than a veth's).
//!
//! The emulator answers each command once it applies, so a test knows its
//! impairment is on. It exits when its stdin closes, the test process
//! gone however it ended, and the kernel then removes its devices: a
//! killed run leaves at most the namespaces, which [`names`](super::names)
//! sweeps as it does a veth host's.
//!
//! The `tc` cuts ([`Host::isolate`], [`Host::cut_from`]) work on an
//! emulated host too: its devices get the same qdiscs as a veth pair.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::{Host, NetError, TestNet};

/// How a host's link is slowed and made lossy, in each direction: each
/// frame waits a time drawn uniformly from `delay ± jitter` (so frames may
/// reorder, as with netem) and is dropped with probability `loss`. A round
/// trip is thus delayed about twice `delay`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Impairment {
    pub delay: Duration,
    pub jitter: Duration,
    /// In [0, 1].
    pub loss: f64,
}

/// The emulator process of one net, shared by its emulated hosts.
#[derive(Debug)]
pub(super) struct Emulator {
    /// None once stopped: the devices are gone with the process.
    io: Mutex<Option<Io>>,
}

#[derive(Debug)]
struct Io {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

/// The emulator's source, beside this crate.
fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("netem/link_emulator.py")
}

impl Emulator {
    /// Starts the emulator, with no hosts yet.
    fn start() -> Result<Self, NetError> {
        let script = script();
        // Its stderr is the test's: the emulator writes there only when it
        // fails.
        let mut child = Command::new("python3")
            .arg("-u")
            .arg(&script)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|error| NetError::Command {
                command: format!("python3 {}", script.display()),
                stderr: error.to_string(),
            })?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            unreachable!("both were asked to be piped")
        };
        let io = Io { child, stdin, stdout: BufReader::new(stdout) };
        Ok(Self { io: Mutex::new(Some(io)) })
    }

    /// Sends `line` and returns the answer's text after `ok`; an `error`
    /// answer, or none (the emulator gone), as an error.
    fn ask(&self, line: &str) -> Result<String, NetError> {
        let failed = |stderr: String| NetError::Command { command: format!("link emulator: {line}"), stderr };
        // A poisoned lock means a test panicked mid-command; the process
        // itself is still whole, so its io is still usable.
        let mut guard = self.io.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let io = guard.as_mut().ok_or_else(|| failed("the emulator was stopped".to_owned()))?;
        writeln!(io.stdin, "{line}").map_err(|error| failed(error.to_string()))?;
        let mut answer = String::new();
        let read = io.stdout.read_line(&mut answer).map_err(|error| failed(error.to_string()))?;
        if read == 0 {
            return Err(failed("the emulator exited".to_owned()));
        }
        match answer.trim_end().strip_prefix("ok") {
            Some(rest) => Ok(rest.trim().to_owned()),
            None => Err(failed(answer.trim_end().to_owned())),
        }
    }

    /// Closes its stdin and waits for it to exit, which removes every
    /// device it made. Idempotent.
    pub(super) fn stop(&self) {
        let io = self.io.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
        if let Some(Io { mut child, stdin, stdout }) = io {
            drop(stdin);
            drop(stdout);
            // It exits on end of input within one turn of its loop.
            let _ = child.wait();
        }
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        self.stop();
    }
}

impl TestNet {
    /// Adds a host called `label`, as [`host`](Self::host) does, whose link
    /// goes through the net's link emulator, so [`Host::impair`] can slow
    /// it and make it lossy. The emulator starts with the first such host.
    pub fn emulated_host(&mut self, label: &str) -> Result<Host, NetError> {
        let emulator = match &self.emulator {
            Some(emulator) => Arc::clone(emulator),
            None => {
                let started = Arc::new(Emulator::start()?);
                self.emulator = Some(Arc::clone(&started));
                started
            }
        };
        let (index, ip) = self.next_address()?;
        let host = Host {
            label: label.to_owned(),
            netns: super::names::netns(&self.tag, index),
            ip,
            outer: super::names::tap(&self.tag, index),
            emulator: Some(emulator),
        };
        // Recorded first, so a failure half-way is still removed on drop.
        self.hosts.push(host.clone());
        super::run("ip", &["netns", "add", &host.netns])?;
        let inner = super::names::tap_inner(&self.tag, index);
        host.emulate(&format!("add {} {inner} {} {} {}", host.netns, host.outer, host.netns, self.bridge()))?;
        self.configure(&host)?;
        tracing::info!(host = label, ip = %host.ip, netns = host.netns, "Made an emulated test host.");
        Ok(host)
    }
}

impl Host {
    /// A command to this host's emulator; what it answered after `ok`.
    fn emulate(&self, line: &str) -> Result<String, NetError> {
        match &self.emulator {
            Some(emulator) => emulator.ask(line),
            None => Err(NetError::NotEmulated(self.label.clone())),
        }
    }

    /// Slows this host's link and makes it lossy as `impairment` says, in
    /// both directions, until [`clear_impairment`](Self::clear_impairment)
    /// or [`heal`](Self::heal); a new impairment replaces the last. Applies
    /// to every frame read after it returns. Only for a host made by
    /// [`TestNet::emulated_host`].
    pub fn impair(&self, impairment: Impairment) -> Result<(), NetError> {
        let Impairment { delay, jitter, loss } = impairment;
        let line = format!(
            "impair {} {} {} {loss}",
            self.netns,
            delay.as_secs_f64() * 1_000.0,
            jitter.as_secs_f64() * 1_000.0
        );
        self.emulate(&line)?;
        tracing::info!(host = self.label, ?delay, ?jitter, loss, "Impaired a test host's link.");
        Ok(())
    }

    /// Lifts the impairment: frames pass at once again (those already
    /// waiting still leave when due).
    pub fn clear_impairment(&self) -> Result<(), NetError> {
        self.emulate(&format!("clear {}", self.netns))?;
        tracing::info!(host = self.label, "Cleared a test host's impairment.");
        Ok(())
    }

    /// The emulator's counts for this host's link, both directions summed:
    /// `frames=… lost=… overflow=… queued=…` (forwarded, dropped by the
    /// loss, dropped beyond the 1000 frames a direction may hold, waiting).
    pub fn link_stats(&self) -> Result<String, NetError> {
        self.emulate(&format!("stats {}", self.netns))
    }

    /// Whether this host's link goes through the emulator.
    pub fn is_emulated(&self) -> bool {
        self.emulator.is_some()
    }
}
