//! Where PostgreSQL's programs are, and which account runs the server.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::DevstackError;

/// A directory holding `initdb`, `postgres` and `psql`; overrides the search.
pub const POSTGRES_BIN_VAR: &str = "SECKILL_POSTGRES_BIN";

/// Where Debian installs each PostgreSQL major version's programs.
const DEBIAN_ROOT: &str = "/usr/lib/postgresql";

/// The account the server runs as when we are root, which `initdb` and
/// `postgres` refuse to run as.
pub const POSTGRES_USER: &str = "postgres";

/// PostgreSQL's programs and the account that runs the server.
#[derive(Clone, Debug)]
pub(crate) struct PgInstall {
    bin: PathBuf,
    /// uid and gid of [`POSTGRES_USER`] when we are root; None: run as we are.
    run_as: Option<(u32, u32)>,
}

impl PgInstall {
    /// Finds the programs ([`POSTGRES_BIN_VAR`], else the newest
    /// `/usr/lib/postgresql/N/bin`, else PATH) and the account.
    pub(crate) fn find() -> Result<Self, DevstackError> {
        let bin = bin_dir().ok_or_else(|| {
            DevstackError::NotInstalled(format!(
                "PostgreSQL (initdb, postgres; looked in ${POSTGRES_BIN_VAR}, {DEBIAN_ROOT}/*/bin and PATH)"
            ))
        })?;
        let run_as = if effective_uid() == Some(0) { Some(postgres_account()?) } else { None };
        Ok(Self { bin, run_as })
    }

    /// The path of `program` of this installation.
    pub(crate) fn path(&self, program: &str) -> PathBuf {
        self.bin.join(program)
    }

    /// A command running `program` of this installation.
    pub(crate) fn program(&self, program: &str) -> Command {
        Command::new(self.path(program))
    }

    /// A command running `program` as the server's account.
    pub(crate) fn server_program(&self, program: &str) -> Command {
        let mut command = self.program(program);
        if let Some((uid, gid)) = self.run_as {
            command.uid(uid).gid(gid);
        }
        command
    }

    /// Makes `dir` (created if missing) the server account's, and checks
    /// that account can reach it: an unprivileged user cannot pass a parent
    /// directory closed to others (root's home, a `mktemp -d` directory).
    pub(crate) fn prepare_dir(&self, dir: &Path) -> Result<(), DevstackError> {
        let io = |source| DevstackError::Spawn { what: format!("PostgreSQL's directory {}", dir.display()), source };
        std::fs::create_dir_all(dir).map_err(io)?;
        let Some((uid, gid)) = self.run_as else { return Ok(()) };
        std::os::unix::fs::chown(dir, Some(uid), Some(gid)).map_err(io)?;
        let reachable = self
            .server_program("psql")
            .env_clear()
            .arg("--version")
            .current_dir(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success());
        if reachable {
            Ok(())
        } else {
            Err(DevstackError::Setup(format!(
                "PostgreSQL runs as the unprivileged user `{POSTGRES_USER}` (it refuses root), which cannot reach {}: a \
                 parent directory is closed to other users; choose a data directory it can reach (e.g. under /var/tmp) \
                 or open the parents with `chmod o+x`",
                dir.display()
            )))
        }
    }
}

/// `psql`: the one beside the server's programs, else the one on PATH.
pub(crate) fn psql_path() -> Option<PathBuf> {
    bin_dir().map(|bin| bin.join("psql")).filter(|psql| psql.is_file()).or_else(|| crate::process::find_binary("psql"))
}

fn bin_dir() -> Option<PathBuf> {
    let has_server = |dir: &Path| dir.join("initdb").is_file() && dir.join("postgres").is_file();
    if let Some(dir) = std::env::var_os(POSTGRES_BIN_VAR).map(PathBuf::from) {
        return has_server(&dir).then_some(dir);
    }
    let newest_debian = std::fs::read_dir(DEBIAN_ROOT)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| Some((entry.file_name().to_str()?.parse::<u32>().ok()?, entry.path().join("bin"))))
        .filter(|(_, bin)| has_server(bin))
        .max_by_key(|(version, _)| *version)
        .map(|(_, bin)| bin);
    newest_debian
        .or_else(|| crate::process::find_binary("initdb").and_then(|initdb| initdb.parent().map(Path::to_path_buf)))
}

/// Our effective user id, from `/proc/self/status` (no unsafe call).
fn effective_uid() -> Option<u32> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with("Uid:"))?;
    // "Uid: real effective saved filesystem"
    line.split_whitespace().nth(2)?.parse().ok()
}

/// uid and gid of [`POSTGRES_USER`], from `/etc/passwd`.
fn postgres_account() -> Result<(u32, u32), DevstackError> {
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    passwd
        .lines()
        .map(|line| line.split(':').collect::<Vec<_>>())
        .find(|fields| fields.first() == Some(&POSTGRES_USER))
        .and_then(|fields| Some((fields.get(2)?.parse().ok()?, fields.get(3)?.parse().ok()?)))
        .ok_or_else(|| {
            DevstackError::Setup(format!(
                "running as root, PostgreSQL needs the unprivileged user `{POSTGRES_USER}` (initdb refuses root), and \
                 /etc/passwd has none: install Debian's postgresql package, or `useradd --system {POSTGRES_USER}`"
            ))
        })
}
