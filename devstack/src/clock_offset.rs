//! A process whose wall clock is off by a fixed offset, for tests of a
//! service with a wrong clock: `clock/clock_offset.c`, an `LD_PRELOAD` shim
//! compiled with the system's C compiler the first time a test asks for it,
//! moves the wall clock's readings by `CLOCK_SHIM_OFFSET_MS` and takes
//! the offset back off every absolute wall-clock deadline the program hands
//! to libc, so its timed waits last as long as it meant. libfaketime does
//! not do the latter, which stalls librdkafka (its condvar waits are
//! absolute wall-clock deadlines). Monotonic clocks are left alone, so
//! Rust's `Instant` and tokio's timers keep true time.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use crate::process::DevstackError;
use crate::test_dir::test_path;

/// The variable the shim reads its offset from, in milliseconds (signed).
pub const CLOCK_OFFSET_VAR: &str = "CLOCK_SHIM_OFFSET_MS";

const SOURCE: &str = include_str!("../clock/clock_offset.c");

/// The compiled shim.
#[derive(Debug)]
pub struct ClockShim {
    library: PathBuf,
}

impl ClockShim {
    /// The shim, compiled once per test process into a directory of its
    /// own under `SECKILL_TEST_DIR` (so a service restarted late in a run
    /// still finds it after the test that built it removed its own).
    pub fn get() -> Result<&'static Self, DevstackError> {
        static SHIM: OnceLock<Result<ClockShim, String>> = OnceLock::new();
        SHIM.get_or_init(|| Self::compile(&test_path("clock-shim")).map_err(|error| error.to_string()))
            .as_ref()
            .map_err(|error| DevstackError::Setup(error.clone()))
    }

    /// Compiles the shim into `dir`.
    fn compile(dir: &Path) -> Result<Self, DevstackError> {
        std::fs::create_dir_all(dir).map_err(|error| DevstackError::Setup(format!("{}: {error}", dir.display())))?;
        let source = dir.join("clock_offset.c");
        std::fs::write(&source, SOURCE)
            .map_err(|error| DevstackError::Setup(format!("{}: {error}", source.display())))?;
        let library = dir.join("libclock_offset.so");
        compile_c(&source, &library, &["-shared", "-fPIC"])?;
        Ok(Self { library })
    }

    /// The shared object to preload.
    pub fn library(&self) -> &Path {
        &self.library
    }

    /// The environment that runs a program `offset_ms` milliseconds off
    /// (ahead when positive) under the shim.
    pub fn env(&self, offset_ms: i64) -> Vec<(String, String)> {
        vec![
            ("LD_PRELOAD".to_owned(), self.library.to_string_lossy().into_owned()),
            (CLOCK_OFFSET_VAR.to_owned(), offset_ms.to_string()),
        ]
    }

    /// Runs `command` `offset_ms` milliseconds off.
    pub fn apply<'a>(&self, command: &'a mut Command, offset_ms: i64) -> &'a mut Command {
        command.envs(self.env(offset_ms))
    }
}

/// `cc -O2 -Wall -Wextra -Werror FLAGS -o OUTPUT SOURCE -ldl -lpthread`;
/// the compiler's complaint as the error.
fn compile_c(source: &Path, output: &Path, flags: &[&str]) -> Result<(), DevstackError> {
    let compiled = Command::new("cc")
        .args(["-O2", "-Wall", "-Wextra", "-Werror"])
        .args(flags)
        .arg("-o")
        .arg(output)
        .arg(source)
        .args(["-ldl", "-lpthread"])
        .output()
        .map_err(|error| match error.kind() {
            std::io::ErrorKind::NotFound => DevstackError::NotInstalled("cc".to_owned()),
            _ => DevstackError::Spawn { what: "cc".to_owned(), source: error },
        })?;
    if compiled.status.success() {
        return Ok(());
    }
    Err(DevstackError::Setup(format!(
        "cc could not compile {}: {}",
        source.display(),
        String::from_utf8_lossy(&compiled.stderr)
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{SystemTime, UNIX_EPOCH};

    const OFF_MS: i64 = 30_000;

    fn true_now() -> i64 {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).expect("after 1970");
        i64::try_from(now.as_secs()).expect("fits")
    }

    /// The seconds since the epoch `date` reads under the shim.
    fn date_under(offset_ms: i64) -> i64 {
        let shim = ClockShim::get().expect("the shim compiles");
        let output = shim.apply(&mut Command::new("date"), offset_ms).arg("+%s").output().expect("date runs");
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8_lossy(&output.stdout).trim().parse().expect("seconds")
    }

    #[test]
    fn date_reads_the_moved_wall_clock() {
        for offset in [OFF_MS, -OFF_MS, 0] {
            let (before, read, after) = (true_now(), date_under(offset), true_now());
            let expected = offset / 1000;
            assert!(
                (before + expected..=after + expected).contains(&read),
                "date read {read} under {offset} ms, true time {before}..={after}"
            );
        }
    }

    /// Every kind of absolute wall-clock deadline, computed on the moved
    /// clock as now + 300 ms, waits 300 ms of true time: 30 s fast, without
    /// the correction each would wait 30.3 s (librdkafka's stall under
    /// libfaketime); 30 s slow, each would return at once.
    #[test]
    fn timed_waits_last_what_the_program_meant() {
        let shim = ClockShim::get().expect("the shim compiles");
        let dir = test_path("clock-wait-check");
        std::fs::create_dir_all(&dir).expect("dir");
        let source = dir.join("wait_check.c");
        std::fs::write(&source, include_str!("../clock/wait_check.c")).expect("source");
        let program = dir.join("wait_check");
        compile_c(&source, &program, &[]).expect("wait_check compiles");
        for offset in [OFF_MS, -OFF_MS] {
            let before = true_now();
            let output = shim.apply(&mut Command::new(&program), offset).output().expect("runs");
            assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
            let report = String::from_utf8_lossy(&output.stdout);
            let mut waits = 0;
            for line in report.lines() {
                let fields: Vec<&str> = line.split_whitespace().collect();
                match fields.as_slice() {
                    ["wall", seconds] => {
                        let wall: i64 = seconds.parse().expect("seconds");
                        let moved = wall - before - offset / 1000;
                        assert!((0..=5).contains(&moved), "the program read {wall}, true time {before}: {report}");
                    }
                    [name, millis, _] => {
                        let millis: u64 = millis.parse().expect("milliseconds");
                        assert!((290..2_000).contains(&millis), "{name} waited {millis} ms under {offset} ms");
                        waits += 1;
                    }
                    _ => panic!("unexpected line {line:?} in {report}"),
                }
            }
            assert_eq!(waits, 8, "{report}");
        }
        std::fs::remove_dir_all(&dir).ok();
    }
}
