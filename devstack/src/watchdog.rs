//! Stops servers a test process started for the whole process (statics,
//! never dropped) when the process exits, however it exits.
//!
//! A shell waits for end of input on a pipe only the test process holds
//! open; the kernel closes it when the process exits, and the shell then
//! signals the servers and removes their directory.

use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{ChildStdin, Command, Stdio};

use crate::DevstackError;

/// Keeps the watchdog shell waiting while this lives (in a static: for
/// the whole process).
#[derive(Debug)]
pub(crate) struct Watchdog {
    _pipe: ChildStdin,
}

impl Watchdog {
    /// The shell's script: `$1` the signal, `$2` the directory, then the
    /// servers' pids. It waits at most 30 s for them to exit before removing
    /// the directory (an exited server nobody reaps still answers `kill -0`).
    const SCRIPT: &str = r#"read -r _ || :
signal="$1"
dir="$2"
shift 2
kill "-$signal" "$@" 2>/dev/null
i=0
while [ "$i" -lt 300 ] && kill -0 "$@" 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
rm -rf "$dir""#;

    /// Watches `pids` (`what`, for messages): sends them `signal` (a `kill`
    /// signal name) at exit, then removes `dir`.
    pub(crate) fn spawn(what: &str, signal: &str, pids: &[u32], dir: PathBuf) -> Result<Self, DevstackError> {
        let spawn_error = |source| DevstackError::Spawn { what: format!("the watchdog of {what}"), source };
        let mut child = Command::new("sh")
            .args(["-c", Self::SCRIPT, "sh", signal])
            .arg(dir)
            .args(pids.iter().map(u32::to_string))
            // Its own process group: a Ctrl-C on the test run must reach the
            // test process, not kill the watchdog before it can act.
            .process_group(0)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(spawn_error)?;
        let mut pipe = child.stdin.take().expect("stdin was piped");
        // Nothing is written until exit; a flush proves the pipe is open.
        pipe.flush().map_err(spawn_error)?;
        Ok(Self { _pipe: pipe })
    }
}
