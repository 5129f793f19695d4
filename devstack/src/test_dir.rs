//! Where tests keep their data: fresh paths under `SECKILL_TEST_DIR` (set by
//! `scripts/test`, which removes it and stops what runs in it) or the system
//! temp dir, directories removed when dropped, and names nobody else uses.

use std::path::Path;

/// A fresh path `NAME-<uuid>` under `SECKILL_TEST_DIR` (set by
/// `scripts/test`, which removes it and stops what runs in it) or the
/// system temp dir; not created.
pub(crate) fn test_path(name: &str) -> std::path::PathBuf {
    let base = std::env::var_os("SECKILL_TEST_DIR").map(std::path::PathBuf::from).unwrap_or_else(std::env::temp_dir);
    base.join(format!("{name}-{}", uuid::Uuid::now_v7().simple()))
}

/// A temporary directory under `SECKILL_TEST_DIR` (set by `scripts/test`,
/// which cleans up after killed runs) or the system temp dir.
#[derive(Debug)]
pub struct TempDir(std::path::PathBuf);

impl TempDir {
    pub fn new() -> std::io::Result<Self> {
        let dir = test_path("t");
        std::fs::create_dir_all(&dir)?;
        Ok(Self(dir))
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        // A failing test's logs are what explains it; `scripts/test` removes
        // the whole run's directory when it exits.
        if std::thread::panicking() {
            eprintln!("kept the failing test's directory: {}", self.0.display());
            return;
        }
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A namespace no other test uses: `prefix` and 12 hex digits, usable as a
/// topic prefix, key prefix and database name.
pub fn unique_namespace(prefix: &str) -> String {
    format!("{prefix}{}", &uuid::Uuid::now_v7().simple().to_string()[20..])
}
