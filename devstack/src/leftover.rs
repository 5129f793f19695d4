//! Servers left running by an earlier run whose parent died without
//! stopping them (`kill -9`, a closed terminal): found by the pid files
//! [`Server`](crate::Server) writes, checked to be the server expected, and
//! stopped.
//!
//! A pid file can outlive its process, and the pid can since have been
//! given to an unrelated process, so nothing is signalled unless
//! `/proc/PID` shows the expected executable running in the expected
//! directory.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::process::{send_signal, StopSignal};
use crate::DevstackError;

/// How long a leftover server gets to stop gracefully before SIGKILL.
const GRACE: Duration = Duration::from_secs(30);
/// How long a SIGKILLed leftover may take to disappear.
const KILL_WAIT: Duration = Duration::from_secs(5);

/// What a start found where an earlier run may have left a server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Leftover {
    /// No pid file: the earlier run stopped its server, or there was none.
    None,
    /// The earlier run's server was still running; it was stopped.
    Stopped { pid: u32 },
    /// A pid file whose process is gone, or is not this server (its pid
    /// was reused): nothing was signalled and the file was removed.
    StalePidFile { pid: Option<u32> },
}

/// The server a pid file should name.
#[derive(Debug)]
pub(crate) struct Expected<'a> {
    /// What it is, for the log.
    pub what: &'a str,
    /// Its executables (paths, or bare names). The running process matches
    /// one by file name, its own or its symlink target's (Debian's
    /// `redis-server` is a link to `redis-check-rdb`).
    pub programs: &'a [PathBuf],
    /// Its working directory: the data directory it was started in.
    pub cwd: &'a Path,
    /// How it is asked to stop.
    pub stop: StopSignal,
}

/// Stops the `program` an earlier run started as `name` in `dir` (with
/// [`Server::start`](crate::Server::start)) if it is still running there:
/// for servers of this project's own, such as the payments sandbox.
pub fn stop_leftover_program(what: &str, dir: &Path, name: &str, program: &Path) -> Result<Leftover, DevstackError> {
    let programs = [program.to_path_buf()];
    let expected = Expected { what, programs: &programs, cwd: dir, stop: StopSignal::Term };
    stop_leftover(&dir.join(format!("{name}.pid")), &expected)
}

/// Stops the server named by `pid_file` if it is `expected` and running;
/// removes the file in every case. Says in the log what it did.
pub(crate) fn stop_leftover(pid_file: &Path, expected: &Expected<'_>) -> Result<Leftover, DevstackError> {
    let Ok(text) = std::fs::read_to_string(pid_file) else { return Ok(Leftover::None) };
    let pid = text.lines().next().and_then(|line| line.trim().parse::<u32>().ok());
    let outcome = match pid {
        Some(pid) if is_expected(pid, expected) => {
            tracing::warn!(
                what = expected.what,
                pid,
                pid_file = %pid_file.display(),
                "Found a server left running by an earlier run; stopping it."
            );
            stop(pid, expected)?;
            tracing::info!(what = expected.what, pid, "Stopped the server left running by an earlier run.");
            Leftover::Stopped { pid }
        }
        _ => {
            tracing::info!(
                what = expected.what,
                pid,
                pid_file = %pid_file.display(),
                "Removed a stale pid file: its process has exited or is not this server."
            );
            Leftover::StalePidFile { pid }
        }
    };
    let _ = std::fs::remove_file(pid_file);
    Ok(outcome)
}

fn stop(pid: u32, expected: &Expected<'_>) -> Result<(), DevstackError> {
    send_signal(pid, expected.stop.name());
    if wait_gone(pid, GRACE) {
        return Ok(());
    }
    tracing::warn!(what = expected.what, pid, "The leftover server did not stop in time; killing it.");
    send_signal(pid, "KILL");
    if wait_gone(pid, KILL_WAIT) {
        return Ok(());
    }
    Err(DevstackError::LeftoverRunning { what: expected.what.to_owned(), pid, timeout: GRACE + KILL_WAIT })
}

/// Whether `pid` is a live process running one of the expected programs in
/// the expected directory. Any doubt (no such process, not allowed to look)
/// answers no.
fn is_expected(pid: u32, expected: &Expected<'_>) -> bool {
    let proc = PathBuf::from(format!("/proc/{pid}"));
    if !is_alive(pid) {
        return false;
    }
    let Ok(exe) = std::fs::read_link(proc.join("exe")) else { return false };
    // A binary replaced since it started (a rebuilt broker) reads "NAME (deleted)".
    let exe_name = exe.file_name().map(|name| name.to_string_lossy().trim_end_matches(" (deleted)").to_owned());
    let names: Vec<String> = expected
        .programs
        .iter()
        .flat_map(|program| [Some(program.clone()), program.canonicalize().ok()])
        .flatten()
        .filter_map(|path| path.file_name().map(|name| name.to_string_lossy().into_owned()))
        .collect();
    if !exe_name.is_some_and(|name| names.contains(&name)) {
        return false;
    }
    let (Ok(cwd), Ok(wanted)) = (std::fs::read_link(proc.join("cwd")), expected.cwd.canonicalize()) else {
        return false;
    };
    cwd == wanted
}

/// Whether `pid` exists and has not exited. An exited process nobody has
/// reaped yet (a zombie) counts as gone.
pub(crate) fn is_alive(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return false };
    // "PID (COMMAND) STATE ...": the command may hold spaces and parentheses.
    let state = stat.rfind(')').and_then(|end| stat[end + 1..].split_whitespace().next());
    !matches!(state, None | Some("Z" | "X"))
}

fn wait_gone(pid: u32, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if !is_alive(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    !is_alive(pid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_pid_file_is_no_leftover() {
        let dir = crate::TempDir::new().expect("dir");
        let expected = Expected { what: "x", programs: &["x".into()], cwd: dir.path(), stop: StopSignal::Term };
        assert_eq!(stop_leftover(&dir.path().join("x.pid"), &expected).expect("ok"), Leftover::None);
    }

    #[test]
    fn a_pid_file_naming_another_program_is_stale_and_nothing_is_signalled() {
        let dir = crate::TempDir::new().expect("dir");
        // This test process: alive, but not a program called "redis-server".
        let own = std::process::id();
        let pid_file = dir.path().join("redis.pid");
        std::fs::write(&pid_file, own.to_string()).expect("write");
        let expected =
            Expected { what: "redis", programs: &["redis-server".into()], cwd: dir.path(), stop: StopSignal::Term };
        assert_eq!(stop_leftover(&pid_file, &expected).expect("ok"), Leftover::StalePidFile { pid: Some(own) });
        assert!(!pid_file.exists());
        assert!(is_alive(own));
    }

    #[test]
    fn a_garbled_pid_file_is_stale() {
        let dir = crate::TempDir::new().expect("dir");
        let pid_file = dir.path().join("broker.pid");
        std::fs::write(&pid_file, "not a pid").expect("write");
        let expected =
            Expected { what: "broker", programs: &["nisshi".into()], cwd: dir.path(), stop: StopSignal::Term };
        assert_eq!(stop_leftover(&pid_file, &expected).expect("ok"), Leftover::StalePidFile { pid: None });
    }
}
