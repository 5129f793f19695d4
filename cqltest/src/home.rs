//! Where the Cassandra distribution is installed.
//!
//! `scripts/setup` puts it in `~/.local/share/seckill/cassandra-2.1.0`;
//! `SECKILL_CASSANDRA_HOME` points elsewhere (another install, or CI's cache).

use std::ffi::OsString;
use std::path::PathBuf;

use crate::CqlTestError;

/// Environment variable naming the Cassandra home directory.
pub const CASSANDRA_HOME_VAR: &str = "SECKILL_CASSANDRA_HOME";

/// The installed Cassandra's home directory (it has `bin/cassandra`).
pub fn cassandra_home() -> Result<PathBuf, CqlTestError> {
    find(std::env::var_os(CASSANDRA_HOME_VAR), std::env::var_os("HOME"))
}

fn find(configured: Option<OsString>, user_home: Option<OsString>) -> Result<PathBuf, CqlTestError> {
    let home = match configured {
        Some(home) => PathBuf::from(home),
        None => PathBuf::from(user_home.unwrap_or_default()).join(".local/share/seckill/cassandra-2.1.0"),
    };
    if home.join("bin/cassandra").is_file() {
        Ok(home)
    } else {
        Err(CqlTestError::NotInstalled(home))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_install_says_how_to_get_one() {
        let error = find(Some("/nonexistent/cassandra".into()), None).expect_err("nothing is installed there");
        assert_eq!(error.to_string(), "Cassandra is not installed at /nonexistent/cassandra; run scripts/setup");
    }

    #[test]
    fn the_default_is_under_the_users_data_directory() {
        let error = find(None, Some("/nonexistent-home".into())).expect_err("nothing is installed there");
        assert!(matches!(error, CqlTestError::NotInstalled(path)
            if path == std::path::Path::new("/nonexistent-home/.local/share/seckill/cassandra-2.1.0")));
    }
}
