//! The local run's secrets, and where the tools find them.
//!
//! `seckill dev` keeps an admin token, a JWT secret and the key sealing its
//! draws' seeds in its data directory (created on the first run, readable by
//! the owner only), so `seckill token`, `seckill loadgen` and curl work
//! against it without configuration.
//! Real deployments pass their secrets by environment instead.

use std::io::{Read, Write};
use std::path::Path;

use anyhow::Context;
use seckill_core::config::Secret;

/// The admin token's file in the data directory.
pub(crate) const ADMIN_TOKEN_FILE: &str = "admin-token";
/// The JWT signing secret's file in the data directory.
pub(crate) const JWT_SECRET_FILE: &str = "jwt-secret";
/// The key sealing draws' and waiting rooms' seeds into the log (`[draw]
/// seal_key`).
pub(crate) const DRAW_SEAL_KEY_FILE: &str = "draw-seal-key";

/// The secret in `dir/name`, created with 32 random bytes (hex) if missing.
pub(crate) fn local_secret(dir: &Path, name: &str) -> anyhow::Result<Secret> {
    let path = dir.join(name);
    if let Some(existing) = read_secret(&path)? {
        return Ok(existing);
    }
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut random| random.read_exact(&mut bytes))
        .context("reading /dev/urandom")?;
    let value: String = bytes.iter().map(|byte| format!("{byte:02x}")).collect();
    let mut file = owner_only(&path).with_context(|| format!("creating {}", path.display()))?;
    file.write_all(value.as_bytes()).with_context(|| format!("writing {}", path.display()))?;
    Ok(Secret::new(value))
}

/// The secret stored in `path`, if the file exists.
pub(crate) fn read_secret(path: &Path) -> anyhow::Result<Option<Secret>> {
    match std::fs::read_to_string(path) {
        Ok(value) => Ok(Some(Secret::new(value.trim()))),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(error).with_context(|| format!("reading {}", path.display())),
    }
}

/// `given`, else the secret stored in `file`; an error naming both when
/// neither exists.
pub(crate) fn given_or_stored(given: Option<String>, file: &Path, what: &str, flag: &str) -> anyhow::Result<Secret> {
    if let Some(value) = given {
        return Ok(Secret::new(value));
    }
    read_secret(file)?.with_context(|| {
        format!(
            "no {what}: pass {flag} (or its environment variable), or run `seckill dev`, which stores one in {}",
            file.display()
        )
    })
}

#[cfg(unix)]
fn owner_only(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path)
}

#[cfg(not(unix))]
fn owner_only(path: &Path) -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new().write(true).create_new(true).open(path)
}
