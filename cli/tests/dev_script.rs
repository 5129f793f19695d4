//! `scripts/dev --help` answers at once: it prints the usage and exits
//! before `scripts/setup` installs anything or cargo builds anything (a new
//! user asking for help once waited for both), and the usage names every
//! option of `seckill dev`, with its default.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use seckill_devstack::TempDir;

fn repository_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn executable(path: &Path, text: &str) {
    fs::write(path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    fs::set_permissions(path, fs::Permissions::from_mode(0o755)).expect("chmod");
}

/// `scripts/dev` run with `args` from a copy of the repository's scripts in
/// which `scripts/setup` only leaves a mark and fails: its output, and
/// whether setup ran.
fn run_dev(args: &[&str]) -> (std::process::Output, bool) {
    let scratch = TempDir::new().expect("a scratch directory");
    let scripts = scratch.path().join("scripts");
    fs::create_dir_all(&scripts).expect("scripts/");
    let dev = fs::read_to_string(repository_root().join("scripts/dev")).expect("scripts/dev");
    executable(&scripts.join("dev"), &dev);
    executable(&scripts.join("setup"), "#!/usr/bin/env bash\ntouch \"$(dirname \"$0\")/../setup-ran\"\nexit 3\n");
    // No cargo on the PATH either: nothing may be built.
    let output = Command::new(scripts.join("dev")).args(args).env("PATH", "/usr/bin:/bin").output().expect("bash runs");
    let setup_ran = scratch.path().join("setup-ran").exists();
    (output, setup_ran)
}

#[test]
fn help_is_printed_before_anything_is_installed_or_built() {
    for args in [&["--help"][..], &["-h"], &["--port", "9000", "--help"]] {
        let (output, setup_ran) = run_dev(args);
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success() && !setup_ran,
            "scripts/dev {args:?} ran setup ({setup_ran}) or failed ({}):\n{stdout}{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(stdout.starts_with("Usage: scripts/dev"), "{args:?}:\n{stdout}");
    }
    // Without --help it goes on to setup, as before.
    let (output, setup_ran) = run_dev(&["--port", "9000"]);
    assert!(setup_ran && output.status.code() == Some(3), "{}", output.status);
}

/// The options `seckill dev --help` lists, each with its default if it has one.
fn seckill_dev_options() -> Vec<(String, Option<String>)> {
    let output = Command::new(env!("CARGO_BIN_EXE_seckill")).args(["dev", "--help"]).output().expect("seckill runs");
    assert!(output.status.success(), "seckill dev --help: {}", output.status);
    let help = String::from_utf8(output.stdout).expect("UTF-8");
    let mut options: Vec<(String, Option<String>)> = Vec::new();
    for line in help.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with('-') {
            let flag = trimmed.split_whitespace().find(|word| word.starts_with("--")).expect("a long flag");
            options.push((flag.trim_end_matches(',').to_owned(), None));
        }
        if let (Some(start), Some(last)) = (line.find("[default: "), options.last_mut()) {
            let value = &line[start + "[default: ".len()..];
            last.1 = Some(value[..value.find(']').expect("the default ends")].to_owned());
        }
    }
    options
}

#[test]
fn the_usage_names_every_option_of_seckill_dev_with_its_default() {
    let options = seckill_dev_options();
    assert!(options.len() >= 8, "{options:?}");
    let (output, _) = run_dev(&["--help"]);
    let usage = String::from_utf8(output.stdout).expect("UTF-8");
    // clap's --version goes to `seckill dev` like any option, once built.
    for (flag, default) in options.into_iter().filter(|(flag, _)| flag != "--version") {
        let line = usage
            .lines()
            .find(|line| line.split_whitespace().any(|word| word.trim_end_matches(',') == flag))
            .unwrap_or_else(|| panic!("scripts/dev --help does not name {flag}:\n{usage}"));
        if let Some(default) = default {
            assert!(line.contains(&format!("[default: {default}]")), "{flag}'s default is {default}: {line}");
        }
    }
}
